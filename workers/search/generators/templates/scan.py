"""The ``scan`` family: a cumulative sum, product, maximum, minimum or log-sum-exp along the last
dimension, with pointwise ops before and after it (``workers.search.lowering_scan``).

ROWS rows per program walk their row in BLOCK columns (from the far end for a reversed scan):
each block is scanned in registers (``tl.cumsum`` / ``tl.cumprod``, the others with
``tl.associative_scan`` and a combine function, in fp32) and combined with the
row's running total so far, which the block's own total then extends. Lanes past the row hold
the scan's identity, so the block's last lane (its first, reversed) is its total. Where there
are too few rows to fill the device (128 rows of 32768: 0.52x of compile on the H200), each
row is cut into segments: a first launch stores each segment's total, a second scans each
segment from the totals before it.
"""

from __future__ import annotations

from workers.search.generators.templates.common import (
    _KE_MUL,
    _bind_inputs,
    _dtype_line,
    _Emitter,
    _header,
    _io_names,
    _kernel,
    _model_head,
    _reduce_expr,
    _refs,
)
from workers.search.ir import NoTemplate, Plan

_IDENTITY = {
    "cumsum": "0.0",
    "cumprod": "1.0",
    "cummax": "-float('inf')",
    "cummin": "float('inf')",
    "logcumsumexp": "-float('inf')",
}
# The jit combine function of a scan without its own tl.<op> (tl.associative_scan, tl.reduce).
_COMBINE_FN = {"cummax": "_ke_max", "cummin": "_ke_min", "logcumsumexp": "_ke_lae"}
_KE_COMBINES = """@triton.jit
def _ke_max(a, b):
    return tl.maximum(a, b)


@triton.jit
def _ke_min(a, b):
    return tl.minimum(a, b)


@triton.jit
def _ke_lae(a, b):
    # log(exp(a) + exp(b)) = max + log(1 + exp(min - max)); where min - max is NaN (both -inf,
    # both +inf) the answer is the max itself.
    m = tl.maximum(a, b)
    d = tl.minimum(a, b) - m
    return tl.where(d == d, m + tl.log(1.0 + tl.exp(d)), m)


"""


def _combine(op: str, a: str, b: str) -> str:
    """The scan's combine of two values, as a kernel expression."""
    if op == "cumsum":
        return f"{a} + {b}"
    if op == "cumprod":
        return f"{a} * {b}"
    return f"{_COMBINE_FN[op]}({a}, {b})"


def _total(op: str, x: str) -> str:
    """The scan's combine over a block's columns (axis 1), kept as a column."""
    if op in ("cumsum", "cumprod"):
        return _reduce_expr("sum" if op == "cumsum" else "prod", x)
    return f"tl.reduce({x}, 1, {_COMBINE_FN[op]})[:, None]"


def _block_scan(op: str, x: str, reverse: bool) -> str:
    rev = ", reverse=True" if reverse else ""
    if op in ("cumsum", "cumprod"):
        return f"tl.{op}({x}, axis=1{rev})"
    return f"tl.associative_scan({x}, 1, {_COMBINE_FN[op]}{rev})"


def _scan_kernel(plan: Plan) -> str:
    """ROWS rows per program scan the blocks [b0, b1) of their row (program axis 1: the
    row's segment; one segment is the whole row).

    ``PHASE`` 1 (rows cut into segments, first launch): only the segment's total, stored in
    ``part`` [M, S]. ``PHASE`` 2: the carry starts from the totals of the segments before this
    one (after it, reversed), combined in order (deterministic: no atomics), then the
    segment is scanned and stored. ``PHASE`` 0: a whole row, as one program walks it."""

    def shifted(node, ptr, k, sh):
        if node.attrs.get("mirror"):
            raise NoTemplate("a flip outside the scan beside a cumulative scan is not covered")
        # An exclusive scan reads its input one column back (zero before the row's start).
        inside = f"mask & (cols + {sh} >= 0) & (cols + {sh} < N)"
        return f"tl.load({ptr} + toff + ({sh}) * K, mask={inside}, other=0.0)"

    em = _Emitter(plan, "tl.load({ptr} + toff, mask=mask, other=0.0)", "", shifted=shifted)
    (scan,) = [n for n in plan.nodes if n.kind == "scan"]
    op, reverse = scan.op, bool(scan.attrs["reverse"])
    ident = _IDENTITY[op]
    body = [
        # NC > 0: the row length is a compile-time constant (Inductor's static-shape kernels:
        # the block loop's trip count and the column masks are known); I32: every offset fits
        # 32 bits, so index arithmetic runs in them (both ran at 0.92-0.95x of compile on an
        # H100 without: KernelBench 89, 90, 93)
        "if NC > 0:",
        "    N = NC",
        "pid = tl.program_id(0)",
        "seg = tl.program_id(1)",
        "rows = (pid * ROWS + tl.arange(0, ROWS))[:, None]",
        "if not I32:",
        "    rows = rows.to(tl.int64)",
        "rmask = rows < M",
        "lane = tl.arange(0, BLOCK)[None, :]",
        f"carry = tl.full([ROWS, 1], {ident}, tl.float32)",
        "blocks = tl.cdiv(N, BLOCK)",
        "b0 = seg * PER",
        "b1 = tl.minimum(b0 + PER, blocks)",
        "if PHASE == 0:  # the whole row: a trip count known where N is",
        "    b0 = 0",
        "    b1 = blocks",
        "if PHASE == 2:  # the totals of the segments before this one, in order",
        "    sidx = tl.arange(0, SP)[None, :]",
        "    before = sidx > seg" if reverse else "    before = sidx < seg",
        "    prev = tl.load(part_ptr + rows * S + sidx, mask=rmask & before & (sidx < S),",
        f"                   other={ident})",
        f"    carry = {_total(op, 'prev')}",
        "for i in range(b0, b1):",
    ]
    start = "(b1 - 1 - (i - b0)) * BLOCK" if reverse else "i * BLOCK"
    end_lane = "0" if reverse else "BLOCK - 1"
    inner = [
        f"cols = {start} + lane",
        "mask = rmask & (cols < N)",
        "toff = (rows // K) * N * K + rows % K + cols * K"
        if plan.extra.get("scan_dim", -1) != -1
        else "toff = rows * N + cols",
    ]
    total = []  # phase 1: the segment's total only
    for node in plan.nodes:
        if node.kind == "scan":
            x = em.name(plan.nodes[node.args[0]])
            block_total = _total(op, f"tl.where(mask, {x}, {ident})")
            total = list(inner) + [f"carry = {_combine(op, 'carry', block_total)}"]
            last = f"tl.sum(tl.where(lane == {end_lane}, part, 0.0), axis=1)[:, None]"
            inner += [
                f"part = tl.where(mask, {x}, {ident})",
                f"part = {_block_scan(op, 'part', reverse)}",
                f"v{node.id} = {_combine(op, 'part', 'carry')}",
                f"carry = {_combine(op, 'carry', last)}",
            ]
            continue
        stmt = em.stmt(node)
        if stmt:
            inner.append(stmt)
    for j, o in enumerate(plan.outputs):
        inner.append(f"tl.store(out{j}_ptr + toff, {em.name(plan.nodes[o])}, mask=mask)")
    body += ["    if PHASE == 1:"] + ["        " + line for line in total]
    body += ["    else:"] + ["        " + line for line in inner]
    body += [
        "if PHASE == 1:",
        "    tl.store(part_ptr + rows * S + seg, carry, mask=rmask)",
    ]
    return _kernel(
        "_ke_scan",
        plan,
        ["ROWS", "BLOCK", "PHASE", "SP", "NC", "I32"],
        body,
        ["M", "N", "K", "part_ptr", "S", "PER"],
    )


