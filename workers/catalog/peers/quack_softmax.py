"""QuACK's softmax over the last dimension, in the candidate format: a peer for the catalog's
``softmax``.

Calls ``quack.softmax.softmax_fwd(x)`` (quack-kernels 0.6.5, the forward without autograd): one
CuTe DSL kernel, online softmax in fp32, the row kept on chip (a thread-block cluster of up to
16 CTAs for long rows on Hopper), output in the input's dtype. Needs ``quack-kernels`` where it
runs (the GPU host); see README.md here.
"""

import quack
import quack.cache
import torch
import torch.nn as nn
from quack.softmax import softmax_fwd

# No .o cache on disk: every kernel compiles in this process through ``cute.compile``, where the
# sandbox's recorder sees it (README.md).
quack.cache.CACHE_ENABLED = False

DTYPES = (torch.float16, torch.bfloat16, torch.float32)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype not in DTYPES:
            raise TypeError(f"QuACK softmax takes fp16/bf16/fp32, not {x.dtype}")
        n = x.shape[-1]
        vector = 16 // x.element_size()  # it copies 16 bytes at a time, with no tail
        if n % vector:
            raise ValueError(f"QuACK softmax needs rows of a multiple of {vector} ({x.dtype}): {n}")
        return softmax_fwd(x.reshape(-1, n).contiguous()).reshape(x.shape)
