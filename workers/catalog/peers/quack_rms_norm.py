"""QuACK's RMSNorm, in the candidate format: a peer for the catalog's ``rms_norm``.

Calls ``quack.rmsnorm.rmsnorm_fwd(x, weight, eps=eps)`` (quack-kernels 0.6.5, the forward
without autograd): one CuTe DSL kernel, fp32 statistics, output in the input's dtype. Needs
``quack-kernels`` and its wheels where it runs (the GPU host); see README.md here.
"""

import quack
import quack.cache
import torch
import torch.nn as nn
from quack.rmsnorm import rmsnorm_fwd

# No .o cache on disk: every kernel compiles in this process through ``cute.compile``, where the
# sandbox's recorder sees it (README.md).
quack.cache.CACHE_ENABLED = False

DTYPES = (torch.float16, torch.bfloat16, torch.float32)


class ModelNew(nn.Module):
    def __init__(self, hidden_size: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size) + 0.1 * torch.randn(hidden_size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype not in DTYPES or self.weight.dtype not in DTYPES:
            raise TypeError(
                f"QuACK rmsnorm takes fp16/bf16/fp32, not x {x.dtype}, weight {self.weight.dtype}"
            )
        out, _, _ = rmsnorm_fwd(x.reshape(-1, x.shape[-1]).contiguous(), self.weight, eps=self.eps)
        return out.reshape(x.shape)
