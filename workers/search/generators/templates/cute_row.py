"""Row kernels in CuTe DSL (the ``cute`` back end, issue 15): RMSNorm and softmax over the last
dimension, one CTA per row.

A candidate compiles one kernel per case shape (``cute.compile`` with the shape static), so the
launch is chosen per case in Python (``_ke_plan``): the widest vector of 16 bytes or less that
divides the row (128-bit ``ld.global.v4`` where the row allows it), ``threads`` per CTA, and
either the whole row kept in registers between its reduction and its write (``registers``: one
read of the row) or read twice (``looped``), the first past ``max_per_thread`` elements a
thread. Partial vectors at the row's end are masked per vector (a row of 80 with 128 threads
reads 20 vectors of 4). Cluster reductions for rows too long for one CTA are the next step
(docs/cute_dsl.md).

``render(op, params)`` writes a complete candidate (``BACKEND = "cute"``, ``ModelNew`` with the
catalog problem's constructor). The compute core: no Django here.
"""

from __future__ import annotations

OPS = ("rms_norm", "softmax")
DEFAULTS = {"threads": 256, "max_per_thread": 64}
SPACE = {"threads": [64, 128, 256, 512, 1024], "max_per_thread": [16, 32, 64, 128]}

_HEAD = '''"""{title} in CuTe DSL, one CTA per row (templates/cute_row.py)."""

import math
import operator

import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
import torch
import torch.nn as nn
from cutlass.cute.runtime import from_dlpack

BACKEND = "cute"
THREADS = {threads}
MAX_PER_THREAD = {max_per_thread}


def _ke_plan(n, itemsize):
    """(vector width, vectors per thread, whether the row stays in registers) for a row of n."""
    vec = 16 // itemsize
    while vec > 1 and n % vec:
        vec //= 2
    per = max(1, math.ceil(n // vec / THREADS))
    return vec, per, per * vec <= MAX_PER_THREAD


@cute.jit
def _ke_block_reduce(value, op, smem, identity):
    """``value`` combined over the CTA: a warp shuffle, then the warps' partials in shared
    memory (every thread gets the result)."""
    tidx, _, _ = cute.arch.thread_idx()
    warps = cute.size(smem)
    value = cute.arch.warp_reduction(value, op)
    cute.arch.sync_threads()
    if tidx % 32 == 0:
        smem[tidx // 32] = value
    cute.arch.sync_threads()
    total = identity
    for w in cutlass.range_constexpr(warps):
        total = op(total, smem[w])
    return total
'''

_RMS = """

@cute.kernel
def _ke_rms_kernel(g_x: cute.Tensor, g_w: cute.Tensor, g_y: cute.Tensor, eps: cutlass.Float32,
                   vec: cutlass.Constexpr, per: cutlass.Constexpr, keep: cutlass.Constexpr):
    tidx, _, _ = cute.arch.thread_idx()
    row, _, _ = cute.arch.block_idx()
    n = cute.size(g_x, mode=[1])
    nvec = n // vec
    x_row = cute.zipped_divide(g_x[row, None], (vec,))
    y_row = cute.zipped_divide(g_y[row, None], (vec,))
    w_all = cute.zipped_divide(g_w, (vec,))
    smem = cutlass.utils.SmemAllocator()
    partial = smem.allocate_tensor(cutlass.Float32, cute.make_layout(THREADS // 32), 16)
    regs = cute.make_rmem_tensor((vec, per if keep else 1), cutlass.Float32)
    regs.fill(0.0)
    acc = cutlass.Float32(0.0)
    for k in cutlass.range_constexpr(per):
        j = tidx + k * THREADS
        if j < nvec:
            frag = cute.make_rmem_tensor((vec,), g_x.element_type)
            cute.autovec_copy(x_row[(None, j)], frag)
            v = frag.load().to(cutlass.Float32)
            if cutlass.const_expr(keep):
                regs[None, k].store(v)
            acc = acc + (v * v).reduce(cute.ReductionOp.ADD, cutlass.Float32(0.0), 0)
    total = _ke_block_reduce(acc, operator.add, partial, cutlass.Float32(0.0))
    rstd = cute.math.rsqrt(total / cutlass.Float32(n) + eps)
    for k in cutlass.range_constexpr(per):
        j = tidx + k * THREADS
        if j < nvec:
            wf = cute.make_rmem_tensor((vec,), g_w.element_type)
            cute.autovec_copy(w_all[(None, j)], wf)
            out = cute.make_rmem_tensor((vec,), g_y.element_type)
            if cutlass.const_expr(keep):
                v = regs[None, k].load()
            else:
                frag = cute.make_rmem_tensor((vec,), g_x.element_type)
                cute.autovec_copy(x_row[(None, j)], frag)
                v = frag.load().to(cutlass.Float32)
            out.store((v * rstd * wf.load().to(cutlass.Float32)).to(g_y.element_type))
            cute.autovec_copy(out, y_row[(None, j)])


@cute.jit
def _ke_rms(g_x: cute.Tensor, g_w: cute.Tensor, g_y: cute.Tensor, eps: cutlass.Float32,
            stream: cuda.CUstream, vec: cutlass.Constexpr, per: cutlass.Constexpr,
            keep: cutlass.Constexpr):
    rows = cute.size(g_x, mode=[0])
    _ke_rms_kernel(g_x, g_w, g_y, eps, vec, per, keep).launch(
        grid=(rows, 1, 1), block=(THREADS, 1, 1), stream=stream
    )
"""

