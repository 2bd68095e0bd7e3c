"""The template generator: parametric Triton kernels for traced operator families, no LLM.

The problem's reference is traced (:mod:`workers.search.trace`) into a family and an expression
IR; this module writes a complete candidate (``ModelNew`` with the reference's constructor and
Triton kernels for its forward) from that IR and a parameter dict. Parameters are policies more
than numbers (a target tile size and elements per thread rather than a fixed ``num_warps``) so
one candidate adapts to every case of a workload; the search mutates them.

Families and their parameters:

- ``elementwise``: ``block``, ``vec`` (elements per thread: sets warps), ``tiles`` per program.
- ``row``: ``strategy`` (``one_pass``: the whole row in registers; ``looped``: one pass per
  reduction level over ``block_n`` chunks; ``auto``: one-pass up to ``max_one_pass``), ``tile``
  (elements per program, so short rows pack several per program), ``max_rows``, ``vec``,
  ``stages``.
- ``matmul``: ``block_m`` (shrunk to the case's M), ``block_n``, ``block_k``, ``group_m``,
  ``warps``, ``stages``; the epilogue (bias, activation) is fused on the accumulator.
- ``cross_entropy``: ``strategy`` (``online`` log-sum-exp in one pass, or ``two_pass``),
  ``block_v``, ``vec``; a second single-program kernel reduces the per-row losses in a fixed
  order, so the result is deterministic.
"""

from __future__ import annotations

import hashlib
import json
import random

from workers.search.generators.base import (
    EDGE_ALTERNATIVE,
    EDGE_CROSSOVER,
    EDGE_MUTATION,
    EDGE_REPAIR,
    EDGE_SEED,
    GenerationContext,
    Proposal,
)
from workers.search.trace import (
    IRNode,
    NoTemplate,
    Plan,
    case_rows_confined,
    trace_problem_confined,
)

# The values each parameter may take, in order (mutation moves to a neighbour).
SPACES: dict[str, dict[str, list]] = {
    "elementwise": {
        "block": [256, 512, 1024, 2048, 4096, 8192, 16384],
        "vec": [1, 2, 4, 8, 16],
        "tiles": [1, 2, 4, 8],
    },
    "row": {
        "strategy": ["auto", "one_pass", "looped"],
        "max_one_pass": [2048, 4096, 8192, 16384, 32768, 65536],
        "tile": [512, 1024, 2048, 4096, 8192, 16384, 32768],
        "max_rows": [1, 2, 4, 8, 16, 32],
        "block_n": [256, 512, 1024, 2048, 4096, 8192],
        "vec": [1, 2, 4, 8, 16, 32],
        "stages": [1, 2, 3, 4],
    },
    "matmul": {
        "block_m": [16, 32, 64, 128, 256],
        "block_n": [32, 64, 128, 256],
        "block_k": [32, 64, 128],
        "group_m": [1, 4, 8, 16],
        "warps": [2, 4, 8],
        "stages": [2, 3, 4, 5],
    },
    "cross_entropy": {
        "strategy": ["online", "two_pass"],
        "block_v": [512, 1024, 2048, 4096, 8192, 16384],
        "vec": [2, 4, 8, 16, 32],
    },
}

DEFAULTS: dict[str, dict] = {
    "elementwise": {"block": 2048, "vec": 8, "tiles": 1},
    "row": {
        "strategy": "auto",
        "max_one_pass": 16384,
        "tile": 4096,
        "max_rows": 16,
        "block_n": 2048,
        "vec": 8,
        "stages": 2,
    },
    "matmul": {
        "block_m": 128,
        "block_n": 128,
        "block_k": 64,
        "group_m": 8,
        "warps": 8,
        "stages": 3,
    },
    "cross_entropy": {"strategy": "online", "block_v": 4096, "vec": 8},
}

# Structural parameters: changing one is an ``alternative`` edge rather than a ``mutation``.
STRUCTURAL = {"strategy", "tiles"}

# Seeds beyond the default: a few structurally different starting points per family.
SEEDS: dict[str, list[dict]] = {
    "elementwise": [{"block": 1024, "vec": 4}, {"block": 4096, "vec": 16, "tiles": 2}],
    "row": [
        {"strategy": "looped", "block_n": 1024, "vec": 4},
        {"tile": 8192, "vec": 16},
        {"tile": 2048, "max_rows": 4, "vec": 4},
    ],
    "matmul": [
        {"block_m": 64, "block_n": 128, "block_k": 32, "warps": 4, "stages": 4},
        {"block_m": 128, "block_n": 256, "block_k": 64, "warps": 8, "stages": 3},
        {"block_m": 16, "block_n": 64, "block_k": 128, "warps": 4, "stages": 4, "group_m": 1},
    ],
    "cross_entropy": [{"strategy": "two_pass", "block_v": 2048}, {"block_v": 8192, "vec": 16}],
}

_SMEM_LIMIT = 200 * 1024  # bytes; H100/H200 allow 227 KB per block, keep headroom


def _literal(value: float) -> str:
    if value != value:
        return 'float("nan")'
    if value in (float("inf"), float("-inf")):
        return ("-" if value < 0 else "") + 'float("inf")'
    return f"({float(value)!r})"


