"""The ``attention`` family: flash attention with key/value heads shared by query groups.

One program takes a block of rows of one key/value head: the rows are every query of the
``groups`` query heads that share the head (``groups × q_len`` of them), so a decode step (one
query per head) still fills a tensor-core tile and each key/value element is read once per
head rather than once per query head. Keys are visited in ``block_n`` blocks with the online
softmax (running max and sum in float32); under a causal mask the loop stops at the last key
the block's queries can see. ``split`` cuts the key range into parts run by separate programs
(flash-decoding) when there are too few rows to fill the GPU; a second kernel combines the
parts' partial sums in a fixed order. Inputs are read through their strides (a KV cache's
slice is not copied); the output is ``[batch, heads, q_len, head_dim]`` in the query's dtype.

Parameters: ``block_m`` (rows per program, shrunk to the rows there are), ``block_n`` (keys
per step), ``warps``, ``stages``; the same three prefixed ``decode_`` for calls whose rows fit
one 16-row tile (a decode step: its launch is tuned apart from prefill's; in float32 its
products run on the FMA units over the rows there are, not a padded tensor-core tile, as
exact float32 asks); ``split`` (0: as many parts as fill the GPU twice over) and, for a
causal mask whose diagonal the trace could not tell, ``causal_align``. Blocks of keys every
row of a program sees run without masks; the softmax runs in base 2 with log2(e) folded into
the scale.
"""

from __future__ import annotations

import json

from workers.search.generators.templates.common import _header, forward_def
from workers.search.trace import Plan

