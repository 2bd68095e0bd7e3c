"""The ``conv`` family: a convolution or transposed convolution over 1, 2 or 3 spatial
dimensions, as an implicit GEMM (``workers.search.lowering_conv``).

Each program computes a BLOCK_M x BLOCK_N tile of one group's output: BLOCK_M output positions
(batch x spatial, flattened) by BLOCK_N of the group's output channels, summing over K = the
group's input channels x the kernel's window in BLOCK_K slices. A slice's input tile is
gathered through the input's strides (zero outside the input: the padding is never
materialised). Where a group has 16 input channels or more (``layout``), the input is copied
channels-last and the weight taps x channels x outputs, and the loop runs the taps outer and a
tap's channels inner: a slice is contiguous channels, and no index is divided per element;
else the input is read in place, channels outer and taps inner.
A transposed convolution runs one stride phase per program (output positions modulo the stride)
over only the taps whose input position is whole for it (``o + p - k·d`` divisible by the
stride): no zeros are inserted, and no masked tap is loaded. Products run on the tensor cores
(``tl.dot``; float32 as IEEE, three TF32 products, or one where the workload's tolerance admits
it, like the matmul family) where the group has 16 output channels or more, else as broadcast
products on the CUDA cores (a depthwise convolution). Accumulation is in float32; the bias is
added before the store. Fewer spatial dimensions are the leading ones of three, of size 1.
"""

from __future__ import annotations

import json

from workers.search.generators.templates.common import _Emitter, _forward_head, _header
from workers.search.ir import Plan

