"""KernelEvolve template candidate (row).

Operator (traced): row-wise over the last dimension: reductions [mean], 1 row input(s), 1 vector(s)
Parameters: {"block_n": 2048, "max_one_pass": 16384, "max_rows": 16, "stages": 2, "strategy": "auto", "table": {"1,4096,bfloat16": [1, 1, 4096, 8, 1, 0, 0], "32,4096,bfloat16": [1, 1, 4096, 8, 1, 0, 0], "4096,4096,bfloat16": [1, 1, 4096, 8, 1, 0, 1, 1], "4096,5120,float32": [2, 1, 4096, 4, 1, 0, 0], "8192,8192,bfloat16": [0, 1, 2048, 16, 1, 0, 1, 1]}, "tile": 4096, "vec": 8}
"""

import math

import torch
import torch.nn as nn
import triton
import triton.language as tl

num_tokens = 4096
hidden_size = 4096
eps = 1e-06


@triton.jit
def _ke_row_one_pass(in0_ptr, in1_ptr, out0_ptr, M, N, ROWS: tl.constexpr, BLOCK_N: tl.constexpr, PROGRAMS: tl.constexpr, EV_T: tl.constexpr, EV_V: tl.constexpr, NC: tl.constexpr, MC: tl.constexpr):
    if NC > 0:
        N = NC
        M = MC
    pid = tl.program_id(0)
    if PROGRAMS == 0:
        tile = pid
        rows = tile * ROWS + tl.arange(0, ROWS)[:, None]
        rmask = rows < M
        roff = rows.to(tl.int64) * N
        cols = tl.arange(0, BLOCK_N)[None, :]
        cmask = cols < N
        mask = rmask & cmask
        v0 = tl.load(in0_ptr + cols, mask=cmask, other=0.0, eviction_policy=EV_V).to(tl.float32)
        v1 = tl.load(in1_ptr + roff + cols, mask=mask, other=0.0, eviction_policy=EV_T).to(tl.float32)
        v3 = v1 * v1
        v4 = tl.sum(tl.where(mask, v3, 0.0), axis=1)[:, None] / N
        v6 = v4 + (1e-06)
        v7 = tl.rsqrt(v6)
        v8 = v1 * v7
        v9 = v8 * v0
        tl.store(out0_ptr + roff + cols, v9, mask=mask)
    else:
        for tile in range(pid, tl.cdiv(M, ROWS), PROGRAMS):
            rows = tile * ROWS + tl.arange(0, ROWS)[:, None]
            rmask = rows < M
            roff = rows.to(tl.int64) * N
            cols = tl.arange(0, BLOCK_N)[None, :]
            cmask = cols < N
            mask = rmask & cmask
            v0 = tl.load(in0_ptr + cols, mask=cmask, other=0.0, eviction_policy=EV_V).to(tl.float32)
            v1 = tl.load(in1_ptr + roff + cols, mask=mask, other=0.0, eviction_policy=EV_T).to(tl.float32)
            v3 = v1 * v1
            v4 = tl.sum(tl.where(mask, v3, 0.0), axis=1)[:, None] / N
            v6 = v4 + (1e-06)
            v7 = tl.rsqrt(v6)
            v8 = v1 * v7
            v9 = v8 * v0
            tl.store(out0_ptr + roff + cols, v9, mask=mask)