def _pw_expr(op: str, a: list[str], consts: list[float | None]) -> str:
    x = a[0] if a else ""
    table = {
        "add": lambda: f"{a[0]} + {a[1]}",
        "sub": lambda: f"{a[0]} - {a[1]}",
        "mul": lambda: f"{a[0]} * {a[1]}",
        "div": lambda: f"{a[0]} / {a[1]}",
        "div_n": lambda: f"{a[0]} / (N - {a[1]})",
        "neg": lambda: f"-{x}",
        "exp": lambda: f"tl.exp({x})",
        "exp2": lambda: f"tl.exp2({x})",
        "expm1": lambda: f"tl.exp({x}) - 1.0",
        "log": lambda: f"tl.log({x})",
        "log2": lambda: f"tl.log2({x})",
        "log1p": lambda: f"tl.log(1.0 + {x})",
        "sqrt": lambda: f"tl.sqrt({x})",
        "rsqrt": lambda: f"tl.rsqrt({x})",
        "abs": lambda: f"tl.abs({x})",
        "sigmoid": lambda: f"tl.sigmoid({x})",
        "tanh": lambda: f"2.0 * tl.sigmoid(2.0 * {x}) - 1.0",
        "relu": lambda: f"tl.maximum({x}, 0.0)",
        "silu": lambda: f"{x} * tl.sigmoid({x})",
        "gelu": lambda: f"0.5 * {x} * (1.0 + tl.erf({x} * 0.7071067811865476))",
        # 0.5 * (1 + tanh(z)) == sigmoid(2 z)
        "gelu_tanh": lambda: (
            f"{x} * tl.sigmoid(1.5957691216057308 * ({x} + 0.044715 * {x} * {x} * {x}))"
        ),
        "erf": lambda: f"tl.erf({x})",
        "sin": lambda: f"tl.sin({x})",
        "cos": lambda: f"tl.cos({x})",
        "reciprocal": lambda: f"1.0 / {x}",
        "maximum": lambda: f"tl.maximum({a[0]}, {a[1]})",
        "minimum": lambda: f"tl.minimum({a[0]}, {a[1]})",
        "leaky_relu": lambda: f"tl.where({x} > 0.0, {x}, {x} * {a[1]})",
        "elu": lambda: (
            f"tl.where({x} > 0.0, {a[2]} * {x}, {a[2]} * {a[1]} * (tl.exp({x} * {a[3]}) - 1.0))"
        ),
        "softplus": lambda: (
            f"tl.where({x} * {a[1]} > {a[2]}, {x}, tl.log(1.0 + tl.exp({x} * {a[1]})) / {a[1]})"
        ),
        "hardsigmoid": lambda: f"tl.minimum(tl.maximum({x} / 6.0 + 0.5, 0.0), 1.0)",
        "hardswish": lambda: f"{x} * tl.minimum(tl.maximum({x} / 6.0 + 0.5, 0.0), 1.0)",
        "mish": lambda: (
            f"{x} * (2.0 * tl.sigmoid(2.0 * tl.where({x} > 20.0, {x}, "
            f"tl.log(1.0 + tl.exp({x})))) - 1.0)"
        ),
        "sign": lambda: f"tl.where({x} > 0.0, 1.0, tl.where({x} < 0.0, -1.0, 0.0))",
        "where": lambda: f"tl.where({a[0]}, {a[1]}, {a[2]})",
        "gt": lambda: f"{a[0]} > {a[1]}",
        "lt": lambda: f"{a[0]} < {a[1]}",
        "ge": lambda: f"{a[0]} >= {a[1]}",
        "le": lambda: f"{a[0]} <= {a[1]}",
    }
    if op == "pow":
        e = consts[1]
        if e is not None:
            powers = {
                1.0: f"{x}",
                2.0: f"{x} * {x}",
                3.0: f"{x} * {x} * {x}",
                4.0: f"({x} * {x}) * ({x} * {x})",
                0.5: f"tl.sqrt({x})",
                -0.5: f"tl.rsqrt({x})",
                -1.0: f"1.0 / {x}",
                0.0: "1.0",
            }
            if e in powers:
                return powers[e]
        return f"tl.exp2({a[1]} * tl.log2({x}))"
    if op not in table:
        raise NoTemplate(f"no Triton expression for pointwise op {op}")
    return table[op]()


class _Emitter:
    """Writes the Triton statements that evaluate IR nodes."""

    def __init__(self, plan: Plan, load_tile: str, load_vec: str) -> None:
        self.plan = plan
        self.load_tile = load_tile  # e.g. "tl.load({ptr} + roff + cols, mask=mask, other=0.0)"
        self.load_vec = load_vec
        self.ptr = {}
        real = [n for n in plan.inputs() if n.attrs["ref"] != "acc"]
        for i, n in enumerate(real):
            self.ptr[n.id] = f"in{i}_ptr"

    def name(self, node: IRNode) -> str:
        return _literal(node.value) if node.kind == "const" else f"v{node.id}"

    def stmt(self, node: IRNode) -> str | None:
        nodes = self.plan.nodes
        if node.kind == "const":
            return None
        if node.kind == "input":
            if node.attrs["ref"] == "acc":
                return f"v{node.id} = acc"
            tmpl = self.load_vec if node.attrs["role"] == "vec" else self.load_tile
            return f"v{node.id} = {tmpl.format(ptr=self.ptr[node.id])}.to(tl.float32)"
        if node.kind == "pw":
            args = [self.name(nodes[a]) for a in node.args]
            consts = [nodes[a].value if nodes[a].kind == "const" else None for a in node.args]
            return f"v{node.id} = {_pw_expr(node.op, args, consts)}"
        raise AssertionError(node.kind)

    def deps(self, ids, stop) -> list[int]:
        """Transitive dependencies of ``ids`` (themselves included), not crossing ``stop``."""
        seen: set[int] = set()
        stack = list(ids)
        while stack:
            i = stack.pop()
            if i in seen or i in stop:
                continue
            seen.add(i)
            node = self.plan.nodes[i]
            if node.kind != "reduce" or i in ids:
                stack.extend(node.args)
        return sorted(seen)


def _reduce_expr(op: str, val: str, axis: int = 1, keep: bool = True) -> str:
    red = {"sum": "tl.sum", "mean": "tl.sum", "max": "tl.max", "min": "tl.min"}[op]
    out = f"{red}({val}, axis={axis})"
    return out + ("[:, None]" if keep else "")


