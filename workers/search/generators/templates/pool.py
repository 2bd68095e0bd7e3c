"""The ``pool`` family: max or average pooling over 1, 2 or 3 spatial dimensions
(``workers.search.lowering_pool``).

Every program computes BLOCK output elements (of the flattened output: batch and channel rows
times the spatial positions; their coordinates in 32-bit arithmetic wherever the tensors'
indices fit it: a 64-bit division per coordinate cost these kernels half their speed against
compile on the H200; with ``static`` 1, the default, every size a compile-time constant, as
in compile's kernels); each walks its window (KD x KH x KW, unrolled) reading the input
where the window is inside it, with -inf (max) or 0 (average) outside, in fp32. An average
divides by the window's size clipped to the padded input (``count_include_pad``), by the number
of positions inside the input, or by ``divisor_override``. ``window`` "flat" reads each whole
window as one vector (the program a BLOCK x KD*KH*KW tile, reduced along it, as compile's
reduction kernel for a pool; a window over 4096 elements takes "tile"); "tile" reads each
window row as one vector (the program a BLOCK x KW tile, the row's elements across threads,
reduced along it): where the stride is the window's width the tile is one contiguous run of
the input, and few outputs with wide windows (KernelBench 45: 25,600 windows of 11x11) still
spread over threads; "loop" walks the window element by element (one thread an output). Fewer
spatial dimensions are the leading ones of three, of size 1. The window's geometry is read from
the model's one pooling module when it has one (its constructor may take other sizes than the
trace's), else as traced.
"""

from __future__ import annotations

import json

from workers.search.generators.templates.common import _forward_head, _header
from workers.search.ir import Plan