@triton.jit
def _ke_row_looped(in0_ptr, in1_ptr, out0_ptr, M, N, ROWS: tl.constexpr, BLOCK_N: tl.constexpr, PROGRAMS: tl.constexpr, EV_T: tl.constexpr, EV_V: tl.constexpr, NC: tl.constexpr, MC: tl.constexpr):
    if NC > 0:
        N = NC
        M = MC
    pid = tl.program_id(0)
    if PROGRAMS == 0:
        tile = pid
        rows = tile * ROWS + tl.arange(0, ROWS)[:, None]
        rmask = rows < M
        roff = rows.to(tl.int64) * N
        acc4 = tl.full([ROWS, BLOCK_N], 0.0, tl.float32)
        for start in range(0, N, BLOCK_N):
            cols = start + tl.arange(0, BLOCK_N)[None, :]
            cmask = cols < N
            mask = rmask & cmask
            v1 = tl.load(in1_ptr + roff + cols, mask=mask, other=0.0, eviction_policy=EV_V).to(tl.float32)
            v3 = v1 * v1
            acc4 = acc4 + tl.where(mask, v3, 0.0)
        v4 = tl.sum(acc4, axis=1)[:, None] / N
        v6 = v4 + (1e-06)
        v7 = tl.rsqrt(v6)
        for start in range(0, N, BLOCK_N):
            cols = start + tl.arange(0, BLOCK_N)[None, :]
            cmask = cols < N
            mask = rmask & cmask
            v0 = tl.load(in0_ptr + cols, mask=cmask, other=0.0, eviction_policy=EV_V).to(tl.float32)
            v1 = tl.load(in1_ptr + roff + cols, mask=mask, other=0.0, eviction_policy=EV_T).to(tl.float32)
            v8 = v1 * v7
            v9 = v8 * v0
            tl.store(out0_ptr + roff + cols, v9, mask=mask)
    else:
        for tile in range(pid, tl.cdiv(M, ROWS), PROGRAMS):
            rows = tile * ROWS + tl.arange(0, ROWS)[:, None]
            rmask = rows < M
            roff = rows.to(tl.int64) * N
            acc4 = tl.full([ROWS, BLOCK_N], 0.0, tl.float32)
            for start in range(0, N, BLOCK_N):
                cols = start + tl.arange(0, BLOCK_N)[None, :]
                cmask = cols < N
                mask = rmask & cmask
                v1 = tl.load(in1_ptr + roff + cols, mask=mask, other=0.0, eviction_policy=EV_V).to(tl.float32)
                v3 = v1 * v1
                acc4 = acc4 + tl.where(mask, v3, 0.0)
            v4 = tl.sum(acc4, axis=1)[:, None] / N
            v6 = v4 + (1e-06)
            v7 = tl.rsqrt(v6)
            for start in range(0, N, BLOCK_N):
                cols = start + tl.arange(0, BLOCK_N)[None, :]
                cmask = cols < N
                mask = rmask & cmask
                v0 = tl.load(in0_ptr + cols, mask=cmask, other=0.0, eviction_policy=EV_V).to(tl.float32)
                v1 = tl.load(in1_ptr + roff + cols, mask=mask, other=0.0, eviction_policy=EV_T).to(tl.float32)
                v8 = v1 * v7
                v9 = v8 * v0
                tl.store(out0_ptr + roff + cols, v9, mask=mask)


@triton.jit
def _ke_row_split(in0_ptr, in1_ptr, out0_ptr, M, N, ROWS: tl.constexpr, BLOCK_N: tl.constexpr, PROGRAMS: tl.constexpr, EV_T: tl.constexpr, EV_V: tl.constexpr, NC: tl.constexpr, MC: tl.constexpr, BLOCK_B: tl.constexpr):
    if NC > 0:
        N = NC
        M = MC
    pid = tl.program_id(0)
    if PROGRAMS == 0:
        tile = pid
        rows = tile * ROWS + tl.arange(0, ROWS)[:, None]
        rmask = rows < M
        roff = rows.to(tl.int64) * N
        cols = tl.arange(0, BLOCK_N)[None, :]
        cmask = cols < N
        mask = rmask & cmask
        colsb = BLOCK_N + tl.arange(0, BLOCK_B)[None, :]
        cmaskb = colsb < N
        maskb = rmask & cmaskb
        v0 = tl.load(in0_ptr + cols, mask=cmask, other=0.0, eviction_policy=EV_V).to(tl.float32)
        v0b = tl.load(in0_ptr + colsb, mask=cmaskb, other=0.0, eviction_policy=EV_V).to(tl.float32)
        v1 = tl.load(in1_ptr + roff + cols, mask=mask, other=0.0, eviction_policy=EV_T).to(tl.float32)
        v1b = tl.load(in1_ptr + roff + colsb, mask=maskb, other=0.0, eviction_policy=EV_T).to(tl.float32)
        v3 = v1 * v1
        v3b = v1b * v1b
        v4 = (tl.sum(tl.where(mask, v3, 0.0), axis=1)[:, None] + tl.sum(tl.where(maskb, v3b, 0.0), axis=1)[:, None]) / N
        v6 = v4 + (1e-06)
        v7 = tl.rsqrt(v6)
        v8 = v1 * v7
        v8b = v1b * v7
        v9 = v8 * v0
        v9b = v8b * v0b
        tl.store(out0_ptr + roff + cols, v9, mask=mask)
        tl.store(out0_ptr + roff + colsb, v9b, mask=maskb)
    else:
        for tile in range(pid, tl.cdiv(M, ROWS), PROGRAMS):
            rows = tile * ROWS + tl.arange(0, ROWS)[:, None]
            rmask = rows < M
            roff = rows.to(tl.int64) * N
            cols = tl.arange(0, BLOCK_N)[None, :]
            cmask = cols < N
            mask = rmask & cmask
            colsb = BLOCK_N + tl.arange(0, BLOCK_B)[None, :]
            cmaskb = colsb < N
            maskb = rmask & cmaskb
            v0 = tl.load(in0_ptr + cols, mask=cmask, other=0.0, eviction_policy=EV_V).to(tl.float32)
            v0b = tl.load(in0_ptr + colsb, mask=cmaskb, other=0.0, eviction_policy=EV_V).to(tl.float32)
            v1 = tl.load(in1_ptr + roff + cols, mask=mask, other=0.0, eviction_policy=EV_T).to(tl.float32)
            v1b = tl.load(in1_ptr + roff + colsb, mask=maskb, other=0.0, eviction_policy=EV_T).to(tl.float32)
            v3 = v1 * v1
            v3b = v1b * v1b
            v4 = (tl.sum(tl.where(mask, v3, 0.0), axis=1)[:, None] + tl.sum(tl.where(maskb, v3b, 0.0), axis=1)[:, None]) / N
            v6 = v4 + (1e-06)
            v7 = tl.rsqrt(v6)
            v8 = v1 * v7
            v8b = v1b * v7
            v9 = v8 * v0
            v9b = v8b * v0b
            tl.store(out0_ptr + roff + cols, v9, mask=mask)
            tl.store(out0_ptr + roff + colsb, v9b, mask=maskb)


