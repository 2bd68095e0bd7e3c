"""The ``scan`` family: a cumulative sum or product along the last dimension, with pointwise ops
before and after it (``workers.search.lowering_scan``).

ROWS rows per program walk their row in BLOCK columns (from the far end for a reversed scan):
each block is scanned in registers (``tl.cumsum`` / ``tl.cumprod``, in fp32) and offset by the
row's running total so far, which the block's own total then extends. Lanes past the row hold
the scan's identity, so the block's last lane (its first, reversed) is its total.
"""

from __future__ import annotations

from workers.search.generators.templates.common import (
    _bind_inputs,
    _dtype_line,
    _Emitter,
    _forward_head,
    _header,
    _io_names,
    _kernel,
    _refs,
)
from workers.search.ir import Plan

_IDENTITY = {"cumsum": "0.0", "cumprod": "1.0"}
_COMBINE = {"cumsum": "+", "cumprod": "*"}


def _scan_kernel(plan: Plan) -> str:
    em = _Emitter(plan, "tl.load({ptr} + toff, mask=mask, other=0.0)", "")
    (scan,) = [n for n in plan.nodes if n.kind == "scan"]
    op, reverse = scan.op, bool(scan.attrs["reverse"])
    ident, comb = _IDENTITY[op], _COMBINE[op]
    body = [
        "pid = tl.program_id(0)",
        "rows = (pid * ROWS + tl.arange(0, ROWS)).to(tl.int64)[:, None]",
        "rmask = rows < M",
        "lane = tl.arange(0, BLOCK)[None, :]",
        f"carry = tl.full([ROWS, 1], {ident}, tl.float32)",
        "blocks = tl.cdiv(N, BLOCK)",
        "for i in range(0, blocks):",
    ]
    start = "(blocks - 1 - i) * BLOCK" if reverse else "i * BLOCK"
    end_lane = "0" if reverse else "BLOCK - 1"
    inner = [
        f"cols = {start} + lane",
        "mask = rmask & (cols < N)",
        "toff = (rows // K) * N * K + rows % K + cols * K"
        if plan.extra.get("scan_dim", -1) != -1
        else "toff = rows * N + cols",
    ]
    for node in plan.nodes:
        if node.kind == "scan":
            x = em.name(plan.nodes[node.args[0]])
            rev = ", reverse=True" if reverse else ""
            inner += [
                f"part = tl.where(mask, {x}, {ident})",
                f"part = tl.{op}(part, axis=1{rev})",
                f"v{node.id} = part {comb} carry",
                f"carry = carry {comb} tl.sum(tl.where(lane == {end_lane}, part, 0.0), axis=1)"
                "[:, None]",
            ]
            continue
        stmt = em.stmt(node)
        if stmt:
            inner.append(stmt)
    for j, o in enumerate(plan.outputs):
        inner.append(f"tl.store(out{j}_ptr + toff, {em.name(plan.nodes[o])}, mask=mask)")
    body += ["    " + line for line in inner]
    return _kernel("_ke_scan", plan, ["ROWS", "BLOCK"], body, ["M", "N", "K"])


def _source_scan(plan: Plan, p: dict) -> str:
    refs = _refs(plan)
    numbers = set(_refs(plan, "scalar"))
    tensors = [r for r in refs if r not in numbers]
    masks = {n.attrs["ref"] for n in plan.inputs("tile") if n.attrs.get("mask")}
    floats = [r for r in tensors if r not in masks] or tensors
    ref0 = floats[0]
    outs = "".join(
        f"        out{j} = torch.empty({ref0}.shape, dtype=odt, device={ref0}.device)\n"
        for j in range(len(plan.outputs))
    )
    args, ret = _io_names(plan, refs)
    d = int(plan.extra.get("scan_dim", -1))  # rows along another dimension are K apart
    return (
        _header(plan, p)
        + _scan_kernel(plan)
        + _forward_head(plan)
        + _dtype_line(floats)
        + _bind_inputs(refs, numbers)
        + outs
        + f"        N = {ref0}.shape[{d}] if {ref0}.dim() else 1\n"
        + f"        K = math.prod({ref0}.shape[{d + 1}:]) if {d} != -1 else 1\n"
        + f"        M = {ref0}.numel() // N if N else 0\n"
        + f"        if M == 0:\n            return {ret}\n"
        + f"        block = min({p['block']}, triton.next_power_of_2(N))\n"
        + f"        rows = max(1, min({p['rows']}, triton.next_power_of_2(M)))\n"
        + "        grid = (triton.cdiv(M, rows),)\n"
        + f"        _ke_scan[grid]({', '.join(args)}, M, N, K, ROWS=rows, BLOCK=block, "
        + f"num_warps={p['warps']})\n"
        + f"        return {ret}\n"
    )