_KERNEL = """
@triton.jit
def _ke_pool_start(TOTAL, D, H, W, OD, OH, OW, SD: tl.constexpr, SH: tl.constexpr,
                   SW: tl.constexpr, PD: tl.constexpr, PH: tl.constexpr, PW: tl.constexpr,
                   BLOCK: tl.constexpr, I32: tl.constexpr):
    # The program's BLOCK outputs: their flat offsets, mask, the window's first input
    # position along each dimension and the offset of their (batch, channel) plane.
    # I32: every index fits 32 bits, and the six divisions per output element run in them
    if I32:
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    else:
        offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    ow = offs % OW
    t = offs // OW
    oh = t % OH
    t = t // OH
    od = t % OD
    bc = t // OD
    return offs, offs < TOTAL, od * SD - PD, oh * SH - PH, ow * SW - PW, bc * D * H * W


@triton.jit
def _ke_pool_average(acc, count, d0, h0, w0, D, H, W, KD: tl.constexpr, KH: tl.constexpr,
                     KW: tl.constexpr, PD: tl.constexpr, PH: tl.constexpr, PW: tl.constexpr,
                     INCLUDE_PAD: tl.constexpr, DIVISOR: tl.constexpr):
    # The window's sum over its divisor: divisor_override, the window clipped to the padded
    # input, or the positions inside the input.
    if DIVISOR > 0:
        out = acc / DIVISOR
    elif INCLUDE_PAD:
        size = (tl.minimum(d0 + KD, D + PD) - d0) * (tl.minimum(h0 + KH, H + PH) - h0)
        size = size * (tl.minimum(w0 + KW, W + PW) - w0)
        out = acc / size.to(tl.float32)
    else:
        out = acc / count
    return out


@triton.jit
def _ke_pool(x_ptr, out_ptr, TOTAL, D, H, W, OD, OH, OW,
             KD: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr,
             SD: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr,
             PD: tl.constexpr, PH: tl.constexpr, PW: tl.constexpr,
             DD: tl.constexpr, DH: tl.constexpr, DW: tl.constexpr,
             MAX: tl.constexpr, INCLUDE_PAD: tl.constexpr, DIVISOR: tl.constexpr,
             BLOCK: tl.constexpr, I32: tl.constexpr):
    offs, mask, d0, h0, w0, base = _ke_pool_start(TOTAL, D, H, W, OD, OH, OW, SD, SH, SW,
                                                  PD, PH, PW, BLOCK, I32)
    if MAX:
        acc = tl.full([BLOCK], float("-inf"), tl.float32)
    else:
        acc = tl.zeros([BLOCK], tl.float32)
    count = tl.zeros([BLOCK], tl.float32)
    for i in tl.static_range(KD):
        di = d0 + i * DD
        okd = mask & (di >= 0) & (di < D)
        for j in tl.static_range(KH):
            hj = h0 + j * DH
            okh = okd & (hj >= 0) & (hj < H)
            for k in tl.static_range(KW):
                wk = w0 + k * DW
                ok = okh & (wk >= 0) & (wk < W)
                if MAX:
                    v = tl.load(x_ptr + base + (di * H + hj) * W + wk, mask=ok,
                                other=float("-inf")).to(tl.float32)
                    # NaN wins, as in torch's max pooling
                    acc = tl.where((v > acc) | (v != v), v, acc)
                else:
                    v = tl.load(x_ptr + base + (di * H + hj) * W + wk, mask=ok,
                                other=0.0).to(tl.float32)
                    acc += v
                    count += ok.to(tl.float32)
    if not MAX:
        acc = _ke_pool_average(acc, count, d0, h0, w0, D, H, W, KD, KH, KW, PD, PH, PW,
                               INCLUDE_PAD, DIVISOR)
    tl.store(out_ptr + offs, acc.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _ke_pool_tile(x_ptr, out_ptr, TOTAL, D, H, W, OD, OH, OW,
                  KD: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr,
                  SD: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr,
                  PD: tl.constexpr, PH: tl.constexpr, PW: tl.constexpr,
                  DD: tl.constexpr, DH: tl.constexpr, DW: tl.constexpr,
                  MAX: tl.constexpr, INCLUDE_PAD: tl.constexpr, DIVISOR: tl.constexpr,
                  BLOCK: tl.constexpr, KWP: tl.constexpr, I32: tl.constexpr):
    # one window row of each of BLOCK outputs at a time, as a [BLOCK, KWP] tile
    offs, mask, d0, h0, w0, base = _ke_pool_start(TOTAL, D, H, W, OD, OH, OW, SD, SH, SW,
                                                  PD, PH, PW, BLOCK, I32)
    kw = tl.arange(0, KWP)
    wk = w0[:, None] + kw[None, :] * DW
    okw = mask[:, None] & (kw[None, :] < KW) & (wk >= 0) & (wk < W)
    if MAX:
        acc = tl.full([BLOCK], float("-inf"), tl.float32)
        nan = tl.zeros([BLOCK], tl.int32)
    else:
        acc = tl.zeros([BLOCK], tl.float32)
        count = tl.zeros([BLOCK], tl.float32)
    for i in tl.static_range(KD):
        di = d0 + i * DD
        okd = (di >= 0) & (di < D)
        for j in tl.static_range(KH):
            hj = h0 + j * DH
            ok = okw & (okd & (hj >= 0) & (hj < H))[:, None]
            ptr = x_ptr + (base + (di * H + hj) * W)[:, None] + wk
            if MAX:
                v = tl.load(ptr, mask=ok, other=float("-inf")).to(tl.float32)
                acc = tl.maximum(acc, tl.max(v, axis=1))
                # NaN wins, as in torch's max pooling
                nan = tl.maximum(nan, tl.max((v != v).to(tl.int32), axis=1))
            else:
                v = tl.load(ptr, mask=ok, other=0.0).to(tl.float32)
                acc += tl.sum(v, axis=1)
                count += tl.sum(ok.to(tl.float32), axis=1)
    if MAX:
        acc = tl.where(nan > 0, float("nan"), acc)
    else:
        acc = _ke_pool_average(acc, count, d0, h0, w0, D, H, W, KD, KH, KW, PD, PH, PW,
                               INCLUDE_PAD, DIVISOR)
    tl.store(out_ptr + offs, acc.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _ke_pool_flat(x_ptr, out_ptr, TOTAL, D, H, W, OD, OH, OW,
                  KD: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr,
                  SD: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr,
                  PD: tl.constexpr, PH: tl.constexpr, PW: tl.constexpr,
                  DD: tl.constexpr, DH: tl.constexpr, DW: tl.constexpr,
                  MAX: tl.constexpr, INCLUDE_PAD: tl.constexpr, DIVISOR: tl.constexpr,
                  BLOCK: tl.constexpr, KP: tl.constexpr, I32: tl.constexpr):
    # the whole window of each of BLOCK outputs as one [BLOCK, KP] tile, reduced along it
    offs, mask, d0, h0, w0, base = _ke_pool_start(TOTAL, D, H, W, OD, OH, OW, SD, SH, SW,
                                                  PD, PH, PW, BLOCK, I32)
    r = tl.arange(0, KP)
    di = d0[:, None] + (r // (KH * KW) * DD)[None, :]
    hj = h0[:, None] + (r // KW % KH * DH)[None, :]
    wk = w0[:, None] + (r % KW * DW)[None, :]
    ok = mask[:, None] & (r < KD * KH * KW)[None, :] & (di >= 0) & (di < D)
    ok = ok & (hj >= 0) & (hj < H) & (wk >= 0) & (wk < W)
    ptr = x_ptr + base[:, None] + (di * H + hj) * W + wk
    if MAX:
        v = tl.load(ptr, mask=ok, other=float("-inf")).to(tl.float32)
        # NaN wins, as in torch's max pooling
        nan = tl.max((v != v).to(tl.int32), axis=1)
        acc = tl.where(nan > 0, float("nan"), tl.max(v, axis=1))
    else:
        v = tl.load(ptr, mask=ok, other=0.0).to(tl.float32)
        acc = _ke_pool_average(tl.sum(v, axis=1), tl.sum(ok.to(tl.float32), axis=1), d0, h0,
                               w0, D, H, W, KD, KH, KW, PD, PH, PW, INCLUDE_PAD, DIVISOR)
    tl.store(out_ptr + offs, acc.to(out_ptr.dtype.element_ty), mask=mask)
"""