_SEGMENTS = '''

def _ke_segments(p, tiles, blocks):
    """How many segments each row's scan is cut into (1: none): where there are too few row
    programs to fill the device and the row has blocks to spare (p["segments"] > 0 forces)."""
    if p.get("segments", 0):
        return max(1, min(p["segments"], blocks))
    if tiles >= 264 or blocks < 4:
        return 1
    return max(1, min(blocks // 2, 1024 // tiles))
'''


def _source_scan(plan: Plan, p: dict) -> str:
    refs = _refs(plan)
    numbers = set(_refs(plan, "scalar"))
    tensors = [r for r in refs if r not in numbers]
    masks = {n.attrs["ref"] for n in plan.inputs("tile") if n.attrs.get("mask")}
    floats = [r for r in tensors if r not in masks] or tensors
    ref0 = ([r for r in _refs(plan, "tile") if r not in masks] or floats)[0]
    outs = "".join(
        f"        out{j} = torch.empty({ref0}.shape, dtype=odt, device={ref0}.device)\n"
        for j in range(len(plan.outputs))
    )
    args, ret = _io_names(plan, refs)
    d = int(plan.extra.get("scan_dim", -1))  # rows along another dimension are K apart
    return (
        _header(plan, p)
        + (_KE_MUL if any(n.op == "cumprod" for n in plan.nodes if n.kind == "scan") else "")
        + (_KE_COMBINES if any(n.op in _COMBINE_FN for n in plan.nodes if n.kind == "scan") else "")
        + _scan_kernel(plan)
        + _SEGMENTS
        + _model_head(plan, p)
        + _dtype_line(floats, plan)
        + _bind_inputs(refs, numbers)
        + outs
        + f"        N = {ref0}.shape[{d}] if {ref0}.dim() else 1\n"
        + f"        K = math.prod({ref0}.shape[{d + 1}:]) if {d} != -1 else 1\n"
        + f"        M = {ref0}.numel() // N if N else 0\n"
        + f"        if M == 0:\n            return {ret}\n"
        + f"        block = min({p['block']}, triton.next_power_of_2(N))\n"
        + f"        rows = max(1, min({p['rows']}, triton.next_power_of_2(M)))\n"
        + "        tiles = triton.cdiv(M, rows)\n"
        + "        blocks = triton.cdiv(N, block)\n"
        + "        segs = _ke_segments(p, tiles, blocks)\n"
        + "        per = triton.cdiv(blocks, segs)\n"
        + "        segs = triton.cdiv(blocks, per)\n"
        + f"        part = {ref0}  # unused unless the rows are cut into segments\n"
        + "        if segs > 1:\n"
        + f"            part = torch.empty((M, segs), dtype=torch.float32, device={ref0}.device)\n"
        + "        for phase in ((1, 2) if segs > 1 else (0,)):\n"
        + f"            _ke_scan[(tiles, segs)]({', '.join(args)}, M, N, K, part, segs, per,\n"
        + "                                    ROWS=rows, BLOCK=block, PHASE=phase,\n"
        + f"                                    NC={'N' if p.get('static', 1) else 0},\n"
        + f"                                    I32={ref0}.numel() < 2**31,\n"
        + "                                    SP=max(triton.next_power_of_2(segs),\n"
        + f"                                           {32 * p['warps']} // rows),\n"
        + f"                                    num_warps={p['warps']})\n"
        + f"        return {ret}\n"
    )
