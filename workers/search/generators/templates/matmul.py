"""The ``matmul`` family: a tiled GEMM with the epilogue (bias, activation) on the accumulator;
K cut into ranges (split-K, partials added in a fixed order) where the output has too few
tiles to fill the device (a 256 x 256 output over K = 65536 had 4 programs: 0.036x of
compile on the H200). Float32 products are IEEE on the CUDA cores, or (``fp32_dot``
"tf32x3") each operand split into a TF32 high part and a TF32 remainder, three tensor-core
products summed: cuBLAS's IEEE SGEMM is about 2.3x the CUDA-core template at KernelBench L2's
sizes on the H200. "tf32x3_split" splits each operand once, before the product, into two
K-major buffers (a pass over each operand), so the loop's three TF32 products read their
operands as loaded instead of splitting tiles in registers every step."""

from __future__ import annotations

from workers.search.generators.templates.common import _Emitter, _header, _model_head, _refs
from workers.search.trace import Plan

_TILE = """num_pid_m = tl.cdiv(M, BLOCK_M)
num_pid_n = tl.cdiv(N, BLOCK_N)
num_pid_in_group = GROUP_M * num_pid_n
group_id = pid // num_pid_in_group
first_pid_m = group_id * GROUP_M
group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
pid_n = (pid % num_pid_in_group) // group_size_m
rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)""".splitlines()

_TILE_MASKS = """rows = rm[:, None]
cols = rn[None, :]
cmask = cols < N
mask = (rows < M) & cmask""".splitlines()


def _epilogue(plan: Plan) -> list[str]:
    """The epilogue on ``acc`` (the tile's fp32 product) and the store of the output."""
    em = _Emitter(
        plan,
        # an input of the output's shape (a residual), read at the output's own offsets
        "tl.load({ptr} + pid_b * M * N + rows.to(tl.int64) * N + cols, mask=mask, other=0.0)",
        "tl.load({ptr} + cols, mask=cmask, other=0.0)",
    )
    body = [s for s in (em.stmt(node) for node in plan.nodes) if s]
    body.append(
        f"tl.store(out0_ptr + rows.to(tl.int64) * N + cols, {em.name(plan.nodes[plan.outputs[0]])}"
        ", mask=mask)"
    )
    return body


def _vec_ptrs(plan: Plan) -> list[str]:
    return [f"in{i}_ptr" for i in range(len(plan.inputs()) - 1)]


_MATMUL_CONSTEXPRS = (
    "BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "PRECISION", "UPCAST", "SPLIT", "PRESPLIT",
)  # fmt: skip