_SOFTMAX = """

@cute.kernel
def _ke_softmax_kernel(g_x: cute.Tensor, g_y: cute.Tensor, vec: cutlass.Constexpr,
                       per: cutlass.Constexpr, keep: cutlass.Constexpr):
    tidx, _, _ = cute.arch.thread_idx()
    row, _, _ = cute.arch.block_idx()
    n = cute.size(g_x, mode=[1])
    nvec = n // vec
    x_row = cute.zipped_divide(g_x[row, None], (vec,))
    y_row = cute.zipped_divide(g_y[row, None], (vec,))
    smem = cutlass.utils.SmemAllocator()
    partial = smem.allocate_tensor(cutlass.Float32, cute.make_layout(THREADS // 32), 16)
    regs = cute.make_rmem_tensor((vec, per if keep else 1), cutlass.Float32)
    regs.fill(cutlass.Float32(-math.inf))
    top = cutlass.Float32(-math.inf)
    for k in cutlass.range_constexpr(per):
        j = tidx + k * THREADS
        if j < nvec:
            frag = cute.make_rmem_tensor((vec,), g_x.element_type)
            cute.autovec_copy(x_row[(None, j)], frag)
            v = frag.load().to(cutlass.Float32)
            if cutlass.const_expr(keep):
                regs[None, k].store(v)
            top = cute.math.max(top, v.reduce(cute.ReductionOp.MAX, cutlass.Float32(-math.inf), 0))
    top = _ke_block_reduce(top, cute.math.max, partial, cutlass.Float32(-math.inf))
    acc = cutlass.Float32(0.0)
    for k in cutlass.range_constexpr(per):
        j = tidx + k * THREADS
        if j < nvec:
            if cutlass.const_expr(keep):
                v = regs[None, k].load()
            else:
                frag = cute.make_rmem_tensor((vec,), g_x.element_type)
                cute.autovec_copy(x_row[(None, j)], frag)
                v = frag.load().to(cutlass.Float32)
            acc = acc + cute.math.exp(v - top).reduce(cute.ReductionOp.ADD, cutlass.Float32(0.0), 0)
    total = _ke_block_reduce(acc, operator.add, partial, cutlass.Float32(0.0))
    inv = cutlass.Float32(1.0) / total
    for k in cutlass.range_constexpr(per):
        j = tidx + k * THREADS
        if j < nvec:
            if cutlass.const_expr(keep):
                v = regs[None, k].load()
            else:
                frag = cute.make_rmem_tensor((vec,), g_x.element_type)
                cute.autovec_copy(x_row[(None, j)], frag)
                v = frag.load().to(cutlass.Float32)
            out = cute.make_rmem_tensor((vec,), g_y.element_type)
            out.store((cute.math.exp(v - top) * inv).to(g_y.element_type))
            cute.autovec_copy(out, y_row[(None, j)])


@cute.jit
def _ke_softmax(g_x: cute.Tensor, g_y: cute.Tensor, stream: cuda.CUstream,
                vec: cutlass.Constexpr, per: cutlass.Constexpr, keep: cutlass.Constexpr):
    rows = cute.size(g_x, mode=[0])
    _ke_softmax_kernel(g_x, g_y, vec, per, keep).launch(
        grid=(rows, 1, 1), block=(THREADS, 1, 1), stream=stream
    )
"""