_KERNEL = """
@triton.jit
def _ke_conv_mac(acc, a, wt, DOT: tl.constexpr, UPCAST: tl.constexpr, PRECISION: tl.constexpr):
    # acc += a @ wt: on the tensor cores (the interpreter widens 16-bit operands first), or as
    # broadcast products on the CUDA cores
    if DOT:
        if UPCAST:
            a = a.to(tl.float32)
            wt = wt.to(tl.float32)
        acc = tl.dot(a, wt, acc, input_precision=PRECISION)
    else:
        acc += tl.sum(a.to(tl.float32)[:, :, None] * wt.to(tl.float32)[None, :, :], axis=1)
    return acc


@triton.jit
def _ke_conv(in0_ptr, w_ptr, b_ptr, {epilogue_ptrs}out_ptr, M, COUT_G, CIN_G,
             D, H, W, OD, OH, OW, QD, QH, QW,
             sxb, sxc, sxd, sxh, sxw, swg, swo, swi, swd, swh, sww, sob, soc,
             KD: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr,
             SD: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr,
             PD: tl.constexpr, PH: tl.constexpr, PW: tl.constexpr,
             DD: tl.constexpr, DH: tl.constexpr, DW: tl.constexpr,
             TD: tl.constexpr, TH: tl.constexpr, TW: tl.constexpr,
             TRANSPOSED: tl.constexpr, HAS_BIAS: tl.constexpr, DOT: tl.constexpr,
             TAPS_OUTER: tl.constexpr,
             PRECISION: tl.constexpr, UPCAST: tl.constexpr, I64: tl.constexpr,
             BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    pid_z = tl.program_id(2)
    if TRANSPOSED and SD * SH * SW > 1:
        # One phase of the output (its positions modulo the stride) per program: only the
        # taps whose input position is whole for it (every T-th from the first) are summed.
        g = pid_z // (SD * SH * SW)
        ph = pid_z % (SD * SH * SW)
        rd = ph // (SH * SW)
        rh = (ph // SW) % SH
        rw = ph % SW
        k0d = rd * 0 - 1
        k0h = rd * 0 - 1
        k0w = rd * 0 - 1
        for t in tl.static_range(TD):
            k0d = tl.where((k0d < 0) & ((rd + PD - t * DD) % SD == 0), t, k0d)
        for t in tl.static_range(TH):
            k0h = tl.where((k0h < 0) & ((rh + PH - t * DH) % SH == 0), t, k0h)
        for t in tl.static_range(TW):
            k0w = tl.where((k0w < 0) & ((rw + PW - t * DW) % SW == 0), t, k0w)
        nd = tl.where(k0d >= 0, tl.maximum((KD - k0d + TD - 1) // TD, 0), 0)
        nh = tl.where(k0h >= 0, tl.maximum((KH - k0h + TH - 1) // TH, 0), 0)
        nw = tl.where(k0w >= 0, tl.maximum((KW - k0w + TW - 1) // TW, 0), 0)
    else:
        g = pid_z
        rd = 0
        rh = 0
        rw = 0
        k0d = 0
        k0h = 0
        k0w = 0
        nd = KD
        nh = KH
        nw = KW
    taps = nd * nh * nw
    K = CIN_G * taps
    # Divisors never zero: a phase with no tap (K = 0) runs no step, but a pipelined loop
    # computes its first steps' indices before the bound is checked, and an integer division
    # by zero there is undefined behaviour that LLVM may build on (KernelBench 77's phases
    # without taps came out wrong on an H100 with 3 stages and right with 1, session 47).
    taps1 = tl.maximum(taps, 1)
    nhw1 = tl.maximum(nh * nw, 1)
    nw1 = tl.maximum(nw, 1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    if I64:
        rm = rm.to(tl.int64)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    qw = rm % QW
    t = rm // QW
    qh = t % QH
    t = t // QH
    qd = t % QD
    bi = t // QD
    if TRANSPOSED:
        od = qd * SD + rd
        oh = qh * SH + rh
        ow = qw * SW + rw
    else:
        od = qd
        oh = qh
        ow = qw
    mask_m = (rm < M) & (od < OD) & (oh < OH) & (ow < OW)
    mask_n = rn < COUT_G
    x_row = in0_ptr + bi * sxb + g * CIN_G * sxc
    w_col = w_ptr + g * swg + rn * swo
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    if TAPS_OUTER:
        # Taps outer, channels inner (the input and weight channels-last): a slice is one
        # tap's BLOCK_K channels, read along the channels (contiguous), its positions computed
        # once per tap and no division per element.
        chunks = tl.cdiv(CIN_G, BLOCK_K)
        chunks1 = tl.maximum(chunks, 1)
        for kk in range(0, taps * chunks):
            tap = kk // chunks1
            rc = (kk % chunks1) * BLOCK_K + tl.arange(0, BLOCK_K)
            mask_k = rc < CIN_G
            kd = k0d + (tap // nhw1) * TD
            kh = k0h + ((tap // nw1) % tl.maximum(nh, 1)) * TH
            kw = k0w + (tap % nw1) * TW
            if TRANSPOSED:  # whole for this phase: o + p - k * d is a multiple of the stride
                idd = qd + (rd + PD - kd * DD) // SD
                ih = qh + (rh + PH - kh * DH) // SH
                iw = qw + (rw + PW - kw * DW) // SW
            else:
                idd = od * SD - PD + kd * DD
                ih = oh * SH - PH + kh * DH
                iw = ow * SW - PW + kw * DW
            ok = (idd >= 0) & (idd < D) & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W) & mask_m
            a = tl.load((x_row + idd * sxd + ih * sxh + iw * sxw)[:, None] + rc[None, :] * sxc,
                        mask=ok[:, None] & mask_k[None, :], other=0.0)
            wt = tl.load((w_col + kd * swd + kh * swh + kw * sww)[None, :] + rc[:, None] * swi,
                         mask=mask_k[:, None] & mask_n[None, :], other=0.0)
            acc = _ke_conv_mac(acc, a, wt, DOT, UPCAST, PRECISION)
    else:
        # Channels outer, taps inner, the input read in place (NCDHW). (Tiles loaded K by
        # positions and transposed, with the store transposed too, ran 1.5x as long on
        # KernelBench 55 and 8x on 59 on an H100, session 45; the two were not timed apart.)
        for k0 in range(0, K, BLOCK_K):
            rk = k0 + tl.arange(0, BLOCK_K)
            mask_k = rk < K
            ci = rk // taps1
            r = rk % taps1
            kd = k0d + (r // nhw1) * TD
            r = r % nhw1
            kh = k0h + (r // nw1) * TH
            kw = k0w + (r % nw1) * TW
            if TRANSPOSED:  # whole for this phase: o + p - k * d is a multiple of the stride
                idd = qd[:, None] + (rd + PD - kd[None, :] * DD) // SD
                ih = qh[:, None] + (rh + PH - kh[None, :] * DH) // SH
                iw = qw[:, None] + (rw + PW - kw[None, :] * DW) // SW
            else:
                idd = od[:, None] * SD - PD + kd[None, :] * DD
                ih = oh[:, None] * SH - PH + kh[None, :] * DH
                iw = ow[:, None] * SW - PW + kw[None, :] * DW
            ok = (idd >= 0) & (idd < D) & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
            ok = ok & mask_m[:, None] & mask_k[None, :]
            a = tl.load(x_row[:, None] + ci[None, :] * sxc + idd * sxd + ih * sxh + iw * sxw,
                        mask=ok, other=0.0)
            wt = tl.load(w_col[None, :] + ci[:, None] * swi + kd[:, None] * swd
                         + kh[:, None] * swh + kw[:, None] * sww,
                         mask=mask_k[:, None] & mask_n[None, :], other=0.0)
            acc = _ke_conv_mac(acc, a, wt, DOT, UPCAST, PRECISION)
    if HAS_BIAS:
        bias = tl.load(b_ptr + g * COUT_G + rn, mask=mask_n, other=0.0)
        acc += bias.to(tl.float32)[None, :]
    pos = (od * OH + oh) * OW + ow
    cols = (g * COUT_G + rn)[None, :]
    cmask = mask_n[None, :]
    mask = mask_m[:, None] & cmask
    offs = (bi * sob + pos)[:, None] + cols * soc
{epilogue}
"""

