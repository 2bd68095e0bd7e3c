"""The ``matmul`` family: a tiled GEMM with the epilogue (bias, activation) on the accumulator."""

from __future__ import annotations

import json

from workers.search.generators.templates.common import _Emitter, _header, _refs
from workers.search.trace import Plan


def _matmul_kernel(plan: Plan) -> str:
    em = _Emitter(plan, "", "tl.load({ptr} + cols, mask=cmask, other=0.0)")
    body = """pid = tl.program_id(0)
num_pid_m = tl.cdiv(M, BLOCK_M)
num_pid_n = tl.cdiv(N, BLOCK_N)
num_pid_in_group = GROUP_M * num_pid_n
group_id = pid // num_pid_in_group
first_pid_m = group_id * GROUP_M
group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
pid_n = (pid % num_pid_in_group) // group_size_m
rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
rk = tl.arange(0, BLOCK_K)
a_ptrs = a_ptr + rm[:, None].to(tl.int64) * stride_am + rk[None, :] * stride_ak
b_ptrs = b_ptr + rk[:, None].to(tl.int64) * stride_bk + rn[None, :] * stride_bn
acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
for k in range(0, tl.cdiv(K, BLOCK_K)):
    kk = k * BLOCK_K + rk
    a = tl.load(a_ptrs, mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
    b = tl.load(b_ptrs, mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
    if UPCAST:
        a = a.to(tl.float32)
        b = b.to(tl.float32)
    acc = tl.dot(a, b, acc, input_precision=PRECISION)
    a_ptrs += BLOCK_K * stride_ak
    b_ptrs += BLOCK_K * stride_bk
rows = rm[:, None]
cols = rn[None, :]
cmask = cols < N
mask = (rows < M) & cmask""".splitlines()
    for node in plan.nodes:
        s = em.stmt(node)
        if s:
            body.append(s)
    body.append(
        f"tl.store(out0_ptr + rows.to(tl.int64) * N + cols, {em.name(plan.nodes[plan.outputs[0]])}"
        ", mask=mask)"
    )
    ins = ["a_ptr", "b_ptr"] + [f"in{i}_ptr" for i in range(len(plan.inputs()) - 1)]
    sig = ", ".join(
        ins
        + ["out0_ptr", "M", "N", "K", "stride_am", "stride_ak", "stride_bk", "stride_bn"]
        + [
            f"{c}: tl.constexpr"
            for c in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "PRECISION", "UPCAST")
        ]
    )
    return f"@triton.jit\ndef _ke_matmul({sig}):\n" + "".join(f"    {x}\n" for x in body)


def _source_matmul(plan: Plan, p: dict) -> str:
    vecs = _refs(plan, "vec")
    a, b = plan.extra["a"], plan.extra["b"]
    b_expr = f"{b}.t()" if plan.extra["b_transposed"] else b
    vec_loads = "".join(f"        in{i} = {r}.contiguous()\n" for i, r in enumerate(vecs))
    vec_args = "".join(f"in{i}, " for i in range(len(vecs)))
    return (
        _header(plan, p)
        + _matmul_kernel(plan)
        + f"""

_PARAMS = {json.dumps(p, sort_keys=True)}


class ModelNew(nn.Module):
{plan.init_source}
    def forward(self, {", ".join(plan.forward_args)}):
        p = _PARAMS
        a2 = {a}.reshape(math.prod({a}.shape[:-1]), {a}.shape[-1])  # -1 fails when K is 0
        b2 = {b_expr}
{vec_loads}        M, K = a2.shape
        N = b2.shape[1]
        odt = torch.promote_types(a2.dtype, b2.dtype)
        out = torch.empty(({a}.shape[:-1] + (N,)), dtype=odt, device=a2.device)
        if M == 0 or N == 0:
            return out
        if K == 0:
            a2 = torch.zeros((M, 1), dtype=a2.dtype, device=a2.device)
            b2 = torch.zeros((1, N), dtype=b2.dtype, device=b2.device)
            K = 1
        block_m = max(16, min(p["block_m"], triton.next_power_of_2(M)))
        block_n = max(16, min(p["block_n"], triton.next_power_of_2(N)))
        block_k = max(16, min(p["block_k"], triton.next_power_of_2(K)))
        precision = "ieee" if odt == torch.float32 else "tf32"
        # Triton's interpreter multiplies the raw bits of 16-bit operands in tl.dot (seen with
        # triton 3.9): on the CPU the operands are widened first; on a GPU they never are.
        upcast = a2.device.type == "cpu"
        grid = (triton.cdiv(M, block_m) * triton.cdiv(N, block_n),)
        _ke_matmul[grid](a2, b2, {vec_args}out, M, N, K, a2.stride(0), a2.stride(1),
                         b2.stride(0), b2.stride(1), BLOCK_M=block_m, BLOCK_N=block_n,
                         BLOCK_K=block_k, GROUP_M=p["group_m"], PRECISION=precision, UPCAST=upcast,
                         num_warps=p["warps"], num_stages=p["stages"])
        return out
"""
    )