_MODEL_RMS = """

_COMPILED = {}


def _stream(x):
    if x.is_cuda:
        return cuda.CUstream(torch.cuda.current_stream(x.device).cuda_stream)
    return cuda.CUstream(0)


class ModelNew(nn.Module):
    def __init__(self, hidden_size: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        x2 = x.reshape(-1, shape[-1]).contiguous()
        y = torch.empty_like(x2)
        if x2.numel() == 0:
            return y.reshape(shape)
        w = self.weight.detach().to(x.dtype).contiguous()
        vec, per, keep = _ke_plan(x2.shape[1], x2.element_size())
        align = vec * x2.element_size()
        if x2.data_ptr() % align:  # a view that starts inside a vector: copy it
            x2 = x2.clone()
        args = [from_dlpack(t, assumed_align=align) for t in (x2, w, y)]
        args += [cutlass.Float32(self.eps), _stream(x2)]
        key = (x2.dtype, tuple(x2.shape), x.device.type)
        fn = _COMPILED.get(key)
        if fn is None:
            fn = _COMPILED[key] = cute.compile(_ke_rms, *args, vec, per, keep)
        fn(*args)
        return y.reshape(shape)
"""

_MODEL_SOFTMAX = """

_COMPILED = {}


def _stream(x):
    if x.is_cuda:
        return cuda.CUstream(torch.cuda.current_stream(x.device).cuda_stream)
    return cuda.CUstream(0)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        x2 = x.reshape(-1, shape[-1]).contiguous()
        y = torch.empty_like(x2)
        if x2.numel() == 0:
            return y.reshape(shape)
        vec, per, keep = _ke_plan(x2.shape[1], x2.element_size())
        align = vec * x2.element_size()
        if x2.data_ptr() % align:  # a view that starts inside a vector: copy it
            x2 = x2.clone()
        args = [from_dlpack(t, assumed_align=align) for t in (x2, y)] + [_stream(x2)]
        key = (x2.dtype, tuple(x2.shape), x.device.type)
        fn = _COMPILED.get(key)
        if fn is None:
            fn = _COMPILED[key] = cute.compile(_ke_softmax, *args, vec, per, keep)
        fn(*args)
        return y.reshape(shape)
"""

_PARTS = {
    "rms_norm": ("RMSNorm", _RMS, _MODEL_RMS),
    "softmax": ("Softmax over the last dimension", _SOFTMAX, _MODEL_SOFTMAX),
}


def render(op: str, params: dict | None = None) -> str:
    """A complete cute candidate for the catalog problem ``op`` with launch ``params``."""
    if op not in _PARTS:
        raise ValueError(f"no CuTe row template for {op!r} (have {', '.join(OPS)})")
    p = {**DEFAULTS, **(params or {})}
    for name, allowed in SPACE.items():
        if p[name] not in allowed:
            raise ValueError(f"{name}={p[name]!r}: one of {allowed}")
    title, kernel, model = _PARTS[op]
    head = _HEAD.format(title=title, threads=p["threads"], max_per_thread=p["max_per_thread"])
    return head + kernel + model


def main(argv=None) -> int:
    """``python -m workers.search.generators.templates.cute_row rms_norm --threads 128 >
    cand.py``: a candidate to evaluate (``python -m workers evaluate ... --candidate cand.py``)."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("op", choices=OPS)
    for name, allowed in SPACE.items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, choices=allowed,
                            default=DEFAULTS[name])  # fmt: skip
    args = parser.parse_args(argv)
    params = {name: getattr(args, name) for name in SPACE}
    print(render(args.op, params), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