_HELPERS = '''

def _ke_geometry(module, traced):
    """(stride, padding, dilation, output padding, groups), three each for the spatial
    dimensions but groups: the convolution module's where the weight is one's (and it pads
    with zeros, by numbers), else as traced."""
    stride, padding, dilation, output_padding, groups = traced
    if (
        isinstance(module, nn.modules.conv._ConvNd)
        and module.padding_mode == "zeros"
        and not isinstance(module.padding, str)
    ):
        stride, padding, dilation = module.stride, module.padding, module.dilation
        output_padding, groups = module.output_padding, module.groups
    n = len(stride)
    fill = [1] * (3 - n)
    return (fill + list(stride), [0] * (3 - n) + list(padding), fill + list(dilation),
            [0] * (3 - n) + list(output_padding), int(groups))


def _ke_steps(M, cout_g, zs, K, kslice, block_m, block_n, block_k):
    """Programs x loop steps of a launch (what Triton's interpreter pays for)."""
    programs = triton.cdiv(M, block_m) * triton.cdiv(cout_g, block_n) * zs
    return programs * triton.cdiv(kslice, block_k) * (K // max(kslice, 1))


def _ke_conv_out(size, k, s, p, d, op, transposed):
    """PyTorch's convolution output size along one dimension."""
    if transposed:
        return (size - 1) * s - 2 * p + d * (k - 1) + op + 1
    return (size + 2 * p - d * (k - 1) - 1) // s + 1
'''


