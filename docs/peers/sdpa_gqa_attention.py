"""Peer for the gqa_attention catalog problem: PyTorch's own fused attention
(``F.scaled_dot_product_attention`` with ``enable_gqa``: FlashAttention / cuDNN / efficient
kernels on a GPU, whichever PyTorch picks), with the problem's causal mask (queries are the last
positions of the keys). Use as
``--baseline incumbent --incumbent docs/peers/sdpa_gqa_attention.py``."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, num_heads: int, num_kv_heads: int, head_dim: int):
        super().__init__()
        self.scale = 1.0 / math.sqrt(head_dim)

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        t, s = q.shape[-2], k.shape[-2]
        if t == 1 or t == s:  # no mask, or SDPA's own (top-left) causal mask, which is the same
            return F.scaled_dot_product_attention(
                q, k, v, is_causal=t > 1, scale=self.scale, enable_gqa=True
            )
        keep = torch.ones(t, s, dtype=torch.bool, device=q.device).tril(s - t)
        return F.scaled_dot_product_attention(
            q, k, v, attn_mask=keep, scale=self.scale, enable_gqa=True
        )