_IDENTITY = {"sum": "0.0", "mean": "0.0", "max": '-float("inf")', "min": 'float("inf")'}


# --------------------------------------------------------------------------------- row kernels


_ROW_CONSTEXPRS = ["ROWS", "BLOCK_N", "PROGRAMS", "EV_T", "EV_V"]


def _row_tiles(body: list[str]) -> list[str]:
    """The row kernels' program body over its tiles of ROWS rows: one tile per program, or
    (``PROGRAMS`` > 0, a persistent launch of that many programs) a loop over tiles."""
    out = ["pid = tl.program_id(0)", "if PROGRAMS == 0:", "    tile = pid"]
    out += ["    " + line for line in body]
    out += ["else:", "    for tile in range(pid, tl.cdiv(M, ROWS), PROGRAMS):"]
    return out + ["        " + line for line in body]


def _row_one_pass(plan: Plan) -> str:
    # EV_T / EV_V: eviction hints for the tile (read once) and the row-vector (weights, read by
    # every row) loads; "" leaves the default.
    em = _Emitter(
        plan,
        "tl.load({ptr} + roff + cols, mask=mask, other=0.0, eviction_policy=EV_T)",
        "tl.load({ptr} + cols, mask=cmask, other=0.0, eviction_policy=EV_V)",
    )
    lines = [
        "rows = tile * ROWS + tl.arange(0, ROWS)[:, None]",
        "rmask = rows < M",
        "roff = rows.to(tl.int64) * N",
        "cols = tl.arange(0, BLOCK_N)[None, :]",
        "cmask = cols < N",
        "mask = rmask & cmask",
    ]
    for node in plan.nodes:
        if node.kind == "reduce":
            src = em.name(plan.nodes[node.args[0]])
            masked = f"tl.where(mask, {src}, {_IDENTITY[node.op]})"
            expr = _reduce_expr(node.op, masked)
            if node.op == "mean":
                expr += " / N"
            lines.append(f"v{node.id} = {expr}")
        else:
            s = em.stmt(node)
            if s:
                lines.append(s)
    lines += _row_stores(plan, em, "roff + cols", "mask")
    return _kernel("_ke_row_one_pass", plan, _ROW_CONSTEXPRS, _row_tiles(lines))


def _row_stores(
    plan: Plan, em: _Emitter, tile_off: str, tile_mask: str, kinds=("tile", "rowscalar")
):
    out = []
    for j, (o, kind) in enumerate(zip(plan.outputs, plan.extra["output_kinds"], strict=True)):
        if kind not in kinds:
            continue
        val = em.name(plan.nodes[o])
        if kind == "tile":
            out.append(f"tl.store(out{j}_ptr + {tile_off}, {val}, mask={tile_mask})")
        else:
            out.append(f"tl.store(out{j}_ptr + rows, {val}, mask=rmask)")
    return out


def _moment_pairs(plan: Plan) -> dict[int, int]:
    """Centred second moments: {r2: r1} where r2 = sum or mean of (x - r1)**2 and r1 = mean(x).

    The looped kernel computes such a pair in one pass (Welford's update per lane, Chan's
    combination across lanes, as Inductor does for a variance) instead of one pass per level.
    """
    nodes = plan.nodes
    pairs = {}
    for r2 in nodes:
        if r2.kind != "reduce" or r2.op not in ("sum", "mean"):
            continue
        sq = nodes[r2.args[0]]
        if sq.kind != "pw":
            continue
        if sq.op == "mul" and len(sq.args) == 2 and sq.args[0] == sq.args[1]:
            d = nodes[sq.args[0]]
        elif sq.op == "pow" and nodes[sq.args[1]].kind == "const" and nodes[sq.args[1]].value == 2:
            d = nodes[sq.args[0]]
        else:
            continue
        if d.kind != "pw" or d.op != "sub" or len(d.args) != 2:
            continue
        x, r1 = d.args
        if nodes[r1].kind == "reduce" and nodes[r1].op == "mean" and nodes[r1].args[0] == x:
            pairs[r2.id] = r1
    return pairs


_WELFORD_COMBINE = """@triton.jit
def _ke_welford_combine(mean_a, m2_a, w_a, mean_b, m2_b, w_b):
    w = w_a + w_b
    frac = tl.where(w == 0.0, 0.0, w_b / tl.maximum(w, 1.0))
    delta = mean_b - mean_a
    return mean_a + delta * frac, m2_a + m2_b + delta * delta * w_a * frac, w


"""