def _matmul_kernel(plan: Plan) -> str:
    """The tiled product. ``SPLIT``: this program sums only its KB_PER blocks of K (program
    axis 2) and stores the fp32 partial for ``_ke_matmul_reduce``, which adds the partials in
    a fixed order (no atomics: the correctness gate runs every candidate twice and wants the
    same bits) and applies the epilogue."""
    body = [
        "pid = tl.program_id(0)",
        "pid_b = tl.program_id(1).to(tl.int64)",
        "pid_k = tl.program_id(2)",
        "a_ptr += pid_b * stride_ab",
        "b_ptr += pid_b * stride_bb",
        "al_ptr += pid_b * stride_ab",
        "bl_ptr += pid_b * stride_bb",
        "out0_ptr += pid_b * M * N",
        *_TILE,
        "rk = tl.arange(0, BLOCK_K)",
        "kb0 = pid_k * KB_PER",
        "kb1 = tl.minimum(kb0 + KB_PER, tl.cdiv(K, BLOCK_K))",
        # 64-bit: a transposed operand's K stride is M, and a late range starts far in
        "a_offs = rm[:, None].to(tl.int64) * stride_am "
        "+ (kb0 * BLOCK_K + rk[None, :]).to(tl.int64) * stride_ak",
        "b_offs = (kb0 * BLOCK_K + rk[:, None]).to(tl.int64) * stride_bk + rn[None, :] * stride_bn",
        "a_ptrs = a_ptr + a_offs",
        "b_ptrs = b_ptr + b_offs",
        # PRESPLIT: the operands' TF32 remainders, laid out as the high parts are
        "al_ptrs = al_ptr + a_offs",
        "bl_ptrs = bl_ptr + b_offs",
        "acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)",
        "acc_s = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)  # PRESPLIT: the remainders' terms",
        "for kb in range(kb0, kb1):",
        "    kk = kb * BLOCK_K + rk",
        "    amask = (rm[:, None] < M) & (kk[None, :] < K)",
        "    bmask = (kk[:, None] < K) & (rn[None, :] < N)",
        "    a = tl.load(a_ptrs, mask=amask, other=0.0)",
        "    b = tl.load(b_ptrs, mask=bmask, other=0.0)",
        "    if UPCAST:",
        "        a = a.to(tl.float32)",
        "        b = b.to(tl.float32)",
        "    if PRESPLIT:",
        "        al = tl.load(al_ptrs, mask=amask, other=0.0)",
        "        bl = tl.load(bl_ptrs, mask=bmask, other=0.0)",
        "        acc_s = tl.dot(a, bl, acc_s, input_precision='tf32')",
        "        acc_s = tl.dot(al, b, acc_s, input_precision='tf32')",
        "        acc = tl.dot(a, b, acc, input_precision='tf32')",
        "        al_ptrs += BLOCK_K * stride_ak",
        "        bl_ptrs += BLOCK_K * stride_bk",
        "    else:",
        "        acc = tl.dot(a, b, acc, input_precision=PRECISION)",
        "    a_ptrs += BLOCK_K * stride_ak",
        "    b_ptrs += BLOCK_K * stride_bk",
        # An inf times a remainder of 0 is NaN where the exact product is inf: the remainders'
        # terms are dropped where they are NaN (an input's own NaN is in the high parts' too),
        # as Triton's tf32x3 does.
        "if PRESPLIT:",
        "    acc += tl.where(acc_s == acc_s, acc_s, 0.0)",
        *_TILE_MASKS,
        "if SPLIT:",
        "    part = part_ptr + ((pid_k * BT + pid_b) * M + rows.to(tl.int64)) * N + cols",
        "    tl.store(part, acc, mask=mask)",
        "else:",
        *["    " + x for x in _epilogue(plan)],
    ]
    ins = ["a_ptr", "b_ptr", "al_ptr", "bl_ptr", *_vec_ptrs(plan)]
    sig = ", ".join(
        ins
        + ["out0_ptr", "part_ptr", "M", "N", "K", "BT", "KB_PER"]
        + ["stride_am", "stride_ak", "stride_bk", "stride_bn", "stride_ab", "stride_bb"]
        + [f"{c}: tl.constexpr" for c in _MATMUL_CONSTEXPRS]
    )
    return f"@triton.jit\ndef _ke_matmul({sig}):\n" + "".join(f"    {x}\n" for x in body)


def _reduce_kernel(plan: Plan) -> str:
    """The split-K partials of one output tile, added in order, then the epilogue."""
    body = [
        "pid = tl.program_id(0)",
        "pid_b = tl.program_id(1).to(tl.int64)",
        "out0_ptr += pid_b * M * N",
        *_TILE,
        *_TILE_MASKS,
        "part = part_ptr + (pid_b * M + rows.to(tl.int64)) * N + cols",
        "acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)",
        "for s in range(0, SPLITS):",
        "    acc += tl.load(part + s * BT * M * N, mask=mask, other=0.0)",
        *_epilogue(plan),
    ]
    sig = ", ".join(
        ["part_ptr", *_vec_ptrs(plan), "out0_ptr", "M", "N", "BT", "SPLITS"]
        + [f"{c}: tl.constexpr" for c in ("BLOCK_M", "BLOCK_N", "GROUP_M")]
    )
    return f"@triton.jit\ndef _ke_matmul_reduce({sig}):\n" + "".join(f"    {x}\n" for x in body)