_PARAMS = {"block_n": 2048, "max_one_pass": 16384, "max_rows": 16, "stages": 2, "strategy": "auto", "tile": 4096, "vec": 8}
# Launch configurations tuned per shape ("M,N,dtype" -> [one_pass (0: looped, 1: one pass,
# 2: one pass over two chunks, BLOCK_N + the rest), ROWS, BLOCK_N, warps, stages, programs
# (0: one per tile; else a persistent launch), eviction hints (0/1), shape constants (0/1: M
# and N compiled into the kernel)]); any other shape takes the policy in _PARAMS.
_TABLE = {"1,4096,bfloat16": [1, 1, 4096, 8, 1, 0, 0], "32,4096,bfloat16": [1, 1, 4096, 8, 1, 0, 0], "4096,4096,bfloat16": [1, 1, 4096, 8, 1, 0, 1, 1], "4096,5120,float32": [2, 1, 4096, 4, 1, 0, 0], "8192,8192,bfloat16": [0, 1, 2048, 16, 1, 0, 1, 1]}
_CONFIGS = {}


def _ke_config(M, N, dtype):
    """(one_pass, ROWS, BLOCK_N, warps, stages, programs, hints, constant shape) for M rows
    of N (cached)."""
    key = (M, N, dtype)
    hit = _CONFIGS.get(key)
    if hit is None:
        tuned = _TABLE.get(f"{M},{N},{str(dtype).removeprefix('torch.')}")
        hit = (tuple(tuned) + (0, 0, 0))[:8] if tuned else _ke_policy(M, N) + (0,)
        _CONFIGS[key] = hit
    return hit


def _ke_policy(M, N):
    p = _PARAMS
    full = triton.next_power_of_2(max(N, 1))
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
    return one_pass, rows, block_n, warps, p["stages"], 0, 0


class ModelNew(nn.Module):
    def __init__(self, hidden_size: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size) + 0.1 * torch.randn(hidden_size))
        self.eps = eps

    def forward(self, x):
        odt = [self.weight.dtype, x.dtype][0]
        for dt in [self.weight.dtype, x.dtype]:
            odt = torch.promote_types(odt, dt)
        in0 = self.weight.contiguous()
        in1 = x.contiguous()
        out0 = torch.empty(x.shape, dtype=odt, device=x.device)
        N = x.shape[-1]
        M = math.prod(x.shape[:-1])
        if M == 0:
            return out0
        one_pass, rows, block_n, warps, stages, programs, hints, const = _ke_config(
            M, N, x.dtype
        )
        tiles = triton.cdiv(M, rows)
        grid = (min(tiles, programs) if programs else tiles,)
        ev_t, ev_v = ("evict_first", "evict_last") if hints else ("", "")
        nc, mc = (N, M) if const else (0, 0)
        if one_pass == 2:
            _ke_row_split[grid](in0, in1, out0, M, N, ROWS=rows, BLOCK_N=block_n,
                                BLOCK_B=triton.next_power_of_2(max(1, N - block_n)),
                                PROGRAMS=programs, EV_T=ev_t, EV_V=ev_v, NC=nc, MC=mc,
                                num_warps=warps, num_stages=stages)
        elif one_pass:
            _ke_row_one_pass[grid](in0, in1, out0, M, N, ROWS=rows, BLOCK_N=block_n, PROGRAMS=programs,
                                   EV_T=ev_t, EV_V=ev_v, NC=nc, MC=mc, num_warps=warps,
                                   num_stages=stages)
        else:
            _ke_row_looped[grid](in0, in1, out0, M, N, ROWS=rows, BLOCK_N=block_n, PROGRAMS=programs,
                                 EV_T=ev_t, EV_V=ev_v, NC=nc, MC=mc, num_warps=warps,
                                 num_stages=stages)
        return out0