_KERNELS = """
@triton.jit
def _ke_attention_block(acc, l_i, m_i, q, k_base, v_base, start, hi, pos, skt, svt, d, dmask,
                        scale, m_rows, smk, mval, rmask, BLOCK_N: tl.constexpr,
                        MASKED: tl.constexpr, CAUSAL: tl.constexpr, PRECISION: tl.constexpr,
                        UPCAST: tl.constexpr, FMA: tl.constexpr, MASK: tl.constexpr,
                        FILL_EQ: tl.constexpr):
    # One block of keys with the online softmax, in base 2 (scale carries log2(e)).
    n = start + tl.arange(0, BLOCK_N)
    if MASKED:
        nmask = n < hi
        k = tl.load(k_base + n[None, :].to(tl.int64) * skt + d[:, None],
                    mask=dmask[:, None] & nmask[None, :], other=0.0)
        v = tl.load(v_base + n[:, None].to(tl.int64) * svt + d[None, :],
                    mask=nmask[:, None] & dmask[None, :], other=0.0)
    else:
        k = tl.load(k_base + n[None, :].to(tl.int64) * skt + d[:, None], mask=dmask[:, None],
                    other=0.0)
        v = tl.load(v_base + n[:, None].to(tl.int64) * svt + d[None, :], mask=dmask[None, :],
                    other=0.0)
    if UPCAST:
        k = k.to(tl.float32)
    if FMA:  # a few rows in float32: products and sums in registers, no padded tile
        s = tl.sum(q[:, :, None] * k[None, :, :], 1) * scale
    else:
        s = tl.dot(q, k, input_precision=PRECISION) * scale
    if MASKED:
        keep = nmask[None, :]
        if CAUSAL:
            keep = keep & (n[None, :] <= pos[:, None])
        if MASK:  # a mask tensor: -inf where it equals mval (FILL_EQ) or where it does not
            mv = tl.load(m_rows[:, None] + n[None, :].to(tl.int64) * smk,
                         mask=rmask[:, None] & nmask[None, :], other=0).to(tl.float32)
            if FILL_EQ:
                keep = keep & (mv != mval)
            else:
                keep = keep & (mv == mval)
        s = tl.where(keep, s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, 1))
    m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
    alpha = tl.exp2(m_i - m_use)
    p = tl.exp2(s - m_use[:, None])
    l_i = l_i * alpha + tl.sum(p, 1)
    if UPCAST:
        pv = p
        v = v.to(tl.float32)
    else:
        pv = p.to(v.dtype)
    if FMA:
        acc = acc * alpha[:, None] + tl.sum(pv[:, :, None] * v[None, :, :], 1)
    else:
        acc = acc * alpha[:, None] + tl.dot(pv, v, input_precision=PRECISION)
    return acc, l_i, m_new


@triton.jit
def _ke_attention(q_ptr, k_ptr, v_ptr, o_ptr, part_ptr, ml_ptr,
                  sqb, sqh, sqt, skb, skh, skt, svb, svh, svt, sob, soh, sot,
                  HKV, TQ, TK, OFF, CHUNK, scale, m_ptr, smb, smh, smq, smk, mval,
                  GROUPS: tl.constexpr, D: tl.constexpr, BLOCK_D: tl.constexpr,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr,
                  SPLIT: tl.constexpr, PRECISION: tl.constexpr, UPCAST: tl.constexpr,
                  FMA: tl.constexpr, MASK: tl.constexpr, FILL_EQ: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    pid_s = tl.program_id(2)
    b = (pid_bh // HKV).to(tl.int64)
    hkv = (pid_bh % HKV).to(tl.int64)
    r = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rows = GROUPS * TQ
    rmask = r < rows
    t = r % TQ
    head = hkv * GROUPS + r // TQ
    d = tl.arange(0, BLOCK_D)
    dmask = d < D
    q_off = b * sqb + head * sqh + t.to(tl.int64) * sqt
    q = tl.load(q_ptr + q_off[:, None] + d[None, :], mask=rmask[:, None] & dmask[None, :],
                other=0.0)
    if UPCAST:
        q = q.to(tl.float32)
    pos = t + OFF
    lo = pid_s * CHUNK
    hi = tl.minimum(TK, lo + CHUNK)
    if CAUSAL:
        hi = tl.minimum(hi, tl.max(tl.where(rmask, pos, -1), 0) + 1)
    m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    l_i = tl.zeros((BLOCK_M,), tl.float32)
    acc = tl.zeros((BLOCK_M, BLOCK_D), tl.float32)
    k_base = k_ptr + b * skb + hkv * skh
    v_base = v_ptr + b * svb + hkv * svh
    m_rows = m_ptr + b * smb + head * smh + t.to(tl.int64) * smq
    # Whole blocks every row sees first (no mask at all), then the rest with the masks (every
    # block, where a mask tensor may hide any score).
    seen = hi
    if CAUSAL:
        seen = tl.minimum(hi, tl.min(tl.where(rmask, pos, TK), 0) + 1)
    if MASK:
        seen = lo
    whole = lo + tl.maximum(seen - lo, 0) // BLOCK_N * BLOCK_N
    for start in range(lo, whole, BLOCK_N):
        acc, l_i, m_i = _ke_attention_block(acc, l_i, m_i, q, k_base, v_base, start, hi, pos,
                                            skt, svt, d, dmask, scale, m_rows, smk, mval, rmask,
                                            BLOCK_N=BLOCK_N, MASKED=False, CAUSAL=CAUSAL,
                                            PRECISION=PRECISION, UPCAST=UPCAST, FMA=FMA,
                                            MASK=MASK, FILL_EQ=FILL_EQ)
    for start in range(whole, hi, BLOCK_N):
        acc, l_i, m_i = _ke_attention_block(acc, l_i, m_i, q, k_base, v_base, start, hi, pos,
                                            skt, svt, d, dmask, scale, m_rows, smk, mval, rmask,
                                            BLOCK_N=BLOCK_N, MASKED=True, CAUSAL=CAUSAL,
                                            PRECISION=PRECISION, UPCAST=UPCAST, FMA=FMA,
                                            MASK=MASK, FILL_EQ=FILL_EQ)
    if SPLIT == 1:
        o_off = b * sob + head * soh + t.to(tl.int64) * sot
        out = acc / l_i[:, None]
        tl.store(o_ptr + o_off[:, None] + d[None, :], out.to(o_ptr.dtype.element_ty),
                 mask=rmask[:, None] & dmask[None, :])
    else:
        row = (pid_bh.to(tl.int64) * SPLIT + pid_s) * rows + r
        tl.store(part_ptr + row[:, None] * BLOCK_D + d[None, :], acc, mask=rmask[:, None])
        tl.store(ml_ptr + row * 2, m_i, mask=rmask)
        tl.store(ml_ptr + row * 2 + 1, l_i, mask=rmask)


@triton.jit
def _ke_attention_combine(part_ptr, ml_ptr, o_ptr, sob, soh, sot, HKV, TQ,
                          GROUPS: tl.constexpr, D: tl.constexpr, BLOCK_D: tl.constexpr,
                          BLOCK_R: tl.constexpr, SPLIT: tl.constexpr):
    pid_r = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = (pid_bh // HKV).to(tl.int64)
    hkv = (pid_bh % HKV).to(tl.int64)
    rows = GROUPS * TQ
    r = pid_r * BLOCK_R + tl.arange(0, BLOCK_R)
    rmask = r < rows
    d = tl.arange(0, BLOCK_D)
    m = tl.full((BLOCK_R,), float("-inf"), tl.float32)
    for i in tl.static_range(SPLIT):
        row = (pid_bh.to(tl.int64) * SPLIT + i) * rows + r
        m = tl.maximum(m, tl.load(ml_ptr + row * 2, mask=rmask, other=float("-inf")))
    m = tl.where(m == float("-inf"), 0.0, m)
    total = tl.zeros((BLOCK_R,), tl.float32)
    acc = tl.zeros((BLOCK_R, BLOCK_D), tl.float32)
    for i in tl.static_range(SPLIT):
        row = (pid_bh.to(tl.int64) * SPLIT + i) * rows + r
        w = tl.exp2(tl.load(ml_ptr + row * 2, mask=rmask, other=float("-inf")) - m)
        total += w * tl.load(ml_ptr + row * 2 + 1, mask=rmask, other=0.0)
        part = tl.load(part_ptr + row[:, None] * BLOCK_D + d[None, :], mask=rmask[:, None],
                       other=0.0)
        acc += part * w[:, None]
    t = r % TQ
    head = hkv * GROUPS + r // TQ
    o_off = b * sob + head * soh + t.to(tl.int64) * sot
    tl.store(o_ptr + o_off[:, None] + d[None, :], (acc / total[:, None]).to(o_ptr.dtype.element_ty),
             mask=rmask[:, None] & (d[None, :] < D))
"""