_SPLIT_POLICY = '''

def _ke_kmajor(t, k_dim):
    """``t`` (3-d, K its dimension ``k_dim``) with K contiguous and the other matrix
    dimension's stride a multiple of 16 elements: ``t`` itself where it is so already, else a
    copy (a view of a wider buffer: the padding is never read)."""
    other = 3 - k_dim
    if t.stride(k_dim) == 1 and t.stride(other) % 16 == 0:
        return t
    buf = _ke_kmajor_buffer(t, k_dim, t.dtype)
    buf.copy_(t if k_dim == 2 else t.transpose(1, 2))
    return buf if k_dim == 2 else buf.transpose(1, 2)


def _ke_kmajor_buffer(t, k_dim, dtype):
    """An empty [batch, rows, K] buffer for ``t`` (K its dimension ``k_dim``), K contiguous
    and each row 64-byte aligned: a view of a wider buffer whose padding is never read."""
    bt, rows, k = t.shape[0], t.shape[3 - k_dim], t.shape[k_dim]
    width = (k + 15) // 16 * 16
    return torch.empty((bt, rows, width), dtype=dtype, device=t.device)[:, :, :k]


def _ke_split(p, M, N, K, BT, block_m, block_n, block_k, warps, device):
    """``(split, block_m, block_n, warps)``: how many ranges of K the product is cut into (1:
    none), and the output tile. K is cut where the output's tiles are too few to fill the
    device and K is long (p["split_k"] > 0 forces it). Cutting it first shrinks the tile
    toward 64 x 64 (4 warps): more programs over the output, so fewer partials to write and
    add (KernelBench 6, 256 x 256 over K = 16384 on an H100: 128 x 128 tiles cut 64 ways
    wrote 16 MB of partials, read back by 4 programs, 0.22x of compile); then ranges of at
    least 8 blocks of K, about two programs per SM in all (on 6, tf32x3 on an H100: 16 ranges
    65 us, 8 ranges 80 us, 32 ranges 72 us; session 51's grid)."""
    kblocks = triton.cdiv(K, block_k)
    if p.get("split_k", 0):
        return max(1, min(p["split_k"], kblocks)), block_m, block_n, warps
    sms = 132
    if device.type == "cuda":
        sms = torch.cuda.get_device_properties(device).multi_processor_count
    tiles = triton.cdiv(M, block_m) * triton.cdiv(N, block_n) * BT
    if tiles >= sms or kblocks < 16:
        return 1, block_m, block_n, warps
    while tiles < sms // 2 and max(block_m, block_n) > 64:
        if block_m >= block_n:
            block_m //= 2
        else:
            block_n //= 2
        warps = min(warps, 4)
        tiles = triton.cdiv(M, block_m) * triton.cdiv(N, block_n) * BT
    return max(1, min(kblocks // 8, 2 * sms // tiles)), block_m, block_n, warps


@triton.jit
def _ke_tf32_parts(x_ptr, hi_ptr, lo_ptr, R, C, sxb, sxr, sxc, syb, syr,
                   BR: tl.constexpr, BC: tl.constexpr):
    # x = hi + lo exactly: hi is x with the 13 mantissa bits TF32 drops cleared, lo the rest
    # (an inf's remainder 0, not inf - inf); written with C contiguous.
    b = tl.program_id(2).to(tl.int64)
    r = (tl.program_id(0) * BR + tl.arange(0, BR))[:, None]
    c = (tl.program_id(1) * BC + tl.arange(0, BC))[None, :]
    m = (r < R) & (c < C)
    x = tl.load(x_ptr + b * sxb + r.to(tl.int64) * sxr + c * sxc, mask=m, other=0.0)
    hi = (x.to(tl.uint32, bitcast=True) & 0xFFFFE000).to(tl.float32, bitcast=True)
    lo = tl.where(x == hi, 0.0, x - hi)
    at = b * syb + r.to(tl.int64) * syr + c
    tl.store(hi_ptr + at, hi, mask=m)
    tl.store(lo_ptr + at, lo, mask=m)


def _ke_presplit(t, k_dim):
    """(hi, lo): a 3-d float32 operand (K its dimension ``k_dim``) as its TF32 high parts and
    remainders, K contiguous in both (rows 64-byte aligned): the product's three TF32 dots then
    read their operands as loaded, straight from shared memory, where Triton's "tf32x3" splits
    them in registers inside the loop (KernelBench 8, 2051 x 1480 over 1474, on an H100: 0.83x
    of cuBLAS's IEEE SGEMM)."""
    hi, lo = (_ke_kmajor_buffer(t, k_dim, torch.float32) for _ in range(2))
    bt, rows, k = hi.shape
    grid = (triton.cdiv(rows, 64), triton.cdiv(k, 64), bt)
    _ke_tf32_parts[grid](t, hi, lo, rows, k, t.stride(0), t.stride(3 - k_dim), t.stride(k_dim),
                         hi.stride(0), hi.stride(1), BR=64, BC=64, num_warps=4)
    return (hi, lo) if k_dim == 2 else (hi.transpose(1, 2), lo.transpose(1, 2))


def _ke_reduce_tile(M, N):
    """The partials' reduction tile: about 1024 outputs (4 warps), so that its programs cover
    the output many times over (one per split-K tile read 4 MB each, KernelBench 6)."""
    bn = max(16, min(128, triton.next_power_of_2(N)))
    return max(1, min(triton.next_power_of_2(M), 1024 // bn)), bn
'''


