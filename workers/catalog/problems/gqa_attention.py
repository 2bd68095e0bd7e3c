"""Grouped-query attention over a KV cache (Llama 3 8B's geometry): causal, the queries are the
last ``q_len`` positions of ``kv_len``, each group of ``num_heads // num_kv_heads`` query heads
shares one key/value head, softmax in float32 as Llama computes it."""

import math

import torch
import torch.nn as nn

batch = 32
num_heads = 32
num_kv_heads = 8
q_len = 1
kv_len = 1024
head_dim = 128


class Model(nn.Module):
    def __init__(self, num_heads: int, num_kv_heads: int, head_dim: int):
        super().__init__()
        self.groups = num_heads // num_kv_heads
        self.scale = 1.0 / math.sqrt(head_dim)

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        t, s = q.shape[-2], k.shape[-2]
        k = k.repeat_interleave(self.groups, dim=1)
        v = v.repeat_interleave(self.groups, dim=1)
        scores = torch.matmul(q, k.transpose(-2, -1)) * self.scale
        keep = torch.ones(t, s, dtype=torch.bool, device=q.device).tril(s - t)
        scores = scores.masked_fill(~keep, float("-inf"))
        probs = torch.softmax(scores.float(), dim=-1).to(q.dtype)
        return torch.matmul(probs, v)


def get_inputs():
    return [
        torch.randn(batch, num_heads, q_len, head_dim),
        torch.randn(batch, num_kv_heads, kv_len, head_dim),
        torch.randn(batch, num_kv_heads, kv_len, head_dim),
    ]


def get_init_inputs():
    return [num_heads, num_kv_heads, head_dim]