def _source_attention(plan: Plan, p: dict) -> str:
    x = plan.extra
    q, k, v = x["q"], x["k"], x["v"]
    causal = bool(x["causal"])
    align = x.get("align") or p["causal_align"]
    three = x["ndim"] == 3
    unsq = f"        {q}, {k}, {v} = {q}[None], {k}[None], {v}[None]\n" if three else ""
    unsq = "".join(f"        {name} = {expr}\n" for name, expr in x.get("bind", {}).items()) + unsq
    ret = "out[0]" if three else "out"
    # Where the heads go back side by side (``y.transpose(1, 2)``, merged as ``(B, T, C)``):
    # the output is allocated so, and the kernel stores into its [B, H, T, D] view.
    dims = [0, 1, 2, 3]
    for op in x.get("out_ops", []):
        if op != "merge":
            dims[op[0]], dims[op[1]] = dims[op[1]], dims[op[0]]
    inverse = [dims.index(i) for i in range(4)]
    alloc = "out = torch.empty((B, HQ, TQ, D), dtype={q}.dtype, device={q}.device)"
    if dims != [0, 1, 2, 3] or "merge" in x.get("out_ops", []):
        alloc = (
            f"full = torch.empty([(B, HQ, TQ, D)[d] for d in {dims}], dtype={q}.dtype, "
            f"device={q}.device)\n        out = full.permute({inverse})"
        )
        ret = "full.flatten(2)" if "merge" in x.get("out_ops", []) else "full"
    mask = x.get("mask")
    if mask:
        mask_lines = (
            f"        mk = {mask['ref']}\n"
            "        mk = mk.reshape((1,) * (4 - mk.dim()) + tuple(mk.shape))\n"
            "        ms = [0 if mk.shape[i] == 1 else mk.stride(i) for i in range(4)]\n"
        )
    else:
        mask_lines = "        mk, ms = out, [0, 0, 0, 0]  # no mask tensor: never read\n"
    return (
        _header(plan, p)
        + _KERNELS.lstrip("\n")
        + f"""

_PARAMS = {json.dumps(p, sort_keys=True)}
_SCALE = {float(x["scale"])!r}
_SCALE_RULE = {x.get("scale_rule", "constant")!r}
_CAUSAL = {causal!r}
_ALIGN = {align!r}  # the causal diagonal: queries are the last keys' positions, or the first
_MASK = {bool(mask)!r}  # a mask tensor read at each score
_FILL_EQ = {(mask or {}).get("fill") == "eq"!r}  # -inf where it equals the value (else where not)
_MASK_VALUE = {float((mask or {}).get("value", 0.0))!r}
_SMS: dict = {{}}


def _sms(device) -> int:
    if device.type != "cuda":
        return 1
    if device.index not in _SMS:
        _SMS[device.index] = torch.cuda.get_device_properties(device).multi_processor_count
    return _SMS[device.index]


class ModelNew(nn.Module):
{plan.init_source}
{forward_def(plan)}        p = _PARAMS
{unsq}        B, HQ, TQ, D = {q}.shape
        HKV, TK = {k}.shape[1], {k}.shape[2]
        {alloc.format(q=q)}
        if out.numel() == 0:
            return {ret}
        if TK == 0:
            return {ret}.zero_()
        qq, kk, vv = ({q} if {q}.stride(-1) == 1 else {q}.contiguous(),
                      {k} if {k}.stride(-1) == 1 else {k}.contiguous(),
                      {v} if {v}.stride(-1) == 1 else {v}.contiguous())
        groups = HQ // HKV
        rows = groups * TQ
        # Rows of one 16-row tile (a decode step) and wider blocks (prefill) launch apart.
        narrow = rows <= 16
        pre = "decode_" if narrow else ""
        # A decode step in float32: tensor cores would multiply in TF32, so exact products run
        # on the FMA units; there they need no 16-row tile, only the rows there are.
        fma = narrow and qq.dtype == torch.float32
        if narrow:
            block_m = triton.next_power_of_2(rows) if fma else 16
        else:
            block_m = max(16, min(p["block_m"], triton.next_power_of_2(rows)))
        block_n = max(16, min(p[pre + "block_n"], triton.next_power_of_2(TK)))
        block_d = max(16, triton.next_power_of_2(D))
        warps, stages = p[pre + "warps"], p[pre + "stages"]
        while fma and block_m * block_d * block_n > 64 * 32 * warps and block_n > 8:
            block_n //= 2  # the [rows, head dim, keys] products held at once
        # Wide heads (a head dim of 1024): smaller tiles until the accumulator and the scores fit
        # the registers, fewer stages until the tiles fit shared memory.
        while block_m * (block_n + block_d) > 8192 * warps and block_n > 16:
            block_n //= 2
        while block_m * (block_n + block_d) > 8192 * warps and block_m > 16:
            block_m //= 2
        while stages > 1 and (block_m + 2 * block_n) * block_d * 2 * stages > 200 * 1024:
            stages -= 1
        programs = triton.cdiv(rows, block_m) * B * HKV
        split = p["split"]
        if split == 0:  # enough parts to fill the GPU twice over, each of two key blocks or more
            split = 1
            while (programs * split < 2 * _sms(qq.device) and split < 16
                   and TK >= 4 * split * block_n):
                split *= 2
        chunk = triton.cdiv(triton.cdiv(TK, split), block_n) * block_n
        split = triton.cdiv(TK, chunk)
        scale = (D ** -0.5 if _SCALE_RULE == "inv_sqrt_head_dim" else _SCALE) * 1.4426950408889634
        off = TK - TQ if _ALIGN == "bottom_right" else 0
        precision = p.get("fp32_dot", "ieee") if qq.dtype == torch.float32 else "tf32"
        # Triton's interpreter multiplies the raw bits of 16-bit operands in tl.dot (seen with
        # triton 3.9): on the CPU the operands are widened first; on a GPU they never are.
        upcast = qq.device.type == "cpu"
        if split > 1:
            part = torch.empty((B * HKV * split * rows, block_d), dtype=torch.float32,
                               device=qq.device)
            ml = torch.empty((B * HKV * split * rows, 2), dtype=torch.float32, device=qq.device)
        else:
            part = ml = out
{mask_lines}        grid = (triton.cdiv(rows, block_m), B * HKV, split)
        _ke_attention[grid](qq, kk, vv, out, part, ml,
                            qq.stride(0), qq.stride(1), qq.stride(2),
                            kk.stride(0), kk.stride(1), kk.stride(2),
                            vv.stride(0), vv.stride(1), vv.stride(2),
                            out.stride(0), out.stride(1), out.stride(2),
                            HKV, TQ, TK, off, chunk, scale, mk, *ms, _MASK_VALUE,
                            GROUPS=groups, D=D, BLOCK_D=block_d, BLOCK_M=block_m,
                            BLOCK_N=block_n, CAUSAL=_CAUSAL, SPLIT=split, PRECISION=precision,
                            UPCAST=upcast, FMA=fma, MASK=_MASK, FILL_EQ=_FILL_EQ,
                            num_warps=warps, num_stages=stages)
        if split > 1:
            block_r = max(16, min(64, triton.next_power_of_2(rows)))
            _ke_attention_combine[(triton.cdiv(rows, block_r), B * HKV)](
                part, ml, out, out.stride(0), out.stride(1), out.stride(2), HKV, TQ,
                GROUPS=groups, D=D, BLOCK_D=block_d, BLOCK_R=block_r, SPLIT=split,
                num_warps=4)
        return {ret}
"""
    )


def attention_valid(p: dict, head_dim: int) -> bool:
    """Whether a configuration fits an H100/H200's shared memory and registers at the head dim
    (up to 128: wider heads shrink their tiles at launch, see the wrapper)."""
    block_d = max(16, 1 << max(0, (min(int(head_dim), 128) - 1).bit_length()))
    for m, pre in ((p["block_m"], ""), (16, "decode_")):
        n, stages, warps = p[pre + "block_n"], max(1, p[pre + "stages"]), p[pre + "warps"]
        if (m * block_d + 2 * n * block_d) * 2 * stages > 200 * 1024:
            return False
        if (m * n + m * block_d) // (32 * warps) > 256:
            return False
    return True