def _operands(plan: Plan) -> str:
    """Wrapper lines binding ``a3`` [batch, M, K] and ``b3`` [batch or 1, K, N] (views of the
    inputs, read through their strides) and the output's shape ``oshape``."""
    a, b = plan.extra["a"], plan.extra["b"]
    b2 = f"{b}.t()" if plan.extra["b_transposed"] else b
    mode_a, mode_b = plan.extra.get("batch_a"), plan.extra.get("batch_b")
    if mode_a == "batched":  # torch.bmm: the leading dimensions are the batch
        a3 = f"{a}.reshape(-1, {a}.shape[-2], {a}.shape[-1])"
        a3 += ".transpose(1, 2)" if plan.extra.get("a_transposed") else ""
    elif plan.extra.get("a_merge"):  # its last dimensions merge into K
        j = int(plan.extra["a_merge"])
        a3 = f"{a}.reshape(1, math.prod({a}.shape[:-{j}]), math.prod({a}.shape[-{j}:]))"
    elif mode_a == "rows" or not plan.extra.get("a_transposed"):  # leading dims fold into M
        a3 = f"{a}.reshape(1, math.prod({a}.shape[:-1]), {a}.shape[-1])"  # -1 fails when K is 0
    else:  # A.T of a matrix: read through its strides
        a3 = f"{a}.t()[None]"
    b3 = f"{b}.reshape(-1, {b}.shape[-2], {b}.shape[-1])" if mode_b == "batched" else f"{b2}[None]"
    if mode_b == "batched" and plan.extra["b_transposed"]:
        b3 += ".transpose(1, 2)"
    oshape = "(a3.shape[1], N)" if plan.extra.get("a_transposed") else f"{a}.shape[:-1] + (N,)"
    if mode_a == "batched":
        oshape = f"{a}.shape[:-2] + (a3.shape[1], N)"
    elif plan.extra.get("a_merge"):
        oshape = f"{a}.shape[:-{int(plan.extra['a_merge'])}] + (N,)"
    return (
        f"        a3 = {a3}\n        b3 = {b3}\n"
        f"        N = b3.shape[2]\n        oshape = {oshape}\n"
    )