_HELPERS = '''

def _ke_triple(value, spatial, fill):
    values = [int(value)] * spatial if isinstance(value, int) else [int(v) for v in value]
    values = values * spatial if len(values) == 1 else values
    return [fill] * (3 - spatial) + values


def _ke_geometry(model, traced):
    """(kernel, stride, padding, dilation, ceil, include_pad, divisor): the model's one
    pooling module's where it has exactly one, else as traced."""
    found = [m for m in model.modules() if type(m).__name__[:-2] in ("MaxPool", "AvgPool")]
    if len(found) != 1:
        return traced
    m = found[0]
    n = int(type(m).__name__[-2])
    kernel = _ke_triple(m.kernel_size, n, 1)
    stride = _ke_triple(m.stride if m.stride else m.kernel_size, n, 1)
    padding = _ke_triple(m.padding, n, 0)
    if type(m).__name__.startswith("Max"):
        return (kernel, stride, padding, _ke_triple(m.dilation, n, 1), bool(m.ceil_mode), True, 0)
    divisor = int(getattr(m, "divisor_override", None) or 0)
    return (kernel, stride, padding, [1, 1, 1], bool(m.ceil_mode), bool(m.count_include_pad),
            divisor)


def _ke_out(size, k, s, p, d, ceil):
    """PyTorch's pooling output size."""
    span = size + 2 * p - d * (k - 1) - 1 + ((s - 1) if ceil else 0)
    out = span // s + 1
    if ceil and (out - 1) * s >= size + p:
        out -= 1
    return max(out, 0)
'''


# ``static`` 1: the sizes compile-time constants (a kernel per shape, as compile's static-shape
# kernels): the six divisions per output that find its coordinates become multiplications.
_SIZES = "x_ptr, out_ptr, TOTAL, D, H, W, OD, OH, OW,"
_STATIC_SIZES = (
    "x_ptr, out_ptr, TOTAL: tl.constexpr, D: tl.constexpr, H: tl.constexpr, W: tl.constexpr,\n"
    "             OD: tl.constexpr, OH: tl.constexpr, OW: tl.constexpr,"
)


def _source_pool(plan: Plan, p: dict) -> str:
    e = plan.extra
    kernels = _KERNEL.replace(_SIZES, _STATIC_SIZES) if p.get("static", 1) else _KERNEL
    x, spatial = e["x"], int(e["spatial"])
    view = ", ".join("1" if i is None else f"{x}.shape[{i}]" for i in e["vdims"])
    keep = ", ".join(f"out.shape[{i}]" for i in e["keep"])
    traced = (
        e["kernel"], e["stride"], e["padding"], e["dilation"], bool(e["ceil"]),
        bool(e["include_pad"]), int(e["divisor"]),
    )  # fmt: skip
    return (
        _header(plan, p)
        + kernels
        + _HELPERS
        + f"\n\n_PARAMS = {json.dumps(p, sort_keys=True)}\n_TRACED = {traced!r}\n"
        + _forward_head(plan)
        + f"""        p = _PARAMS
        xin = {x}.reshape(({view},)).contiguous()
        kernel, stride, padding, dilation, ceil, include_pad, divisor = _ke_geometry(
            self, _TRACED
        )
        lead = xin.shape[: xin.dim() - {spatial}]
        sizes = [1] * {3 - spatial} + list(xin.shape[xin.dim() - {spatial} :])
        outs = [
            _ke_out(sizes[i], kernel[i], stride[i], padding[i], dilation[i], ceil)
            for i in range(3)
        ]
        out = torch.empty(tuple(lead) + tuple(outs[{3 - spatial}:]), dtype=xin.dtype,
                          device=xin.device)
        total = out.numel()
        if total:
            geometry = (*sizes, *outs, *kernel, *stride, *padding, *dilation)
            flags = dict(MAX={e["op"] == "max"}, INCLUDE_PAD=include_pad, DIVISOR=divisor,
                         I32=max(total, xin.numel()) < 2**31, num_warps=p["warps"])
            window = math.prod(kernel)
            if p.get("window") == "flat" and window <= 4096:
                # the window's elements, not its outputs, are the block
                kp = triton.next_power_of_2(window)
                block = min(max(p["block"] // kp, 1), triton.next_power_of_2(total))
                grid = (triton.cdiv(total, block),)
                _ke_pool_flat[grid](xin, out, total, *geometry, BLOCK=block, KP=kp, **flags)
            elif p.get("window") in ("tile", "flat"):
                # the tile's elements, not its outputs, are the block
                kwp = triton.next_power_of_2(kernel[2])
                block = min(max(p["block"] // kwp, 1), triton.next_power_of_2(total))
                grid = (triton.cdiv(total, block),)
                _ke_pool_tile[grid](xin, out, total, *geometry, BLOCK=block, KWP=kwp, **flags)
            else:
                block = max(32, min(p["block"], triton.next_power_of_2(total)))
                grid = (triton.cdiv(total, block),)
                _ke_pool[grid](xin, out, total, *geometry, BLOCK=block, **flags)
        return out.reshape(({keep},))
"""
    )