def _row_looped(plan: Plan) -> str:
    # Tile loads of the passes that read the row again later keep it (EV_V); the last pass
    # reads it for good (EV_T).
    em = _Emitter(
        plan,
        "tl.load({ptr} + roff + cols, mask=mask, other=0.0, eviction_policy=EV_K)",
        "tl.load({ptr} + cols, mask=cmask, other=0.0, eviction_policy=EV_V)",
    )
    nodes = plan.nodes
    # Reduction level: 1 + the deepest reduction its input depends on.
    level: dict[int, int] = {}
    pairs = _moment_pairs(plan)
    for node in nodes:
        if node.kind == "reduce":
            if node.id in pairs:  # computed beside its mean
                level[node.id] = level[pairs[node.id]]
                continue
            below = [level[d] for d in em.deps([node.args[0]], set()) if d in level]
            level[node.id] = 1 + max(below, default=0)
    done: set[int] = set()  # emitted in the row scope (reductions, row scalars)
    lines = [
        "rows = tile * ROWS + tl.arange(0, ROWS)[:, None]",
        "rmask = rows < M",
        "roff = rows.to(tl.int64) * N",
    ]

    def emit_pass(targets: list[int], body_tail, last: bool = False) -> None:
        need = em.deps(targets, done)
        outer = [i for i in need if nodes[i].cat == "rowscalar" and nodes[i].kind == "pw"]
        for i in outer:
            lines.append(em.stmt(nodes[i]))
            done.add(i)
        inner = [i for i in need if i not in done and nodes[i].cat == "tile"]
        lines.append("for start in range(0, N, BLOCK_N):")
        loop = [
            "cols = start + tl.arange(0, BLOCK_N)[None, :]",
            "cmask = cols < N",
            "mask = rmask & cmask",
        ]
        for i in inner:
            s = em.stmt(nodes[i])
            if s:
                loop.append(s)
        loop += body_tail
        ev = "EV_T" if last else "EV_V"
        lines.extend(
            "    " + s.replace("eviction_policy=EV_K", f"eviction_policy={ev}") for s in loop
        )

    welford = {r1: r2 for r2, r1 in pairs.items()}
    for lvl in sorted(set(level.values())):
        reds = [i for i, v in level.items() if v == lvl]
        for r in reds:
            lines.append(f"acc{r} = tl.full([ROWS, BLOCK_N], {_IDENTITY[nodes[r].op]}, tl.float32)")
            if r in welford:
                lines.append(f"w{r} = tl.zeros([ROWS, BLOCK_N], tl.float32)")
        tail = []
        for r in reds:
            if r in pairs:
                continue
            src = em.name(nodes[nodes[r].args[0]])
            if r in welford:  # Welford's update of the lane's mean (acc) and M2
                m2 = f"acc{welford[r]}"
                tail += [
                    f"wn = w{r} + tl.where(mask, 1.0, 0.0)",
                    f"delta = {src} - acc{r}",
                    f"acc{r} = tl.where(mask, acc{r} + delta / tl.maximum(wn, 1.0), acc{r})",
                    f"{m2} = tl.where(mask, {m2} + delta * ({src} - acc{r}), {m2})",
                    f"w{r} = wn",
                ]
                continue
            masked = f"tl.where(mask, {src}, {_IDENTITY[nodes[r].op]})"
            if nodes[r].op in ("sum", "mean"):
                tail.append(f"acc{r} = acc{r} + {masked}")
            else:
                fn = "tl.maximum" if nodes[r].op == "max" else "tl.minimum"
                tail.append(f"acc{r} = {fn}(acc{r}, {masked})")
        emit_pass([nodes[r].args[0] for r in reds if r not in pairs], tail)
        for r in reds:
            if r in pairs:
                continue
            if r in welford:
                r2 = welford[r]
                lines.append(
                    f"v{r}, v{r2}, _ = tl.reduce((acc{r}, acc{r2}, w{r}), 1, "
                    "_ke_welford_combine, keep_dims=True)"
                )
                if nodes[r2].op == "mean":
                    lines.append(f"v{r2} = v{r2} / N")
                done.update((r, r2))
                continue
            expr = _reduce_expr(nodes[r].op, f"acc{r}")
            if nodes[r].op == "mean":
                expr += " / N"
            lines.append(f"v{r} = {expr}")
            done.add(r)
    tile_outs = [
        o for o, k in zip(plan.outputs, plan.extra["output_kinds"], strict=True) if k == "tile"
    ]
    if tile_outs:
        emit_pass(tile_outs, [], last=True)
        lines.extend("    " + s for s in _row_stores(plan, em, "roff + cols", "mask", ("tile",)))
    scal = [o for o, k in zip(plan.outputs, plan.extra["output_kinds"], strict=True) if k != "tile"]
    for i in em.deps(scal, done):
        if nodes[i].kind == "pw":
            lines.append(em.stmt(nodes[i]))
            done.add(i)
    lines += _row_stores(plan, em, "", "", ("rowscalar",))
    helper = _WELFORD_COMBINE if pairs else ""
    return helper + _kernel("_ke_row_looped", plan, _ROW_CONSTEXPRS, _row_tiles(lines))


def _kernel(name: str, plan: Plan, constexprs: list[str], body: list[str], extra_args=()) -> str:
    ins = [f"in{i}_ptr" for i in range(len(plan.inputs()) - _n_acc(plan))]
    outs = [f"out{j}_ptr" for j in range(len(plan.outputs))]
    sig = ", ".join(
        ins + outs + list(extra_args or ["M", "N"]) + [f"{c}: tl.constexpr" for c in constexprs]
    )
    text = f"@triton.jit\ndef {name}({sig}):\n"
    return text + "".join(f"    {line}\n" for line in body)


def _n_acc(plan: Plan) -> int:
    return sum(1 for n in plan.inputs() if n.attrs["ref"] == "acc")


# ------------------------------------------------------------------------- elementwise kernel


def _elementwise_kernel(plan: Plan) -> str:
    em = _Emitter(plan, "tl.load({ptr} + offs, mask=mask, other=0.0)", "")
    body = [
        "pid = tl.program_id(0)",
        "for t in tl.static_range(TILES):",
    ]
    inner = [
        "offs = (pid * TILES + t).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)",
        "mask = offs < n_elements",
    ]
    for node in plan.nodes:
        s = em.stmt(node)
        if s:
            inner.append(s)
    for j, o in enumerate(plan.outputs):
        inner.append(f"tl.store(out{j}_ptr + offs, {em.name(plan.nodes[o])}, mask=mask)")
    body += ["    " + s for s in inner]
    return _kernel("_ke_elementwise", plan, ["BLOCK", "TILES"], body, ["n_elements"])


# ------------------------------------------------------------------------------ matmul kernel


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


# ----------------------------------------------------------------------- cross-entropy kernels