def _source_matmul(plan: Plan, p: dict) -> str:
    vecs = _refs(plan)  # the epilogue's inputs (vectors, 0-d cells), the accumulator not
    # returned with 1s inserted where the trace has them (einsum's [b, h, q, 1, k] read by a
    # kernel after it as traced)
    ret = "out" + "".join(f".unsqueeze({d})" for d in plan.extra.get("out_ones", []))
    vec_loads = "".join(f"        in{i} = {r}.contiguous()\n" for i, r in enumerate(vecs))
    vec_args = "".join(f"in{i}, " for i in range(len(vecs)))
    return (
        _header(plan, p)
        + _matmul_kernel(plan)
        + "\n\n"
        + _reduce_kernel(plan)
        + _SPLIT_POLICY
        + _model_head(plan, p)
        + f"""{_operands(plan)}{vec_loads}        BT, M, K = a3.shape
        odt = torch.promote_types(a3.dtype, b3.dtype)
        out = torch.empty(oshape, dtype=odt, device=a3.device)
        if M == 0 or N == 0 or BT == 0:
            return {ret}
        if K == 0:
            a3 = torch.zeros((BT, M, 1), dtype=a3.dtype, device=a3.device)
            b3 = torch.zeros((b3.shape[0], 1, N), dtype=b3.dtype, device=b3.device)
            K = 1
        block_m = max(16, min(p["block_m"], triton.next_power_of_2(M)))
        block_n = max(16, min(p["block_n"], triton.next_power_of_2(N)))
        block_k = max(16, min(p["block_k"], triton.next_power_of_2(K)))
        # float32: IEEE products, three TF32 ones on the tensor cores ("tf32x3", about 2^-21
        # of each product off), or one ("tf32", about 2^-11: proposed only where the
        # workload's tolerance admits it); the correctness gate judges each like any candidate.
        precision = p.get("fp32_dot", "ieee") if odt == torch.float32 else "tf32"
        # Triton's interpreter multiplies the raw bits of 16-bit operands in tl.dot (seen with
        # triton 3.9): on the CPU the operands are widened first; on a GPU they never are.
        upcast = a3.device.type == "cpu"
        # Hopper's tensor cores read float32 (TF32) operands from shared memory K-major only:
        # where B is row-major (``x @ W``, N contiguous), tf32x3 was slower than IEEE on the
        # H200 (467 vs 418 us at 2048^2). ``kmajor`` copies such an operand K-major first
        # (one pass over it; A where it is read transposed, ``x.T @ W``), and one whose rows
        # are not 64-byte aligned (K = 1474) into rows that are.
        presplit, stages = precision == "tf32x3_split", p["stages"]
        al3, bl3 = a3, b3  # the remainders, where the operands are split before the product
        if presplit:
            a3, al3 = _ke_presplit(a3, 2)
            b3, bl3 = _ke_presplit(b3, 1)
            precision = "tf32"
            # four tiles a stage where the others load two
            block_k, stages = min(block_k, 32), min(p["stages"], 3)
        elif p.get("kmajor") and odt == torch.float32 and precision != "ieee":
            a3 = _ke_kmajor(a3, 2) if M > 1 else a3
            b3 = _ke_kmajor(b3, 1) if N > 1 else b3
        # One matrix shared by every batch: its batch stride is 0.
        stride_bb = b3.stride(0) if b3.shape[0] > 1 else 0
        split, block_m, block_n, warps = _ke_split(p, M, N, K, BT, block_m, block_n, block_k,
                                                   p["warps"], a3.device)
        tiles = triton.cdiv(M, block_m) * triton.cdiv(N, block_n)
        kb_per = triton.cdiv(triton.cdiv(K, block_k), split)
        split = triton.cdiv(triton.cdiv(K, block_k), kb_per)
        part = out  # unused unless K is split
        if split > 1:
            part = torch.empty((split, BT, M, N), dtype=torch.float32, device=a3.device)
        _ke_matmul[(tiles, BT, split)](
            a3, b3, al3, bl3, {vec_args}out, part, M, N, K, BT, kb_per, a3.stride(1), a3.stride(2),
            b3.stride(1), b3.stride(2), a3.stride(0), stride_bb, BLOCK_M=block_m,
            BLOCK_N=block_n, BLOCK_K=block_k, GROUP_M=p["group_m"], PRECISION=precision,
            UPCAST=upcast, SPLIT=split > 1, PRESPLIT=presplit, num_warps=warps,
            num_stages=stages)
        if split > 1:
            rbm, rbn = _ke_reduce_tile(M, N)
            rtiles = triton.cdiv(M, rbm) * triton.cdiv(N, rbn)
            _ke_matmul_reduce[(rtiles, BT)](part, {vec_args}out, M, N, BT, split,
                                            BLOCK_M=rbm, BLOCK_N=rbn, GROUP_M=1, num_warps=4)
        return {ret}
"""
    )