def _epilogue(plan: Plan) -> tuple[str, str]:
    """(the kernel's epilogue arguments, its statements on ``acc`` and the store): the IR after
    the convolution, its inputs read at the output's offsets (of its shape), at the channel (one
    per channel) or once (one value)."""
    em = _Emitter(
        plan,
        "tl.load({ptr} + offs, mask=mask, other=0.0)",
        "tl.load({ptr} + cols, mask=cmask, other=0.0)",
    )
    body = [
        em.stmt(node)
        for node in plan.nodes
        if not (node.kind == "input" and node.attrs.get("conv_input"))
    ]
    out = em.name(plan.nodes[plan.outputs[0]])
    # (stored transposed, channels by positions, with the tiles loaded so too, KernelBench
    # 59 took 8x as long on an H100: its K of 27 leaves the store most of the time; session 45)
    body.append(f"tl.store(out_ptr + offs, {out}.to(out_ptr.dtype.element_ty), mask=mask)")
    ptrs = "".join(f"{ptr}, " for ptr in em.ptr.values() if ptr != "in0_ptr")
    return ptrs, "".join(f"    {line}\n" for line in body if line).rstrip("\n")


def _source_conv(plan: Plan, p: dict) -> str:
    e = plan.extra
    ptrs, epilogue = _epilogue(plan)
    extra = [n.attrs["ref"] for n in plan.inputs() if n.attrs["ref"] != "acc"][1:]
    binds = "".join(f"        in{i + 1} = {r}.contiguous()\n" for i, r in enumerate(extra))
    args = "".join(f"in{i + 1}, " for i in range(len(extra)))
    x, w, b, spatial = e["x"], e["w"], e.get("b"), int(e["spatial"])
    module = w[: -len(".weight")] if w.startswith("self.") and w.endswith(".weight") else "None"
    traced = (
        e["stride"], e["padding"], e["dilation"], e["output_padding"], int(e["groups"]),
    )  # fmt: skip
    transposed = bool(e["transposed"])
    bias = b if b else "None"
    return (
        _header(plan, p)
        + _KERNEL.replace("{epilogue_ptrs}", ptrs).replace("{epilogue}", epilogue)
        + _HELPERS
        + f"\n\n_PARAMS = {json.dumps(p, sort_keys=True)}\n_TRACED = {traced!r}\n"
        + _forward_head(plan)
        + f"""        p = _PARAMS
        xin, wt, bias = {x}, {w}, {bias}
{binds}        stride, padding, dilation, output_padding, groups = _ke_geometry({module}, _TRACED)
        if {bool(e.get("merge_channels"))}:  # the dimensions between batch and space: channels
            xin = xin.reshape(xin.shape[0], -1, *xin.shape[xin.dim() - {spatial}:])
        batched = xin.dim() == {spatial + 2}
        if not batched:  # one sample: a batch of one
            xin = xin.unsqueeze(0)
        # Fewer spatial dimensions than three: leading ones of size 1 (views)
        x5 = xin.reshape(xin.shape[:2] + (1,) * {3 - spatial} + xin.shape[2:])
        w5 = wt.reshape(wt.shape[:2] + (1,) * {3 - spatial} + wt.shape[2:])
        B, cin = x5.shape[0], x5.shape[1]
        kernel = list(w5.shape[2:])
        if {transposed}:
            cin_g, cout_g = w5.shape[0] // groups, w5.shape[1]
        else:
            cin_g, cout_g = w5.shape[1], w5.shape[0] // groups
        sizes = list(x5.shape[2:])
        outs = [
            _ke_conv_out(sizes[i], kernel[i], stride[i], padding[i], dilation[i],
                         output_padding[i], {transposed})
            for i in range(3)
        ]
        odt = torch.promote_types(x5.dtype, wt.dtype)
        out = torch.empty((B, cout_g * groups, *outs), dtype=odt, device=x5.device)
        if {transposed}:  # by phase: positions modulo the stride, and every T-th tap
            taps = [stride[i] // math.gcd(dilation[i], stride[i]) for i in range(3)]
            qs = [triton.cdiv(outs[i], stride[i]) for i in range(3)]
            phases = stride[0] * stride[1] * stride[2]
        else:
            taps, qs, phases = [1, 1, 1], outs, 1
        # the most taps a phase sums (all of them for a forward convolution)
        K = cin_g * math.prod(triton.cdiv(kernel[i], taps[i]) for i in range(3))
        M = B * qs[0] * qs[1] * qs[2]
        if out.numel():  # (no input channels, K = 0: the bias and the epilogue alone)
            dot = cout_g >= 16 and K >= 16
            # channels-last: the input (and the weight as taps x channels x outputs) copied so
            # that a slice of K is contiguous channels; "native" reads them in place
            layout = p.get("layout", "auto")
            cl = layout == "cl" or (layout == "auto" and dot and cin_g >= 16)
            if cl:
                x5 = x5.contiguous(memory_format=torch.channels_last_3d)
                if {transposed}:  # [cin, cout / groups, k...]: k... x cin x cout / groups
                    w5 = w5.permute(2, 3, 4, 0, 1).contiguous().permute(3, 4, 0, 1, 2)
                else:  # [cout, cin / groups, k...]: k... x cin / groups x cout
                    w5 = w5.permute(2, 3, 4, 1, 0).contiguous().permute(4, 3, 0, 1, 2)
            kslice = cin_g if cl else K  # what one loop's BLOCK_K runs over
            if dot:
                block_m = max(16, min(p["block_m"], triton.next_power_of_2(M)))
                block_n = max(16, min(p["block_n"], triton.next_power_of_2(cout_g)))
                block_k = max(16, min(p["block_k"], triton.next_power_of_2(kslice)))
            else:  # broadcast products: the tile's registers hold block_m x block_k x block_n
                block_n = triton.next_power_of_2(cout_g) if cout_g < 16 else 16
                block_k = max(1, min(p["block_k"], triton.next_power_of_2(kslice), 256 // block_n))
                block_m = max(16, min(p["block_m"], 8192 // (block_n * block_k)))
            if {transposed}:  # weight [cin, cout / groups, k...]: a group is cin_g rows of it
                swg, swo, swi = cin_g * w5.stride(0), w5.stride(1), w5.stride(0)
            else:  # weight [cout, cin / groups, k...]: a group is cout_g rows of it
                swg, swo, swi = cout_g * w5.stride(0), w5.stride(0), w5.stride(1)
            if x5.device.type == "cpu" and _ke_steps(
                M, cout_g, groups * phases, K, kslice, block_m, block_n, block_k
            ) > 256:  # Triton's interpreter pays per op and program, not per element: a large
                # launch there takes tiles of at least 256 positions by 64 of K, tiles a GPU
                # runs too (the compile gate compiles what the interpreter launched for sm_90;
                # 1024 positions took it past its limit). A small one keeps the candidate's,
                # so tests check its tiles.
                if dot:
                    block_m = max(block_m, min(256, triton.next_power_of_2(M)))
                    block_k = max(block_k, min(64, triton.next_power_of_2(kslice)))
                else:  # the broadcast products' block_m x block_k x block_n held at once
                    room = 16384 // (block_n * block_k)
                    block_m = max(block_m, min(256, triton.next_power_of_2(M), room))
            # float32: IEEE products, three TF32 ones on the tensor cores ("tf32x3"), or one
            # ("tf32", proposed only where the workload's tolerance admits it)
            precision = p.get("fp32_dot", "ieee") if odt == torch.float32 else "tf32"
            bias_arg = bias if bias is not None else out
            grid = (triton.cdiv(M, block_m), triton.cdiv(cout_g, block_n), groups * phases)
            _ke_conv[grid](
                x5, w5, bias_arg, {args}out, M, cout_g, cin_g, *sizes, *outs, *qs,
                *x5.stride(), swg, swo, swi, *w5.stride()[2:], out.stride(0), out.stride(1),
                *kernel, *stride, *padding, *dilation, *taps, TRANSPOSED={transposed},
                HAS_BIAS=bias is not None, DOT=dot, TAPS_OUTER=cl, PRECISION=precision,
                UPCAST=x5.device.type == "cpu",
                I64=max(x5.numel(), out.numel(), wt.numel()) >= 2**31 - 1,
                BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, num_warps=p["warps"],
                num_stages=p["stages"])
        out = out.reshape(out.shape[:2] + out.shape[5 - {spatial}:])
        return out if batched else out.squeeze(0)
"""
    )