_CE_KERNELS = """@triton.jit
def _ke_ce_rows(x_ptr, t_ptr, loss_ptr, valid_ptr, M, V, IGNORE: tl.constexpr,
                BLOCK_V: tl.constexpr, ONLINE: tl.constexpr):
    row = tl.program_id(0)
    base = x_ptr + row.to(tl.int64) * V
    offs = tl.arange(0, BLOCK_V)
    if ONLINE:
        m = -float("inf")
        s = 0.0
        for start in range(0, V, BLOCK_V):
            cols = start + offs
            x = tl.load(base + cols, mask=cols < V, other=-float("inf")).to(tl.float32)
            m_new = tl.maximum(m, tl.max(x, axis=0))
            s = s * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
            m = m_new
    else:
        acc = tl.full([BLOCK_V], -float("inf"), tl.float32)
        for start in range(0, V, BLOCK_V):
            cols = start + offs
            x = tl.load(base + cols, mask=cols < V, other=-float("inf")).to(tl.float32)
            acc = tl.maximum(acc, x)
        m = tl.max(acc, axis=0)
        sacc = tl.zeros([BLOCK_V], tl.float32)
        for start in range(0, V, BLOCK_V):
            cols = start + offs
            x = tl.load(base + cols, mask=cols < V, other=-float("inf")).to(tl.float32)
            sacc += tl.exp(x - m)
        s = tl.sum(sacc, axis=0)
    tgt = tl.load(t_ptr + row)
    valid = tgt != IGNORE
    safe = tl.where(valid, tgt, 0)
    xt = tl.load(base + safe).to(tl.float32)
    loss = tl.where(valid, m + tl.log(s) - xt, 0.0)
    tl.store(loss_ptr + row, loss)
    tl.store(valid_ptr + row, valid.to(tl.float32))


@triton.jit
def _ke_ce_reduce(loss_ptr, valid_ptr, out_ptr, M, MEAN: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    total = tl.zeros([BLOCK], tl.float32)
    count = tl.zeros([BLOCK], tl.float32)
    for start in range(0, M, BLOCK):
        idx = start + offs
        total += tl.load(loss_ptr + idx, mask=idx < M, other=0.0)
        count += tl.load(valid_ptr + idx, mask=idx < M, other=0.0)
    result = tl.sum(total, axis=0)
    if MEAN:
        result = result / tl.sum(count, axis=0)
    tl.store(out_ptr, result)
"""


# ------------------------------------------------------------------------------ whole sources


HEADER_IMPORTS = (
    "import math",
    "",
    "import torch",
    "import torch.nn as nn",
    "import triton",
    "import triton.language as tl",
)


def _header(plan: Plan, params: dict) -> str:
    # The problem's own imports and constants follow, minus imports the header already has.
    lines = [line for line in plan.preamble.splitlines() if line not in HEADER_IMPORTS]
    imports = [line for line in lines if line.startswith(("import ", "from "))]
    constants = [line for line in lines if line not in imports]
    blocks = ["\n".join(HEADER_IMPORTS), "\n".join(imports), "\n".join(constants)]
    return (
        f'"""KernelEvolve template candidate ({plan.family}).\n\n'
        f"Operator (traced): {plan.summary}\n"
        f"Parameters: {json.dumps(params, sort_keys=True)}\n"
        '"""\n\n' + "\n\n".join(block for block in blocks if block) + "\n\n\n"
    )


def _pow2(n: int) -> str:
    return f"triton.next_power_of_2({n})"


def _refs(plan: Plan, role: str | None = None) -> list[str]:
    return [n.attrs["ref"] for n in plan.inputs(role) if n.attrs["ref"] != "acc"]


def _dtype_line(refs: list[str]) -> str:
    items = ", ".join(f"{r}.dtype" for r in refs)
    return (
        f"        odt = [{items}][0]\n"
        f"        for dt in [{items}]:\n"
        "            odt = torch.promote_types(odt, dt)\n"
    )


