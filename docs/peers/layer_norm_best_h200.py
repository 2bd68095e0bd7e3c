# The best LayerNorm kernel of the H200 search in docs/demo/h200-layer_norm.json (node n12).
"""KernelEvolve template candidate (row).

Operator (traced): row-wise over the last dimension: reductions [mean, mean], 1 row input(s), 2 vector(s)
Parameters: {"block_n": 2048, "max_one_pass": 16384, "max_rows": 16, "stages": 1, "strategy": "auto", "tile": 8192, "vec": 16}
"""

import math

import torch
import torch.nn as nn
import triton
import triton.language as tl

import torch
import torch.nn as nn
num_tokens = 4096
hidden_size = 4096


@triton.jit
def _ke_row_one_pass(in0_ptr, in1_ptr, in2_ptr, out0_ptr, M, N, ROWS: tl.constexpr, BLOCK_N: tl.constexpr):
    pid = tl.program_id(0)
    rows = pid * ROWS + tl.arange(0, ROWS)[:, None]
    rmask = rows < M
    roff = rows.to(tl.int64) * N
    cols = tl.arange(0, BLOCK_N)[None, :]
    cmask = cols < N
    mask = rmask & cmask
    v0 = tl.load(in0_ptr + cols, mask=cmask, other=0.0).to(tl.float32)
    v1 = tl.load(in1_ptr + cols, mask=cmask, other=0.0).to(tl.float32)
    v2 = tl.load(in2_ptr + roff + cols, mask=mask, other=0.0).to(tl.float32)
    v3 = tl.sum(tl.where(mask, v2, 0.0), axis=1)[:, None] / N
    v4 = v2 - v3
    v5 = v4 * v4
    v6 = tl.sum(tl.where(mask, v5, 0.0), axis=1)[:, None] / N
    v8 = v6 + (1e-05)
    v9 = tl.rsqrt(v8)
    v10 = v4 * v9
    v11 = v10 * v0
    v12 = v11 + v1
    tl.store(out0_ptr + roff + cols, v12, mask=mask)


@triton.jit
def _ke_row_looped(in0_ptr, in1_ptr, in2_ptr, out0_ptr, M, N, ROWS: tl.constexpr, BLOCK_N: tl.constexpr):
    pid = tl.program_id(0)
    rows = pid * ROWS + tl.arange(0, ROWS)[:, None]
    rmask = rows < M
    roff = rows.to(tl.int64) * N
    acc3 = tl.full([ROWS, BLOCK_N], 0.0, tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)[None, :]
        cmask = cols < N
        mask = rmask & cmask
        v2 = tl.load(in2_ptr + roff + cols, mask=mask, other=0.0).to(tl.float32)
        acc3 = acc3 + tl.where(mask, v2, 0.0)
    v3 = tl.sum(acc3, axis=1)[:, None] / N
    acc6 = tl.full([ROWS, BLOCK_N], 0.0, tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)[None, :]
        cmask = cols < N
        mask = rmask & cmask
        v2 = tl.load(in2_ptr + roff + cols, mask=mask, other=0.0).to(tl.float32)
        v4 = v2 - v3
        v5 = v4 * v4
        acc6 = acc6 + tl.where(mask, v5, 0.0)
    v6 = tl.sum(acc6, axis=1)[:, None] / N
    v8 = v6 + (1e-05)
    v9 = tl.rsqrt(v8)
    for start in range(0, N, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)[None, :]
        cmask = cols < N
        mask = rmask & cmask
        v0 = tl.load(in0_ptr + cols, mask=cmask, other=0.0).to(tl.float32)
        v1 = tl.load(in1_ptr + cols, mask=cmask, other=0.0).to(tl.float32)
        v2 = tl.load(in2_ptr + roff + cols, mask=mask, other=0.0).to(tl.float32)
        v4 = v2 - v3
        v10 = v4 * v9
        v11 = v10 * v0
        v12 = v11 + v1
        tl.store(out0_ptr + roff + cols, v12, mask=mask)


_PARAMS = {"block_n": 2048, "max_one_pass": 16384, "max_rows": 16, "stages": 1, "strategy": "auto", "tile": 8192, "vec": 16}


def _ke_config(M, N):
    """(one_pass, ROWS, BLOCK_N, num_warps, num_stages) for rows of length N."""
    p = _PARAMS
    full = triton.next_power_of_2(N)
    one_pass = p["strategy"] == "one_pass" or (
        p["strategy"] == "auto" and full <= p["max_one_pass"]
    )
    if one_pass:
        block_n = full
        rows = max(1, min(p["max_rows"], p["tile"] // block_n, triton.next_power_of_2(M)))
    else:
        block_n = min(p["block_n"], full)
        rows = 1
    warps = max(1, min(16, triton.next_power_of_2(max(1, rows * block_n // (32 * p['vec'])))))
    return one_pass, rows, block_n, warps, p["stages"]


class ModelNew(nn.Module):
    def __init__(self, hidden_size: int):
        super().__init__()
        self.norm = nn.LayerNorm(hidden_size, eps=1e-05)
        with torch.no_grad():
            self.norm.weight.add_(0.1 * torch.randn(hidden_size))
            self.norm.bias.add_(0.1 * torch.randn(hidden_size))

    def forward(self, x):
        odt = [self.norm.weight.dtype, self.norm.bias.dtype, x.dtype][0]
        for dt in [self.norm.weight.dtype, self.norm.bias.dtype, x.dtype]:
            odt = torch.promote_types(odt, dt)
        in0 = self.norm.weight.contiguous()
        in1 = self.norm.bias.contiguous()
        in2 = x.contiguous()
        out0 = torch.empty(x.shape, dtype=odt, device=x.device)
        N = x.shape[-1]
        M = x.numel() // N if N else 0
        if M == 0 or N == 0:
            return out0
        one_pass, rows, block_n, warps, stages = _ke_config(M, N)
        grid = (triton.cdiv(M, rows),)
        if one_pass:
            _ke_row_one_pass[grid](in0, in1, in2, out0, M, N, ROWS=rows, BLOCK_N=block_n,
                                   num_warps=warps, num_stages=stages)
        else:
            _ke_row_looped[grid](in0, in1, in2, out0, M, N, ROWS=rows, BLOCK_N=block_n,
                                 num_warps=warps, num_stages=stages)
        return out0