def _source_elementwise(plan: Plan, p: dict) -> str:
    refs = _refs(plan)
    warps = max(1, min(32, p["block"] // (32 * p["vec"])))
    loads = "".join(f"        in{i} = {r}.contiguous()\n" for i, r in enumerate(refs))
    outs = "".join(
        f"        out{j} = torch.empty({refs[0]}.shape, dtype=odt, device={refs[0]}.device)\n"
        for j in range(len(plan.outputs))
    )
    args = ", ".join(
        [f"in{i}" for i in range(len(refs))] + [f"out{j}" for j in range(len(plan.outputs))]
    )
    ret = ", ".join(f"out{j}" for j in range(len(plan.outputs)))
    return (
        _header(plan, p)
        + _elementwise_kernel(plan)
        + "\n\nclass ModelNew(nn.Module):\n"
        + plan.init_source
        + f"\n    def forward(self, {', '.join(plan.forward_args)}):\n"
        + _dtype_line(refs)
        + loads
        + outs
        + f"        n = out0.numel()\n        if n == 0:\n            return {ret}\n"
        + f"        grid = (triton.cdiv(n, {p['block']} * {p['tiles']}),)\n"
        + f"        _ke_elementwise[grid]({args}, n, BLOCK={p['block']}, TILES={p['tiles']}, "
        f"num_warps={warps})\n" + f"        return {ret}\n"
    )


def _table_literal(table: dict | None) -> str:
    """A per-shape launch table as a Python literal (integers only: it is written into code)."""
    rows = {str(k): [int(x) for x in v] for k, v in (table or {}).items()}
    return json.dumps(rows, sort_keys=True)


def _source_row(plan: Plan, p: dict) -> str:
    tiles = [r for r in _refs(plan, "tile")]
    refs = _refs(plan)
    ref0 = tiles[0]
    loads = "".join(f"        in{i} = {r}.contiguous()\n" for i, r in enumerate(refs))
    outs = ""
    for j, (kind, keep) in enumerate(
        zip(plan.extra["output_kinds"], plan.extra["output_shapes_keep_last"], strict=True)
    ):
        shape = (
            f"{ref0}.shape"
            if kind == "tile"
            else (f"({ref0}.shape[:-1] + (1,))" if keep else f"{ref0}.shape[:-1]")
        )
        outs += f"        out{j} = torch.empty({shape}, dtype=odt, device={ref0}.device)\n"
    ret = ", ".join(f"out{j}" for j in range(len(plan.outputs)))
    args = ", ".join(
        [f"in{i}" for i in range(len(refs))] + [f"out{j}" for j in range(len(plan.outputs))]
    )
    return (
        _header(plan, p)
        + _row_one_pass(plan)
        + "\n\n"
        + _row_looped(plan)
        + f"""

_PARAMS = {json.dumps({k: v for k, v in p.items() if k != "table"}, sort_keys=True)}
# Launch configurations tuned per shape ("M,N,dtype" -> [one_pass, ROWS, BLOCK_N, warps,
# stages, programs (0: one per tile; else a persistent launch), eviction hints (0/1)]); any
# other shape takes the policy in _PARAMS.
_TABLE = {_table_literal(p.get("table"))}
_CONFIGS = {{}}


def _ke_config(M, N, dtype):
    \"\"\"(one_pass, ROWS, BLOCK_N, warps, stages, programs, hints) for M rows of N (cached).\"\"\"
    key = (M, N, dtype)
    hit = _CONFIGS.get(key)
    if hit is None:
        tuned = _TABLE.get(f"{{M}},{{N}},{{str(dtype).removeprefix('torch.')}}")
        hit = _CONFIGS[key] = (tuple(tuned) + (0, 0))[:7] if tuned else _ke_policy(M, N)
    return hit


def _ke_policy(M, N):
    p = _PARAMS
    full = {_pow2("N")}
    one_pass = p["strategy"] == "one_pass" or (
        p["strategy"] == "auto" and full <= p["max_one_pass"]
    )
    if one_pass:
        block_n = full
        rows = max(1, min(p["max_rows"], p["tile"] // block_n, {_pow2("M")}))
    else:
        block_n = min(p["block_n"], full)
        rows = 1
    warps = max(1, min(16, {_pow2("max(1, rows * block_n // (32 * p['vec']))")}))
    return one_pass, rows, block_n, warps, p["stages"], 0, 0


class ModelNew(nn.Module):
{plan.init_source}
    def forward(self, {", ".join(plan.forward_args)}):
{_dtype_line(refs)}{loads}{outs}        N = {ref0}.shape[-1]
        M = {ref0}.numel() // N if N else 0
        if M == 0 or N == 0:
            return {ret}
        one_pass, rows, block_n, warps, stages, programs, hints = _ke_config(M, N, {ref0}.dtype)
        tiles = triton.cdiv(M, rows)
        grid = (min(tiles, programs) if programs else tiles,)
        ev_t, ev_v = ("evict_first", "evict_last") if hints else ("", "")
        if one_pass:
            _ke_row_one_pass[grid]({args}, M, N, ROWS=rows, BLOCK_N=block_n, PROGRAMS=programs,
                                   EV_T=ev_t, EV_V=ev_v, num_warps=warps, num_stages=stages)
        else:
            _ke_row_looped[grid]({args}, M, N, ROWS=rows, BLOCK_N=block_n, PROGRAMS=programs,
                                 EV_T=ev_t, EV_V=ev_v, num_warps=warps, num_stages=stages)
        return {ret}
"""
    )


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
        a2 = {a}.reshape(-1, {a}.shape[-1])
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


def _source_cross_entropy(plan: Plan, p: dict) -> str:
    x, t = plan.extra["logits"], plan.extra["target"]
    red = plan.extra["reduction"]
    if red == "none":
        finish = "        return loss.to(x2.dtype)\n"
    else:
        finish = (
            "        out = torch.empty((), dtype=x2.dtype, device=x2.device)\n"
            f"        _ke_ce_reduce[(1,)](loss, valid, out, M, MEAN={red == 'mean'}, BLOCK=1024,"
            " num_warps=4)\n"
            "        return out\n"
        )
    warps = max(1, min(16, p["block_v"] // (32 * p["vec"])))
    return (
        _header(plan, p)
        + _CE_KERNELS
        + f"""

_PARAMS = {json.dumps(p, sort_keys=True)}


class ModelNew(nn.Module):
{plan.init_source}
    def forward(self, {", ".join(plan.forward_args)}):
        p = _PARAMS
        x2 = {x}.contiguous()
        t2 = {t}.contiguous()
        M, V = x2.shape
        loss = torch.empty((M,), dtype=torch.float32, device=x2.device)
        valid = torch.empty((M,), dtype=torch.float32, device=x2.device)
        if M > 0:
            block_v = min(p["block_v"], triton.next_power_of_2(max(V, 1)))
            _ke_ce_rows[(M,)](x2, t2, loss, valid, M, V, IGNORE={plan.extra["ignore_index"]},
                              BLOCK_V=block_v, ONLINE=p["strategy"] == "online",
                              num_warps={warps})
{finish}"""
    )


_WRITERS = {
    "elementwise": _source_elementwise,
    "row": _source_row,
    "matmul": _source_matmul,
    "cross_entropy": _source_cross_entropy,
}


def render(plan: Plan, params: dict) -> str:
    """The complete candidate source for ``plan`` with ``params`` (defaults filled in)."""
    full = {**DEFAULTS[plan.family], **params}
    return _WRITERS[plan.family](plan, full)


# ------------------------------------------------------------------------------- the generator


def _np2(n: int) -> int:
    return 1 << max(0, (int(n) - 1).bit_length())


def row_policy(p: dict, m: int, n: int) -> list[int]:
    """The row candidate's ``_ke_policy`` in Python (tests hold the two to the same answer)."""
    full = _np2(n)
    one_pass = p["strategy"] == "one_pass" or (
        p["strategy"] == "auto" and full <= p["max_one_pass"]
    )
    if one_pass:
        block_n = full
        rows = max(1, min(p["max_rows"], p["tile"] // block_n, _np2(m)))
    else:
        block_n = min(p["block_n"], full)
        rows = 1
    warps = max(1, min(16, _np2(max(1, rows * block_n // (32 * p["vec"])))))
    return [int(one_pass), rows, block_n, warps, p["stages"], 0, 0]


def row_launch_ok(cfg: list[int], m: int, n: int) -> bool:
    """Whether a row launch configuration fits the registers and the row (as the tuner's space
    in :mod:`workers.search.tune` does)."""
    one_pass, rows, block, warps, stages = cfg[:5]
    if warps not in (1, 2, 4, 8, 16, 32) or not 1 <= stages <= 4 or rows < 1:
        return False
    full = _np2(n)
    if one_pass:
        per_thread = rows * full // (32 * warps)
        return (
            block == full
            and rows <= max(1, _np2(m))
            and rows * full <= 65536
            and (1 <= per_thread <= 64)
        )
    return 256 <= block < full and rows == 1 and 1 <= block // (32 * warps) <= 32


def row_neighbour(cfg: list[int], m: int, n: int, rng: random.Random) -> list[int]:
    """One step from ``cfg`` in the launch space of M x N rows: warps, rows per program, block,
    stages, eviction hints, or one pass <-> looped; ``cfg`` itself if no step fits."""
    full = _np2(n)
    for _ in range(20):
        new = list(cfg[:5]) + [0, cfg[6] if len(cfg) > 6 else 0]
        move = rng.choice(["warps", "warps", "rows", "block", "stages", "hints", "strategy"])
        up = rng.random() < 0.5
        if move == "warps":
            new[3] = new[3] * 2 if up else new[3] // 2
        elif move == "rows":
            new[1] = new[1] * 2 if up else new[1] // 2
        elif move == "block":
            new[2] = new[2] * 2 if up else new[2] // 2
        elif move == "stages":
            new[4] += 1 if up else -1
        elif move == "hints":
            new[6] = 1 - new[6]
        elif new[0]:  # one pass -> looped
            new[:3] = [0, 1, max(256, min(2048, full // 2))]
        else:  # looped -> one pass
            new[:3] = [1, 1, full]
            new[3] = max(1, min(32, _np2(max(1, full // (32 * 16)))))
        if new != list(cfg) and row_launch_ok(new, m, n):
            return new
    return list(cfg)


def row_config(p: dict, m: int, n: int, dtype: str) -> list[int]:
    """The launch configuration a row candidate with parameters ``p`` uses for M x N rows."""
    tuned = (p.get("table") or {}).get(f"{m},{n},{dtype}")
    return (list(tuned) + [0, 0])[:7] if tuned else row_policy(p, m, n)


def _valid(family: str, p: dict) -> bool:
    if family == "matmul":
        smem = (p["block_m"] * p["block_k"] + p["block_k"] * p["block_n"]) * 2 * p["stages"]
        if smem > _SMEM_LIMIT:
            return False
        if p["block_m"] * p["block_n"] // (32 * p["warps"]) > 256:  # accumulator registers
            return False
    if family == "elementwise" and p["block"] < 32 * p["vec"]:
        return False
    return True


def _key(params: dict) -> str:
    return hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:16]


class TemplateGenerator:
    """Parametric Triton kernels for the traced operator family (see the module docstring)."""

    name = "template"

    def __init__(self) -> None:
        self._plans: dict[str, Plan | NoTemplate] = {}
        self._counts = {"proposed": 0, "no_template": 0}
        self._rows: dict[str, dict] = {}

    def plan(self, problem_source: str) -> Plan:
        key = hashlib.sha256(problem_source.encode()).hexdigest()
        if key not in self._plans:
            try:
                self._plans[key] = trace_problem_confined(problem_source)
            except NoTemplate as exc:
                self._plans[key] = exc
        found = self._plans[key]
        if isinstance(found, NoTemplate):
            raise found
        return found

    def describe(self, problem_source: str) -> dict:
        try:
            plan = self.plan(problem_source)
        except NoTemplate as exc:
            return {"fits": False, "summary": f"no template fits: {exc}"}
        return {"fits": True, "family": plan.family, "summary": plan.summary}

    def stats(self) -> dict:
        return dict(self._counts)

    def propose(self, ctx: GenerationContext, n: int) -> list[Proposal]:
        try:
            plan = self.plan(ctx.problem_source)
        except NoTemplate:
            self._counts["no_template"] += 1
            return []
        rng = random.Random(f"{ctx.seed}:{ctx.mode}:{[p.get('id') for p in ctx.parents]}")
        fam = plan.family
        parents = [p for p in ctx.parents if p.get("generator") == self.name and p.get("params")]
        out: list[tuple[dict, str, str]] = []
        if ctx.mode == EDGE_SEED or not parents:
            cands = [dict(DEFAULTS[fam])] + [{**DEFAULTS[fam], **s} for s in SEEDS[fam]]
            if ctx.attempt > 1:  # asked again: the fixed seeds were tried, go further out
                cands = []
            while len(cands) < n * 4:
                cands.append(self._mutate(fam, dict(DEFAULTS[fam]), rng, k=3))
            out = [(c, EDGE_SEED, "seed") for c in cands]
        elif ctx.mode == EDGE_REPAIR:
            out = [(c, EDGE_REPAIR, note) for c, note in self._repair(fam, parents[0], ctx, rng, n)]
        elif ctx.mode == EDGE_CROSSOVER and (ctx.feedback or {}).get("per_case"):
            out = self._per_case(plan, ctx, parents)
        elif ctx.mode == EDGE_CROSSOVER and len(parents) >= 2:
            for _ in range(n * 4):
                a, b = parents[0]["params"], parents[1]["params"]
                child = {
                    k: (a if rng.random() < 0.5 else b).get(k, v) for k, v in DEFAULTS[fam].items()
                }
                out.append((child, EDGE_CROSSOVER, "uniform crossover"))
        elif ctx.mode == EDGE_ALTERNATIVE:
            base = {**DEFAULTS[fam], **parents[0]["params"]}
            for key in [k for k in SPACES[fam] if k in STRUCTURAL]:
                for value in SPACES[fam][key]:
                    if value != base[key]:
                        out.append(({**base, key: value}, EDGE_ALTERNATIVE, f"{key}={value}"))
            rng.shuffle(out)
        else:
            base = {**DEFAULTS[fam], **parents[0]["params"]}
            rows = self.case_rows(plan, ctx) if fam == "row" and ctx.platform == "cuda" else {}
            # Once the table covers every case, the policy no longer decides any of them.
            keys = {f"{m},{nn},{dtype}" for m, nn, dtype in rows.values()}
            covered = bool(rows) and keys <= set(base.get("table") or {})
            for i in range(n * 6):
                if rows and (i % 2 == 0 or covered):
                    # Every case's launch moves one step at once: one evaluation measures a
                    # neighbour per case, and the per-case crossover keeps each case's winner.
                    table = dict(base.get("table") or {})
                    for m, nn, dtype in rows.values():
                        cfg = row_config(base, m, nn, dtype)
                        table[f"{m},{nn},{dtype}"] = row_neighbour(cfg, m, nn, rng)
                    out.append(({**base, "table": table}, EDGE_MUTATION, "per-case mutation"))
                    continue
                child = self._mutate(fam, base, rng, k=rng.choice([1, 1, 2]), structural=False)
                out.append((child, EDGE_MUTATION, "mutation"))
        proposals, seen = [], set()
        parent_keys = {_key({**DEFAULTS[fam], **p["params"]}) for p in parents}
        for params, edge, note in out:
            full = {**DEFAULTS[fam], **params}
            k = _key(full)
            if k in seen or (edge != EDGE_SEED and k in parent_keys) or not _valid(fam, full):
                continue
            seen.add(k)
            proposals.append(Proposal(render(plan, full), edge, full, note))
            if len(proposals) >= n:
                break
        self._counts["proposed"] += len(proposals)
        return proposals

    def case_rows(self, plan: Plan, ctx: GenerationContext) -> dict[str, list]:
        """{case: [M, N, dtype]} for the workload's cases (from the problem's own
        ``get_inputs``, behind the sandbox); {} when they cannot be known."""
        cases = [
            {"name": c.get("name"), "overrides": c.get("overrides") or {}, "dtype": c.get("dtype")}
            for c in (ctx.workload or {}).get("cases") or []
        ]
        tiles = _refs(plan, "tile")
        if not cases or not tiles or tiles[0] not in plan.forward_args:
            return {}
        key = hashlib.sha256(
            (ctx.problem_source + json.dumps(cases, sort_keys=True)).encode()
        ).hexdigest()
        if key not in self._rows:
            from workers.boundary import BoundaryUnavailable

            try:
                index = plan.forward_args.index(tiles[0])
                self._rows[key] = case_rows_confined(ctx.problem_source, index, cases)
            except BoundaryUnavailable:
                self._rows[key] = {}
        return self._rows[key]

    def _per_case(self, plan: Plan, ctx: GenerationContext, parents: list[dict]):
        """One candidate that launches, for each case, the configuration of the parent that
        was fastest on it (``ctx.feedback["per_case"]``: {case: parent id}); other shapes keep
        the best parent's policy. Row family only: its launch is a pure function of shape."""
        if plan.family != "row" or not parents:
            return []
        rows = self.case_rows(plan, ctx)
        by_id = {p.get("id"): p for p in parents}
        base = {**DEFAULTS["row"], **parents[0]["params"]}
        table = dict(base.get("table") or {})
        taken = []
        for case, pid in sorted(ctx.feedback["per_case"].items()):
            if case not in rows or pid not in by_id:
                continue
            m, n, dtype = rows[case]
            params = {**DEFAULTS["row"], **by_id[pid]["params"]}
            table[f"{m},{n},{dtype}"] = row_config(params, m, n, dtype)
            taken.append(f"{case} from {pid}")
        if not taken:
            return []
        note = "per-case crossover: " + ", ".join(taken)
        return [({**base, "table": table}, EDGE_CROSSOVER, note)]

    def _mutate(self, fam: str, base: dict, rng: random.Random, k: int, structural=True) -> dict:
        child = dict(base)
        keys = [key for key in SPACES[fam] if structural or key not in STRUCTURAL]
        for key in rng.sample(keys, min(k, len(keys))):
            values = SPACES[fam][key]
            i = values.index(child[key]) if child[key] in values else 0
            step = rng.choice([-1, 1]) * rng.choice([1, 1, 2])
            child[key] = values[max(0, min(len(values) - 1, i + step))]
        return child

    def _repair(self, fam, parent, ctx, rng, n):
        """Safer variants of a rejected parent: smaller tiles on resource errors, else defaults."""
        base = {**DEFAULTS[fam], **parent["params"]}
        text = json.dumps(ctx.feedback or {}).lower()
        out = []
        if "resource" in text or "shared memory" in text or "registers" in text:
            smaller = dict(base)
            for key in ("stages", "block_k", "block_n", "block_m", "tile", "block", "block_v"):
                if key in smaller:
                    vals = SPACES[fam][key]
                    i = vals.index(smaller[key]) if smaller[key] in vals else 0
                    smaller[key] = vals[max(0, i - 1)]
            out.append((smaller, "smaller tiles after a resource error"))
        out.append((dict(DEFAULTS[fam]), "back to the default configuration"))
        for _ in range(n * 3):
            out.append((self._mutate(fam, dict(DEFAULTS[fam]), rng, k=1), "near the default"))
        return out
