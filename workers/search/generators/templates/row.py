"""The ``row`` family: reductions and normalisations over the last dimension (softmax, norms,
their fused forms). Kernels (one pass, looped with a centred second moment beside its mean),
the candidate's source with its per-shape launch table, and the launch space the search moves
in (policy, neighbours, configuration per shape)."""

from __future__ import annotations

import json
import random

from workers.search.generators.templates.common import (
    _IDENTITY,
    _KE_MUL,
    _bcast,
    _bcast_args,
    _bcast_rows,
    _bcast_wrapper,
    _dtype_line,
    _Emitter,
    _header,
    _kernel,
    _literal,
    _np2,
    _pow2,
    _reduce_expr,
    _refs,
    bcast_view,
    by_index,
    forward_def,
)
from workers.search.trace import NoTemplate, Plan

# --------------------------------------------------------------------------------- row kernels


_ROW_CONSTEXPRS = ["ROWS", "BLOCK_N", "PROGRAMS", "EV_T", "EV_V", "I32"]


def _row_constexprs(plan: Plan) -> list[str]:
    """The row kernels' constexprs, the shape's constants among them (``_size_constants``)."""
    return _ROW_CONSTEXPRS + [c for c, _ in _size_constants(plan)]


def _size_constants(plan: Plan, extra: tuple = ()) -> list[tuple[str, str]]:
    """(constexpr, the size it stands for) of a launch specialised to its shape (``NC`` > 0):
    N and M; ``extra``'s; K (the size after the reduced dimension) where rows lie along a
    middle dimension; VL (a weight's length over the whole tensor) where there is one."""
    out = [("NC", "N"), ("MC", "M"), *extra]
    out += [("KC", "K")] if _strided(plan) else []
    return out + ([("VC", "VL")] if plan.extra.get("vec_mod") else [])


def _size_prologue(plan: Plan, extra: tuple = ()) -> list[str]:
    """The kernel's first lines: each size its constant where the launch is specialised."""
    return ["if NC > 0:"] + [f"    {size} = {c}" for c, size in _size_constants(plan, extra)]


# Triton's largest tile (TRITON_MAX_TENSOR_NUMEL): a "one_pass" candidate on a longer row (a
# whole-tensor loss of 4M elements) cannot compile, and takes the policy of "auto" there.
ONE_PASS_NUMEL = 1 << 20

_KE_FLAT = """@triton.jit
def _ke_flat(x, I32: tl.constexpr):
    if I32:
        return x.to(tl.int32)
    else:
        return x


"""


def _row_tiles(plan: Plan, body: list[str]) -> list[str]:
    """The row kernels' program body over its tiles of ROWS rows: one tile per program, or
    (``PROGRAMS`` > 0, a persistent launch of that many programs) a loop over tiles.

    ``NC`` > 0: the launch is specialised to its shape (N = NC, M = MC are compile-time
    constants, as in Inductor's static-shape kernels: constant trip counts and offsets; and
    K = KC where rows lie along a middle dimension: on an H100, KernelBench 47's one pass of
    32 rows went from 0.98x to 1.00x of compile with K a constant too, docs/benchmarks.md,
    session 49)."""
    out = _size_prologue(plan) + ["pid = tl.program_id(0)", "if PROGRAMS == 0:", "    tile = pid"]
    out += ["    " + line for line in body]
    out += ["else:", f"    for tile in range(pid, {_tiles(plan)}, PROGRAMS):"]
    return out + ["        " + line for line in body]


def _row_index(plan: Plan, roff: str) -> list[str]:
    """The tile's rows (``rows``: flat row numbers, [ROWS, 1]), their mask and offsets.

    Rows along a middle dimension (``_strided``) are numbered outer-major: a tile holds ROWS
    consecutive inner indices of one outer index, so its rows are adjacent in memory and the
    index says so (an ``arange`` along the rows, not ``rows % K``): Triton then lays the
    tile's threads along the rows and the loads coalesce; through ``rows // K`` and
    ``rows % K`` it could not see that, and each thread of a warp read a column K apart."""
    if not _strided(plan):
        return ["rows = tile * ROWS + tl.arange(0, ROWS)[:, None]", "rmask = rows < M", roff]
    return [
        "per_outer = tl.cdiv(K, ROWS)",
        "outer = tile // per_outer",
        "inner = (tile % per_outer) * ROWS + tl.arange(0, ROWS)[:, None]",
        "rows = outer * K + inner",
        "rmask = (inner < K) & (rows < M)",
        "roff = _ke_flat(outer.to(tl.int64) * N * K + inner, I32)",
    ]


def _tiles(plan: Plan, cdiv: str = "tl.cdiv", rows: str = "ROWS") -> str:
    """The number of row tiles: in the kernel, or (``triton.cdiv``, ``rows``) in the wrapper."""
    return f"(M // K) * {cdiv}(K, {rows})" if _strided(plan) else f"{cdiv}(M, {rows})"


def _strided(plan: Plan) -> bool:
    """Rows along a middle dimension: row r is (outer r // K, inner r % K) and its elements are
    K apart, K the product of the dimensions after the reduced one."""
    return plan.extra.get("red_dim", -1) != -1


def _vec_load(plan: Plan, cols: str, mask: str) -> str:
    """The load of a weight vector at ``cols``; over the whole tensor (``vec_mod``), element i
    reads weight i mod VL (its length, the tensor's last dimension)."""
    at = f"{cols} % VL" if plan.extra.get("vec_mod") else cols
    return "tl.load({ptr} + " + at + f", mask={mask}, other=0.0, eviction_policy=EV_V)"


def _viewed(out: str, dims: list[int] | None, ref0: str) -> str:
    """``out`` viewed with the rows' dimensions ``dims`` (the lowering's ``output_views``:
    dimensions of size 1 a later reduction dropped), else as it is."""
    if dims is None:
        return out
    return f"{out}.view(({''.join(f'{ref0}.shape[{k}], ' for k in dims)}))"


def _gathered(plan: Plan) -> tuple[list[int], list[int]] | None:
    """(kept, reduced) dimensions (non-negative) where the reductions run over dimensions apart
    (``red_dims``); None otherwise."""
    red = plan.extra.get("red_dims")
    if not red:
        return None
    rank = int(plan.extra["rank"])
    reduced = [d % rank for d in red]
    return [d for d in range(rank) if d not in reduced], reduced


def _geometry(plan: Plan) -> tuple[str, str, list[str]]:
    """(row offset statement, column offset, the kernel's size arguments)."""
    gathered = _gathered(plan)
    if gathered:
        # A row is one coordinate of the kept dimensions, its elements every coordinate of the
        # reduced ones: each offset is the sum of coordinate x stride (GL/RP/RT per kept
        # dimension: size, rows below it, memory stride; CL/CP/CT per reduced one).
        kept, reduced = gathered
        rows = (
            " + ".join(f"(rows.to(tl.int64) // RP{j} % GL{j}) * RT{j}" for j in range(len(kept)))
            or "rows.to(tl.int64) * 0"
        )
        cols = " + ".join(f"(cols // CP{i} % CL{i}) * CT{i}" for i in range(len(reduced)))
        names = [f"{x}{j}" for j in range(len(kept)) for x in ("GL", "RP", "RT")]
        names += [f"{x}{i}" for i in range(len(reduced)) for x in ("CL", "CP", "CT")]
        return (
            f"roff = {rows}",
            f"({cols})",
            ["M", "N", *names, *_bcast_args(plan)],
        )
    if _strided(plan):
        return (
            "roff = (rows // K).to(tl.int64) * N * K + rows % K",
            "cols * K",
            ["M", "N", "K", *_bcast_args(plan)],
        )
    vl = ["VL"] if plan.extra.get("vec_mod") else []
    r = ["R"] if plan.extra.get("mrow") else []  # the rows' second-last size (a tril/triu's)
    return "roff = rows.to(tl.int64) * N", "cols", ["M", "N", *vl, *r, *_bcast_args(plan)]


# An element's coordinates in the row kernels (rows [ROWS, 1], cols [1, BLOCK_N]).
_POSITIONS = {"col": "cols", "mrow": "rows % R"}


def _bcast_load(plan: Plan, cols: str = "cols", mask: str = "mask") -> str:
    """The load of a broadcast input (``{k}``: its index) at ``cols``."""
    kept = _bcast(plan)
    if not kept:
        return ""
    if by_index(plan):
        # Rows are groups of contiguous elements: an element's coordinate along dimension d of
        # the rows' shape is (flat index // Q{d}) % L{d}; every broadcast input has a stride in
        # each such dimension (0 where it does not vary).
        dims = sorted({d for ds in kept.values() for d in ds})
        offset = _geometry(plan)[1].replace("cols", cols) if _gathered(plan) else cols
        # I32: the wrapper says the flat index fits 32 bits, and the division runs in them (a
        # 64-bit division per element cost GroupNorm half its speed against compile).
        flat = "_ke_flat(roff + " + offset + ", I32)"
        terms = " + ".join(f"({flat} // Q{d} % L{d}) * s{{k}}_{d}" for d in dims)
        return "tl.load({ptr} + " + terms + ", mask=" + mask + ", other=0.0)"
    return "tl.load({ptr} + rb{k} + " + cols + " * cs{k}, mask=" + mask + ", other=0.0)"


# An input with one value per row: read once per row, at its row's offset (see _bcast_rows).
_ROW_LOAD = "tl.load({ptr} + rb{k}, mask=rmask, other=0)"


def _row_scope(node) -> bool:
    """Whether the kernels that loop over a row's blocks compute ``node`` once per row, outside
    the loop: a pointwise op on values per row, or an input with one value per row."""
    return node.cat == "rowscalar" and node.kind in ("pw", "input")


def _row_one_pass(plan: Plan) -> str:
    # EV_T / EV_V: eviction hints for the tile (read once) and the row-vector (weights, read by
    # every row) loads; "" leaves the default.
    roff, coff, sizes = _geometry(plan)
    em = _Emitter(
        plan,
        "tl.load({ptr} + roff + " + coff + ", mask=mask, other=0.0, eviction_policy=EV_T)",
        _vec_load(plan, "cols", "cmask"),
        _bcast_load(plan),
        load_row=_ROW_LOAD,
        positions=_POSITIONS,
    )
    lines = [
        *_row_index(plan, roff),
        *_bcast_rows(plan, "rows.to(tl.int64)"),
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
    lines += _row_stores(plan, em, f"roff + {coff}", "mask")
    return _kernel("_ke_row_one_pass", plan, _row_constexprs(plan), _row_tiles(plan, lines), sizes)


class _ChunkEmitter(_Emitter):
    """The second chunk of a split row: values that vary along the row get a ``b`` suffix;
    row scalars and constants are shared with the first chunk."""

    def name(self, node):
        base = super().name(node)
        return base + "b" if node.kind != "const" and node.cat == "tile" else base

    def stmt(self, node):
        s = super().stmt(node)
        if s is None or node.cat != "tile":
            return s
        lhs, rhs = s.split(" = ", 1)
        return f"{lhs}b = {rhs}"


def _row_split(plan: Plan) -> str:
    """One pass over a row held as two chunks in registers: BLOCK_N (the largest power of two
    not above N) and BLOCK_B (the rest, rounded up to a power of two), so a row of 5120 is
    4096 + 1024 lanes instead of 8192 with 37.5% of them masked."""
    roff, coff, sizes = _geometry(plan)
    loads = [
        "tl.load({ptr} + roff + " + coff + ", mask=mask, other=0.0, eviction_policy=EV_T)",
        _vec_load(plan, "cols", "cmask"),
        _bcast_load(plan),
    ]
    em = _Emitter(plan, *loads, load_row=_ROW_LOAD, positions=_POSITIONS)
    eb = _ChunkEmitter(
        plan,
        "tl.load({ptr} + roff + "
        + coff.replace("cols", "colsb")
        + ", mask=maskb, other=0.0, eviction_policy=EV_T)",
        _vec_load(plan, "colsb", "cmaskb"),
        _bcast_load(plan, "colsb", "maskb"),
        positions={**_POSITIONS, "col": "colsb"},
    )
    lines = [
        *_row_index(plan, roff),
        *_bcast_rows(plan, "rows.to(tl.int64)"),
        "cols = tl.arange(0, BLOCK_N)[None, :]",
        "cmask = cols < N",
        "mask = rmask & cmask",
        "colsb = BLOCK_N + tl.arange(0, BLOCK_B)[None, :]",
        "cmaskb = colsb < N",
        "maskb = rmask & cmaskb",
    ]
    for node in plan.nodes:
        if node.kind == "reduce":
            src = plan.nodes[node.args[0]]
            a = _reduce_expr(node.op, f"tl.where(mask, {em.name(src)}, {_IDENTITY[node.op]})")
            b = _reduce_expr(node.op, f"tl.where(maskb, {eb.name(src)}, {_IDENTITY[node.op]})")
            if node.op in ("sum", "mean"):
                expr = f"({a} + {b})" + (" / N" if node.op == "mean" else "")
            elif node.op == "prod":
                expr = f"({a} * {b})"
            elif node.op in ("argmax", "argmin"):  # the second chunk's index if strictly better
                red, cmp = ("tl.max", ">") if node.op == "argmax" else ("tl.min", "<")
                ident = _IDENTITY[node.op]
                va = f"{red}(tl.where(mask, {em.name(src)}, {ident}), axis=1)[:, None]"
                vb = f"{red}(tl.where(maskb, {eb.name(src)}, {ident}), axis=1)[:, None]"
                expr = f"tl.where({vb} {cmp} {va}, {b} + BLOCK_N, {a})"
            else:
                expr = f"tl.{'maximum' if node.op == 'max' else 'minimum'}({a}, {b})"
            lines.append(f"v{node.id} = {expr}")
            continue
        for e in (em, eb) if node.cat == "tile" else (em,):
            s = e.stmt(node)
            if s:
                lines.append(s)
    lines += _row_stores(plan, em, f"roff + {coff}", "mask")
    lines += _row_stores(plan, eb, f"roff + {coff.replace('cols', 'colsb')}", "maskb", ("tile",))
    body = _row_tiles(plan, lines)
    return _kernel("_ke_row_split", plan, _row_constexprs(plan) + ["BLOCK_B"], body, sizes)


def _row_stores(
    plan: Plan, em: _Emitter, tile_off: str, tile_mask: str, kinds=("tile", "rowscalar")
):
    out = []
    for j, (o, kind) in enumerate(zip(plan.outputs, plan.extra["output_kinds"], strict=True)):
        if kind not in kinds and not (kind == "total" and "rowscalar" in kinds):
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


@triton.jit
def _ke_welford_all(mean, m2, w, TREE: tl.constexpr):
    # Chan's rule over every lane of axis 1. On a GPU (TREE) one tree of pairwise combines, as
    # Inductor's: KernelBench 40's segmented LayerNorm measured 18.5 us this way on an H100
    # (session 43) and 20.5 us with the three dependent sums below (session 52, another H100,
    # the generated source otherwise the same; not yet compared in one process). The Triton
    # interpreter runs a combine function once per element in Python (a variance over
    # 16,384-element rows in segments took 235 s a call there), so it takes the sums: the
    # total count, the weighted mean, and each lane's M2 plus its count times its squared
    # distance from that mean.
    if TREE:
        mu, s2, wt = tl.reduce((mean, m2, w), 1, _ke_welford_combine, keep_dims=True)
    else:
        wt = tl.sum(w, 1, keep_dims=True)
        mu = tl.sum(w * mean, 1, keep_dims=True) / tl.maximum(wt, 1.0)
        dev = mean - mu
        s2 = tl.sum(m2 + w * dev * dev, 1, keep_dims=True)
    return mu, s2, wt


"""


def _passes_emitter(plan: Plan, coff: str) -> _Emitter:
    """The emitter of kernels that read the row in several passes: a tile load's eviction
    hint (``EV_K``) is the pass's to choose."""
    return _Emitter(
        plan,
        "tl.load({ptr} + roff + " + coff + ", mask=mask, other=0.0, eviction_policy=EV_K)",
        _vec_load(plan, "cols", "cmask"),
        _bcast_load(plan),
        load_row=_ROW_LOAD,
        positions=_POSITIONS,
    )


def _levels(plan: Plan, em: _Emitter, pairs: dict[int, int]) -> dict[int, int]:
    """Reduction level: 1 + the deepest reduction its input depends on (a centred second
    moment shares its mean's level: Welford's update computes the two together)."""
    level: dict[int, int] = {}
    for node in plan.nodes:
        if node.kind == "reduce":
            if node.id in pairs:
                level[node.id] = level[pairs[node.id]]
                continue
            below = [level[d] for d in em.deps([node.args[0]], set()) if d in level]
            level[node.id] = 1 + max(below, default=0)
    return level


def _acc_init(nodes, reds: list[int], welford: dict[int, int]) -> list[str]:
    """Per-lane accumulators of the reductions ``reds`` (an index beside an argmax's value, a
    count beside a Welford mean)."""
    out = []
    for r in reds:
        out.append(f"acc{r} = tl.full([ROWS, BLOCK_N], {_IDENTITY[nodes[r].op]}, tl.float32)")
        if nodes[r].op in ("argmax", "argmin"):  # each lane's first index of its extreme
            out.append(f"idx{r} = tl.zeros([ROWS, BLOCK_N], tl.int32)")
        if r in welford:
            out.append(f"w{r} = tl.zeros([ROWS, BLOCK_N], tl.float32)")
    return out


def _acc_update(em: _Emitter, reds: list[int], pairs: dict[int, int]) -> list[str]:
    """One block's update of the accumulators of ``reds``: Welford's update of a mean and the
    centred second moment beside it (``pairs``), else the reduction's own combine."""
    nodes = em.plan.nodes
    welford = {r1: r2 for r2, r1 in pairs.items()}
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
        op = nodes[r].op
        if op in ("sum", "mean"):
            tail.append(f"acc{r} = acc{r} + {masked}")
        elif op in ("argmax", "argmin"):  # strictly better: earlier blocks win ties
            cmp = ">" if op == "argmax" else "<"
            tail += [
                f"take{r} = {masked} {cmp} acc{r}",
                f"acc{r} = tl.where(take{r}, {masked}, acc{r})",
                f"idx{r} = tl.where(take{r}, cols, idx{r})",
            ]
        elif op == "prod":
            tail.append(f"acc{r} = acc{r} * {masked}")
        else:
            fn = "tl.maximum" if op == "max" else "tl.minimum"
            tail.append(f"acc{r} = {fn}(acc{r}, {masked})")
    return tail


def _row_looped(plan: Plan) -> str:
    # Tile loads of the passes that read the row again later keep it (EV_V); the last pass
    # reads it for good (EV_T).
    roff, coff, sizes = _geometry(plan)
    em = _passes_emitter(plan, coff)
    nodes = plan.nodes
    pairs = _moment_pairs(plan)
    level = _levels(plan, em, pairs)
    done: set[int] = set()  # emitted in the row scope (reductions, row scalars)
    lines = [
        *_row_index(plan, roff),
        *_bcast_rows(plan, "rows.to(tl.int64)"),
    ]

    def emit_pass(targets: list[int], body_tail, last: bool = False) -> None:
        need = em.deps(targets, done)
        outer = [i for i in need if _row_scope(nodes[i])]
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
        lines += _acc_init(nodes, reds, welford)
        tail = _acc_update(em, reds, pairs)
        emit_pass([nodes[r].args[0] for r in reds if r not in pairs], tail)
        for r in reds:
            if r in pairs:
                continue
            if r in welford:
                r2 = welford[r]
                lines.append(f"v{r}, v{r2}, _ = _ke_welford_all(acc{r}, acc{r2}, w{r}, TREE)")
                if nodes[r2].op == "mean":
                    lines.append(f"v{r2} = v{r2} / N")
                done.update((r, r2))
                continue
            if nodes[r].op in ("argmax", "argmin"):  # the first lane index at the row's extreme
                red = "tl.max" if nodes[r].op == "argmax" else "tl.min"
                lines += [
                    f"best{r} = {red}(acc{r}, axis=1)[:, None]",
                    f"v{r} = tl.min(tl.where(acc{r} == best{r}, idx{r}, 2147483647), axis=1)"
                    "[:, None]",
                ]
                done.add(r)
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
        stores = _row_stores(plan, em, f"roff + {coff}", "mask", ("tile",))
        lines.extend("    " + s for s in stores)
    scal = [o for o, k in zip(plan.outputs, plan.extra["output_kinds"], strict=True) if k != "tile"]
    for i in em.deps(scal, done):
        if nodes[i].kind == "pw" or _row_scope(nodes[i]):
            lines.append(em.stmt(nodes[i]))
            done.add(i)
    lines += _row_stores(plan, em, "", "", ("rowscalar",))
    helper = _WELFORD_COMBINE if pairs else ""
    return helper + _kernel(
        "_ke_row_looped", plan, _row_constexprs(plan) + ["TREE"], _row_tiles(plan, lines), sizes
    )


def _segmentable(plan: Plan) -> bool:
    """Whether a row can be cut into segments whose partial results combine (every reduction
    but argmax / argmin, whose partial would need an index beside its value)."""
    return all(n.op not in ("argmax", "argmin") for n in plan.reductions())


def _segment_slots(plan: Plan) -> tuple[dict[int, int], int, int]:
    """({reduction: its first slot in the partials buffer}, slots, levels) of the segmented
    kernel: one slot per reduction, three (mean, M2, count) per Welford pair, none for the
    pair's second moment."""
    em = _Emitter(plan, "", "", "")
    pairs = _moment_pairs(plan)
    level = _levels(plan, em, pairs)
    slots, n = {}, 0
    for r in sorted(level):
        if r in pairs:
            continue
        slots[r] = n
        n += 3 if r in pairs.values() else 1
    return slots, n, max(level.values(), default=0)


# The segmented kernel's own sizes compiled in with the shape's: segments a row, their length.
_SEGMENT_SIZES = (("SC", "S"), ("SEGC", "SEG"))


def _row_segmented(plan: Plan) -> str:
    """Few long rows (a loss over the whole tensor, a norm over 2^18 elements per row): each
    row is cut into S segments of SEG columns, one program per (row, segment).

    Launch ``LEVEL`` = k (1 .. levels) reduces its segment for the reductions of level k and
    stores one partial per (reduction, row, segment) in ``part`` (fp32, [slots, M, S]); every
    later launch combines a row's S partials itself, in a fixed order (deterministic: no
    atomics), before it goes on. The last launch (``LEVEL`` = levels + 1) writes the outputs:
    its segment of the tile outputs, and the row's scalars from segment 0. A mean and the
    centred second moment beside it travel as Welford partials (mean, M2, count), combined by
    Chan's rule: a layer norm reads its rows twice, as the looped kernel does.

    A graph with no value per element (a loss, a norm's scalar) has no output launch: in the
    launch of its last level each program adds one to its row's counter after storing its
    partials, and the program that arrives last combines the row's partials, in the same
    fixed order, writes the row's outputs and sets the counter back to zero for the next
    call. One launch less (on the H200, MSE over 4M elements: one 7.1 us kernel with a warm L2,
    against compile's two of 8.0 and 1.1 us)."""
    roff, coff, sizes = _geometry(plan)
    em = _passes_emitter(plan, coff)
    nodes = plan.nodes
    pairs = _moment_pairs(plan)
    welford = {r1: r2 for r2, r1 in pairs.items()}
    level = _levels(plan, em, pairs)
    slot, _, levels = _segment_slots(plan)
    kinds = plan.extra["output_kinds"]
    lines = [
        # NC > 0: specialised to the shape (sizes, segments and VL compile-time constants):
        # on an H100, KernelBench 100's hinge loss 0.952x -> 0.979x of compile with VL
        # constant (the broadcast targets read at cols % 2048, not a division per element)
        *_size_prologue(plan, _SEGMENT_SIZES),
        "tile = tl.program_id(0)",
        "seg = tl.program_id(1)",
        *_row_index(plan, roff),
        *_bcast_rows(plan, "rows.to(tl.int64)"),
        "lo = seg * SEG",
        "sidx = tl.arange(0, SP)[None, :]",
        "smask = rmask & (sidx < S)",
        "prow = rows.to(tl.int64) * S",
    ]

    def part(k: int) -> str:  # the row's partials of slot k
        return f"part_ptr + {k} * M * S + prow"

    def pass_over(need: list[int], done: set[int], tail: list[str], ev: str) -> list[str]:
        """The loop over the program's segment: the tile values ``need`` asks for, then
        ``tail``; row scalars it depends on first."""
        deps = em.deps(need, done)
        out = []
        for i in deps:
            if _row_scope(nodes[i]):
                out.append(em.stmt(nodes[i]))
                done.add(i)
        out.append("for start in range(lo, lo + SEG, BLOCK_N):")
        loop = [
            "cols = start + tl.arange(0, BLOCK_N)[None, :]",
            "cmask = cols < N",
            "mask = rmask & cmask",
        ]
        for i in deps:
            if i not in done and nodes[i].cat == "tile":
                st = em.stmt(nodes[i])
                if st:
                    loop.append(st.replace("eviction_policy=EV_K", f"eviction_policy={ev}"))
        loop += tail
        return out + ["    " + x for x in loop]

    tile_outs = [o for o, k in zip(plan.outputs, kinds, strict=True) if k == "tile"]
    done: set[int] = set()  # combined so far (reductions of the levels below, row scalars)
    last: list[str] = []  # the last level's combine, for the fused finish
    for lvl in range(1, levels + 1):
        reds = [r for r, v in level.items() if v == lvl]
        block = _acc_init(nodes, reds, welford)
        tail = _acc_update(em, reds, pairs)
        block += pass_over([nodes[r].args[0] for r in reds if r not in pairs], set(done), tail,
                           "EV_V")  # fmt: skip
        combine = []
        for r in reds:
            if r in pairs:
                continue
            k = slot[r]
            op = nodes[r].op
            if r in welford:
                r2 = welford[r]
                block += [
                    f"p{r}, p{r2}, pw{r} = _ke_welford_all(acc{r}, acc{r2}, w{r}, TREE)",
                    f"tl.store({part(k)} + seg, p{r}, mask=rmask)",
                    f"tl.store({part(k + 1)} + seg, p{r2}, mask=rmask)",
                    f"tl.store({part(k + 2)} + seg, pw{r}, mask=rmask)",
                ]
                combine += [
                    f"q{r} = tl.load({part(k)} + sidx, mask=smask, other=0.0)",
                    f"q{r2} = tl.load({part(k + 1)} + sidx, mask=smask, other=0.0)",
                    f"qw{r} = tl.load({part(k + 2)} + sidx, mask=smask, other=0.0)",
                    f"v{r}, v{r2}, _ = _ke_welford_all(q{r}, q{r2}, qw{r}, TREE)",
                ]
                if nodes[r2].op == "mean":
                    combine.append(f"v{r2} = v{r2} / N")
                continue
            block += [
                f"p{r} = {_reduce_expr(op, f'acc{r}')}",
                f"tl.store({part(k)} + seg, p{r}, mask=rmask)",
            ]
            loaded = f"tl.load({part(k)} + sidx, mask=smask, other={_IDENTITY[op]})"
            combine.append(f"v{r} = {_reduce_expr(op, loaded)}" + (" / N" if op == "mean" else ""))
        lines.append(f"if LEVEL == {lvl}:")
        lines += ["    " + x for x in block]
        if tile_outs or lvl < levels:  # else only the fused finish below combines them
            lines.append(f"if LEVEL > {lvl}:")
            lines += ["    " + x for x in combine]
        # The fused finish combines the last level's partials, which other programs stored in
        # this launch: read past L1. (The levels below were combined above, as LEVEL > lvl.)
        last = [x.replace(", mask=smask,", ", mask=smask, cache_modifier='.cg',") for x in combine]
        done.update(r for r in reds)
    final = []
    if tile_outs:
        final += pass_over(tile_outs, done, [], "EV_T")
        final += ["    " + x for x in _row_stores(plan, em, f"roff + {coff}", "mask", ("tile",))]
    scal = [o for o, k in zip(plan.outputs, kinds, strict=True) if k != "tile"]
    for i in em.deps(scal, done):
        if nodes[i].kind == "pw" or _row_scope(nodes[i]):
            final.append(em.stmt(nodes[i]))
            done.add(i)
    scalar_stores = _row_stores(plan, em, "", "", ("rowscalar",))
    first_only = [
        st.replace("mask=rmask", "mask=rmask & (rows * 0 + seg == 0)") for st in scalar_stores
    ]
    if tile_outs:
        lines.append(f"if LEVEL == {levels + 1}:")
        lines += ["    " + x for x in final + first_only]
    else:
        lines += [
            f"if LEVEL == {levels}:  # the row's last program to arrive finishes it",
            "    tl.debug_barrier()  # every thread's partials are stored before the count",
            "    arrived = tl.atomic_add(count_ptr + tile, 1, sem='acq_rel', scope='gpu')",
            "    if arrived == S - 1:",
            *["        " + x for x in last + final + scalar_stores],
            "        tl.store(count_ptr + tile, 0)  # ready for the next call",
        ]
    # _ke_welford_all comes with the looped kernel, which every row candidate has.
    constexprs = ["ROWS", "BLOCK_N", "SP", "LEVEL", "EV_T", "EV_V", "I32", "TREE"]
    constexprs += [c for c, _ in _size_constants(plan, _SEGMENT_SIZES)]
    extra = [*sizes, "part_ptr", "count_ptr", "S", "SEG"]
    return _kernel("_ke_row_segmented", plan, constexprs, lines, extra)


# A per-row value folded over every row (a triplet loss's mean over the batch): the row kernel
# stores one value per row, then one program folds them in a fixed order, so the result is the
# same on every run (atomics across programs would not be).
_FOLD_OPS = ["sum", "mean", "max", "min"]
_KE_FOLD = """@triton.jit
def _ke_fold(x_ptr, y_ptr, out_ptr, M, S, OP: tl.constexpr, SCALE: tl.constexpr,
             RATIO: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    if OP == 2:
        acc = tl.full([BLOCK], -float("inf"), tl.float32)
    elif OP == 3:
        acc = tl.full([BLOCK], float("inf"), tl.float32)
    else:
        acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, M, BLOCK):
        mask = start + offs < M
        if OP == 2:
            acc = tl.maximum(acc, tl.load(x_ptr + start + offs, mask=mask, other=-float("inf")))
        elif OP == 3:
            acc = tl.minimum(acc, tl.load(x_ptr + start + offs, mask=mask, other=float("inf")))
        else:
            acc += tl.load(x_ptr + start + offs, mask=mask, other=0.0)
    if OP == 2:
        total = tl.max(acc, axis=0)
    elif OP == 3:
        total = tl.min(acc, axis=0)
    else:
        total = tl.sum(acc, axis=0)
    if RATIO:  # over a second total, folded alike (the means' M cancels)
        den = tl.zeros([BLOCK], tl.float32)
        for start in range(0, M, BLOCK):
            den += tl.load(y_ptr + start + offs, mask=start + offs < M, other=0.0)
        total = total / tl.sum(den, axis=0)
    elif OP == 1:
        total = total / M  # a mean of no rows is NaN, as torch says
    if SCALE == 1:  # the reference's number applied to the total (a batchmean's batch size)
        total = total * S
    elif SCALE == 2:
        total = total / S
    tl.store(out_ptr, total)


def _ke_fold_out(parts, M, op, dtype, shape, scale=0, s=1.0, den=None):
    \"\"\"The fold of the M per-row values in ``parts`` (op: sum, mean, max, min), over the
    fold of ``den``'s where given, then times (scale 1) or over (scale 2) the number ``s``, as
    dtype.\"\"\"
    total = torch.empty((), dtype=torch.float32, device=parts.device)
    _ke_fold[(1,)](parts, parts if den is None else den, total, M, float(s), OP=op, SCALE=scale,
                   RATIO=den is not None, BLOCK=1024)
    return total.to(dtype).reshape(shape)


"""


# A counter the forward moves by a constant (``num_batches_tracked += 1``), on the device.
_KE_BUMP = """@triton.jit
def _ke_bump(count_ptr, AMOUNT: tl.constexpr):
    tl.store(count_ptr, tl.load(count_ptr) + AMOUNT)


"""


def _fold_scale(plan: Plan, total: list, refs: list) -> str:
    """The fold's arguments for the number a total is multiplied or divided by: a literal, or
    the wrapper's own copy of a number computed from the sizes."""
    if len(total) < 4:
        return ""
    op, node = total[2], plan.nodes[total[3]]
    number = _literal(node.value) if node.kind == "const" else f"in{refs.index(node.attrs['ref'])}"
    return f", {1 if op == 'mul' else 2}, {number}"


def _table_literal(table: dict | None) -> str:
    """A per-shape launch table as a Python literal (integers only: it is written into code)."""
    rows = {str(k): [int(x) for x in v] for k, v in (table or {}).items()}
    return json.dumps(rows, sort_keys=True)


def _source_row(plan: Plan, p: dict) -> str:
    tiles = [r for r in _refs(plan, "tile")]
    refs = _refs(plan)
    rows_view = ""
    if tiles:
        ref0 = tiles[0]
    else:  # every row input gathered or read through a permutation: the rows' shape is a view's
        full = [
            n
            for n in plan.inputs("bcast")
            if not n.attrs.get("prefix")  # (narrowed to the rows' shape: not its source)
            and (
                n.attrs.get("gather")
                or (n.attrs.get("permuted") and all(int(v) != 1 for v in n.attrs["bshape"]))
            )
        ]
        ref0 = "_ke_rows"
        if full:
            rows_view = f"        _ke_rows = {bcast_view(full[0])}\n"
        elif plan.extra.get("outer"):
            # rows wider than every input (x[:, None] - y[None]): the inputs' broadcast shape,
            # as a view of the first (no copy; only its shape, dtype and device are read)
            views = [
                bcast_view(n) or n.attrs["ref"]
                for n in plan.inputs("bcast")
                if not n.attrs.get("prefix")
            ]
            shapes = ", ".join(f"{v}.shape" for v in views)
            rows_view = f"        _ke_rows = {views[0]}.expand(torch.broadcast_shapes({shapes}))\n"
        else:
            raise NoTemplate("no input of the rows' shape to take the rows from")
    numbers = set(_refs(plan, "scalar"))  # computed from the inputs' sizes at run time
    tensor_refs = [r for r in refs if r not in numbers]
    loads = "".join(
        f"        in{i} = {r}\n" if r in numbers else f"        in{i} = {r}.contiguous()\n"
        for i, r in enumerate(refs)
    )
    if _bcast(plan):  # inputs that broadcast along leading dimensions: read through strides
        loads = _bcast_wrapper(plan, f"{ref0}.shape")
    outs = ""
    state = plan.extra.get("state_outputs", {})  # output index -> the buffer it is stored into
    d = plan.extra.get("red_dim", -1)
    span = int(plan.extra.get("red_span", 1))  # adjacent reduced dimensions from d on
    full = bool(plan.extra.get("full"))
    merged = int(plan.extra.get("red_from", 0))
    gathered = _gathered(plan)
    for j, (kind, keep) in enumerate(
        zip(plan.extra["output_kinds"], plan.extra["output_shapes_keep_last"], strict=True)
    ):
        if kind == "tile":
            shape = f"{ref0}.shape"
        elif gathered:  # the kept dimensions (the reduced ones kept as 1s, or dropped)
            kept, reduced = gathered
            if keep:
                dims = ", ".join(
                    "1" if d in reduced else f"{ref0}.shape[{d}]"
                    for d in range(len(kept + reduced))
                )
            else:
                dims = ", ".join(f"{ref0}.shape[{d}]" for d in kept)
            shape = f"({dims},)" if dims else "()"
        elif full:  # one number: 0-d, or keepdim's ones
            shape = f"(1,) * {ref0}.dim()" if keep else "()"
        elif merged:  # rows of the trailing dimensions from ``merged`` on (negative)
            ones = f" + (1,) * {-merged}" if keep else ""
            shape = f"({ref0}.shape[:{merged}]{ones})"
        elif d == -1:
            shape = f"({ref0}.shape[:-1] + (1,))" if keep else f"{ref0}.shape[:-1]"
        else:  # the reduced middle dimension(s) kept as 1, or dropped
            middle = f" + (1,) * {span} + " if keep else " + "
            shape = f"({ref0}.shape[:{d}]{middle}{ref0}.shape[{d + span}:])"
        dt = "torch.int64" if j in plan.extra.get("index_outputs", ()) else "odt"
        if kind == "total":  # one value per row into an fp32 buffer (allocated after M)
            continue
        if str(j) in state:  # a buffer the forward updates: the kernel stores into it
            outs += f"        out{j} = {state[str(j)]}\n"
            continue
        outs += f"        out{j} = torch.empty({shape}, dtype={dt}, device={ref0}.device)\n"
    totals = plan.extra.get("totals", {})
    # Counters the forward moves (BatchNorm's batches seen), on the device: no host sync.
    outs += "".join(
        f"        _ke_bump[(1,)]({ref}, {int(amount)})\n"
        for ref, amount in plan.extra.get("counters", ())
    )
    dens = plan.extra.get("total_dens", {})  # a quotient of totals: its denominator's output
    ret = ", ".join(
        f"_ke_fold_out(out{j}, M, {_FOLD_OPS.index(totals[str(j)][0])}, odt, "
        f"{(1,) * totals[str(j)][1]}{_fold_scale(plan, totals[str(j)], refs)}"
        + (f", den=out{dens[str(j)]})" if str(j) in dens else ")")
        if str(j) in totals
        else _viewed(f"out{j}", (plan.extra.get("output_views") or {}).get(str(j)), ref0)
        for j in range(len(plan.outputs))
        if str(j) not in state and j not in dens.values()
    )
    # After M: each per-row value folded over every row lands in fp32 first.
    if state:  # an empty batch leaves the module's state as it was (torch skips the update)
        names = ", ".join(f"out{j}" for j in state)
        scratch = ", ".join(f"torch.empty_like(out{j})" for j in state)
        folds_state = f"        if N == 0:\n            {names} = {scratch}\n"
    else:
        folds_state = ""
    folds = folds_state + "".join(
        f"        out{j} = torch.empty((M,), dtype=torch.float32, device={ref0}.device)\n"
        for j in sorted(int(k) for k in totals)
    )
    args = ", ".join(
        [f"in{i}" for i in range(len(refs))] + [f"out{j}" for j in range(len(plan.outputs))]
    )
    sizes = ", ".join(_geometry(plan)[2])
    inner = f"        K = math.prod({ref0}.shape[{d + span}:])\n" if d != -1 else ""
    if plan.extra.get("vec_mod"):
        inner += f"        VL = {ref0}.shape[-1]\n"
    if plan.extra.get("mrow"):
        inner += f"        R = {ref0}.shape[-2]\n"
    # The row: the reduced dimension, or every element (a reduction over the whole tensor).
    row_len = f"{ref0}.numel()" if full else f"{ref0}.shape[{d}]"
    if span > 1:
        row_len = f"math.prod({ref0}.shape[{d}:{d + span}])"
    if merged:
        row_len = f"math.prod({ref0}.shape[{merged}:])"
    # The number of rows, also where a row is empty (its reductions are then the identity:
    # a sum of nothing is 0, a mean NaN, as torch says; so the kernel still runs).
    if gathered:  # rows of the kept dimensions' coordinates, gathering the reduced ones'
        kept, reduced = gathered
        sh = f"{ref0}.shape"
        row_len = f"math.prod({sh}[d] for d in {reduced})"
        for group, (size, below, stride) in (
            (kept, ("GL", "RP", "RT")),
            (reduced, ("CL", "CP", "CT")),
        ):
            for j, d in enumerate(group):
                inner += f"        {size}{j} = {sh}[{d}]\n"
                inner += f"        {below}{j} = math.prod({sh}[k] for k in {group[j + 1 :]})\n"
                inner += f"        {stride}{j} = math.prod({sh}[{d + 1}:])\n"
    chunk = plan.extra.get("chunk")
    if chunk and chunk[3:] == ["size"]:  # groups of so many contiguous elements
        row_len = f"{chunk[2]}"
        groups = f"({ref0}.numel() // {chunk[2]})"
    elif chunk:  # groups of contiguous elements: g per row of the leading dimensions
        groups = f"math.prod({ref0}.shape[:{chunk[0]}]) * _ke_groups(self, {chunk[1]})"
        row_len = f"{ref0}.numel() // max(1, {groups})"
    if full:
        rows_of = "1"
    elif gathered:
        rows_of = f"math.prod({ref0}.shape[d] for d in {gathered[0]})"
    elif chunk:
        rows_of = groups
    elif merged:
        rows_of = f"math.prod({ref0}.shape[:{merged}])"
    elif d == -1:
        rows_of = f"math.prod({ref0}.shape[:-1])"
    else:
        rows_of = f"math.prod({ref0}.shape[:{d}]) * K"
    products = any(n.op == "prod" for n in plan.reductions())
    segmentable = _segmentable(plan)
    _, slots, levels = _segment_slots(plan)
    has_tile = "tile" in plan.extra["output_kinds"]
    strided = _strided(plan)
    # the launches' constants beyond N and M (NC=nc, MC=mc): K's and VL's, where the plan has them
    more = [(c, size) for c, size in _size_constants(plan) if c not in ("NC", "MC")]
    kc = "".join(f" {c}={c.lower()}," for c, _ in more)
    kc_line = "".join(f"        {c.lower()} = {size} if const else 0\n" for c, size in more)
    return (
        _header(plan, p)
        + (_KE_MUL if products else "")
        + _KE_FLAT
        + (_KE_FOLD if totals else "")
        + (_KE_BUMP if plan.extra.get("counters") else "")
        + _row_one_pass(plan)
        + "\n\n"
        + _row_looped(plan)
        + "\n\n"
        + _row_split(plan)
        + ("\n\n" + _row_segmented(plan) if segmentable else "")
        + f"""

_PARAMS = {json.dumps({k: v for k, v in p.items() if k != "table"}, sort_keys=True)}
# Launch configurations tuned per shape ("M,N,dtype" -> [one_pass (0: looped, 1: one pass,
# 2: one pass over two chunks, BLOCK_N + the rest), ROWS, BLOCK_N, warps, stages, programs
# (0: one per tile; else a persistent launch), eviction hints (0/1), shape constants (0/1: M
# and N, and K along a middle dimension, compiled into the kernel)]); any other shape takes the
# policy in _PARAMS (its "static" says whether the policy's launches are compiled per shape).
_TABLE = {_table_literal(p.get("table"))}
_CONFIGS = {{}}
# Rows cut into segments (one_pass 3): whether this graph can be, its partials' slots per row
# and segment, its reduction levels, and whether it writes a value per element.
_SEGMENTS = ({segmentable}, {slots}, {levels}, {has_tile})


def _ke_config(M, N, dtype):
    \"\"\"(one_pass, ROWS, BLOCK_N, warps, stages, programs, hints, constant shape) for M rows
    of N (cached).\"\"\"
    key = (M, N, dtype)
    hit = _CONFIGS.get(key)
    if hit is None:
        tuned = _TABLE.get(f"{{M}},{{N}},{{str(dtype).removeprefix('torch.')}}")
        static = _PARAMS.get("static", 0)
        hit = (tuple(tuned) + (0, 0, 0))[:8] if tuned else _ke_policy(M, N) + (static,)
        _CONFIGS[key] = hit
    return hit


def _ke_groups(model, traced):
    \"\"\"The number of groups the rows are (a group norm's): the model's one nn.GroupNorm's,
    which its constructor may have set from other sizes than the trace's; else as traced.\"\"\"
    found = [m.num_groups for m in model.modules() if isinstance(m, nn.GroupNorm)]
    return found[0] if len(found) == 1 else traced


def _ke_policy(M, N):
    p = _PARAMS
    full = {_pow2("max(N, 1)")}
    if p["strategy"] == "one_pass" and full > {ONE_PASS_NUMEL}:
        # A row past Triton's largest tile cannot be held in one: as "auto" would.
        p = {{**p, "strategy": "auto"}}
    one_pass = p["strategy"] == "one_pass" or (
        p["strategy"] == "auto" and full <= p["max_one_pass"]
    )
    segs = _ke_segments(p, M, N, one_pass)
    if segs:
        warps = max(1, min(16, {_pow2("max(1, p['block_n'] // (32 * p['vec']))")}))
        return 3, 1, p["block_n"], warps, p["stages"], segs, 0
    block_n = full if one_pass else min(p["block_n"], full)
    rows = max(1, min(p["max_rows"], p["tile"] // block_n, {_pow2("M")}))
    if not one_pass and not {strided}:  # a looped kernel: along the last dimension, one row
        rows = 1
    warps = max(1, min(16, {_pow2("max(1, rows * block_n // (32 * p['vec']))")}))
    return one_pass, rows, block_n, warps, p["stages"], 0, 0


_COUNTERS = {{}}


def _ke_counter(M, device):
    \"\"\"Zeroed arrival counters for M rows, one buffer per device and stream (each launch
    leaves them at zero again), so the fused finish allocates nothing per call.\"\"\"
    key = (device, torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else 0)
    have = _COUNTERS.get(key)
    if have is None or have.numel() < M:
        have = _COUNTERS[key] = torch.zeros(max(M, 64), dtype=torch.int32, device=device)
    return have


def _ke_tree(x):
    \"\"\"Whether Welford's lanes combine in one tree of pairwise combines (on a GPU) or by sums
    (under the interpreter, on CPU tensors: it runs a combine function per element in Python);
    "combine": "sums" in the parameters keeps the sums everywhere, to compare the two.\"\"\"
    return x.is_cuda and _PARAMS.get("combine", "tree") == "tree"


def _ke_segments(p, M, N, one_pass):
    \"\"\"How many segments to cut each row into (0: none): where there are too few rows to
    fill the device and a row is long (for a graph that writes per element, only where the
    row is too long for one pass anyway). A looped candidate is cut too (one program walking
    a whole 4M-element row ran 100x slower); one forced to one pass never is.\"\"\"
    ok, _, _, has_tile = _SEGMENTS
    block = p["block_n"]
    if not ok or p["strategy"] == "one_pass" or M >= p.get("seg_rows", 128) or N < 2 * block:
        return 0
    if has_tile and (one_pass or triton.next_power_of_2(N) <= p["max_one_pass"]):
        return 0
    return max(2, min(triton.cdiv(N, block), p.get("seg_programs", 1024) // max(M, 1)))


class ModelNew(nn.Module):
{plan.init_source}
{forward_def(plan)}{_dtype_line(tensor_refs, plan)}{rows_view}{loads}{outs}        N = {row_len}
{inner}        M = {rows_of}
{folds}        if M == 0:
            return {ret}
        one_pass, rows, block_n, warps, stages, programs, hints, const = _ke_config(
            M, N, {ref0}.dtype
        )
        tiles = {_tiles(plan, "triton.cdiv", "rows")}
        grid = (min(tiles, programs) if programs else tiles,)
        ev_t, ev_v = ("evict_first", "evict_last") if hints else ("", "")
        nc, mc = (N, M) if const else (0, 0)
{kc_line}        i32 = M * N < 2**31  # flat indices (by coordinates) in 32 bits
        tree = _ke_tree({ref0})
        if one_pass == 3:  # rows in segments: a launch per reduction level, then the outputs
            seg = triton.cdiv(triton.cdiv(N, programs), block_n) * block_n
            segs = triton.cdiv(N, seg)
            part = torch.empty((max(1, _SEGMENTS[1]), M, segs), dtype=torch.float32,
                               device={ref0}.device)
            # The partials' tile spans every thread: a [1, SP] tile smaller than the program
            # is replicated across threads, and the level that reads it ran 5-20x slower on
            # the H200 (KernelBench 40: 145 us at 8 warps and 64 segments, 16 us at 2 warps).
            sp = max(triton.next_power_of_2(segs), 32 * warps)
            # No value per element: the last level's launch finishes the rows (no output launch).
            fuse = not _SEGMENTS[3]
            count = _ke_counter(M, {ref0}.device) if fuse else part
            for level in range(1, _SEGMENTS[2] + (1 if fuse else 2)):
                _ke_row_segmented[(M, segs)](
                    {args}, {sizes}, part, count, segs, seg, ROWS=1, BLOCK_N=block_n,
                    SP=sp, LEVEL=level, EV_T=ev_t, EV_V=ev_v, I32=i32, NC=nc, MC=mc,
                    SC=segs if const else 0, SEGC=seg if const else 0, TREE=tree,{kc}
                    num_warps=warps, num_stages=stages)
        elif one_pass == 2:
            _ke_row_split[grid]({args}, {sizes}, ROWS=rows, BLOCK_N=block_n,
                                BLOCK_B=triton.next_power_of_2(max(1, N - block_n)),
                                PROGRAMS=programs, EV_T=ev_t, EV_V=ev_v, NC=nc, MC=mc,{kc} I32=i32,
                                num_warps=warps, num_stages=stages)
        elif one_pass:
            _ke_row_one_pass[grid]({args}, {sizes}, ROWS=rows, BLOCK_N=block_n, PROGRAMS=programs,
                                   EV_T=ev_t, EV_V=ev_v, NC=nc, MC=mc,{kc} I32=i32, num_warps=warps,
                                   num_stages=stages)
        else:
            _ke_row_looped[grid]({args}, {sizes}, ROWS=rows, BLOCK_N=block_n, PROGRAMS=programs,
                                 EV_T=ev_t, EV_V=ev_v, NC=nc, MC=mc,{kc} I32=i32, TREE=tree,
                                 num_warps=warps, num_stages=stages)
        return {ret}
"""
    )


def row_policy(
    p: dict,
    m: int,
    n: int,
    segmentable: bool = False,
    has_tile: bool = True,
    strided: bool = False,
) -> list[int]:
    """The row candidate's ``_ke_policy`` in Python (tests hold the two to the same answer);
    ``segmentable`` / ``has_tile``: the graph's (see ``_SEGMENTS``); ``strided``: its rows lie
    along a middle dimension, where adjacent rows are adjacent in memory and a looped kernel
    takes as many rows a program as one pass does (Inductor's launch for KernelBench 47)."""
    full = _np2(max(n, 1))
    if p["strategy"] == "one_pass" and full > ONE_PASS_NUMEL:
        p = {**p, "strategy": "auto"}
    one_pass = p["strategy"] == "one_pass" or (
        p["strategy"] == "auto" and full <= p["max_one_pass"]
    )
    segs = row_segments(p, m, n, one_pass, segmentable, has_tile)
    if segs:
        warps = max(1, min(16, _np2(max(1, p["block_n"] // (32 * p["vec"])))))
        return [3, 1, p["block_n"], warps, p["stages"], segs, 0]
    block_n = full if one_pass else min(p["block_n"], full)
    rows = max(1, min(p["max_rows"], p["tile"] // block_n, _np2(m)))
    if not one_pass and not strided:  # a looped kernel: along the last dimension, one row
        rows = 1
    warps = max(1, min(16, _np2(max(1, rows * block_n // (32 * p["vec"])))))
    return [int(one_pass), rows, block_n, warps, p["stages"], 0, 0]


def row_segments(p: dict, m: int, n: int, one_pass: bool, segmentable: bool, has_tile: bool) -> int:
    """The candidate's ``_ke_segments`` in Python."""
    block = p["block_n"]
    few = m < p.get("seg_rows", 128) and n >= 2 * block
    if not segmentable or p["strategy"] == "one_pass" or not few:
        return 0
    if has_tile and (one_pass or _np2(n) <= p["max_one_pass"]):
        return 0
    return max(2, min(-(-n // block), p.get("seg_programs", 1024) // max(m, 1)))


def row_launch_ok(cfg: list[int], m: int, n: int) -> bool:
    """Whether a row launch configuration fits the registers and the row (as the tuner's space
    in :mod:`workers.search.tune` does)."""
    one_pass, rows, block, warps, stages = cfg[:5]
    if warps not in (1, 2, 4, 8, 16, 32) or not 1 <= stages <= 4 or rows < 1:
        return False
    full = _np2(n)
    if one_pass == 3:  # segments: (row, segment) programs, each looping over its columns
        segs = cfg[5] if len(cfg) > 5 else 0
        return (
            rows == 1
            and 256 <= block <= full
            and 2 <= segs <= 4096
            and 1 <= block // (32 * warps) <= 32
        )
    if one_pass == 2:  # two chunks: the largest power of two below n, and the rest
        lanes = block + _np2(n - block) if n > block else 0
        per_thread = rows * lanes // (32 * warps)
        return (
            block == full // 2
            and lanes > 0
            and rows <= max(1, _np2(m))
            and rows * lanes <= 65536
            and (1 <= per_thread <= 64)
        )
    if one_pass:
        per_thread = rows * full // (32 * warps)
        return (
            block == full
            and rows <= max(1, _np2(m))
            and rows * full <= 65536
            and (1 <= per_thread <= 64)
        )
    return (
        64 <= block <= full
        and rows <= max(2, _np2(m))
        and rows * block <= 8192
        and 1 <= rows * block // (32 * warps) <= 32
    )


def row_neighbour(cfg: list[int], m: int, n: int, rng: random.Random) -> list[int]:
    """One step from ``cfg`` in the launch space of M x N rows: warps, rows per program, block,
    stages, eviction hints, or one pass <-> looped; ``cfg`` itself if no step fits."""
    full = _np2(n)
    for _ in range(20):
        segs = cfg[5] if cfg[0] == 3 else 0  # the other launches' persistent count is not kept
        new = list(cfg[:5]) + [segs, cfg[6] if len(cfg) > 6 else 0]
        moves = ["warps", "warps", "rows", "block", "stages", "hints", "strategy"]
        move = rng.choice(moves + ["segments"] * 2 if segs else moves)
        up = rng.random() < 0.5
        if move == "segments":
            new[5] = segs * 2 if up else segs // 2
        elif move == "warps":
            new[3] = new[3] * 2 if up else new[3] // 2
        elif move == "rows":
            new[1] = new[1] * 2 if up else new[1] // 2
        elif move == "block":
            new[2] = new[2] * 2 if up else new[2] // 2
        elif move == "stages":
            new[4] += 1 if up else -1
        elif move == "hints":
            new[6] = 1 - new[6]
        elif new[0] == 1 and full != n and rng.random() < 0.5:  # one pass -> two chunks
            new[:3] = [2, new[1], full // 2]
        elif new[0]:  # one pass, two chunks or segments -> looped
            new[:3] = [0, 1, max(256, min(2048, full // 2))]
            new[5] = 0
        else:  # looped -> one pass
            new[:3] = [1, 1, full]
            new[3] = max(1, min(32, _np2(max(1, full // (32 * 16)))))
        if new != list(cfg) and row_launch_ok(new, m, n):
            return new
    return list(cfg)


def row_shape(plan: Plan) -> tuple[bool, bool, bool]:
    """(whether its rows can be cut into segments, whether it writes a value per element,
    whether its rows lie along a middle dimension): what the launch policy needs to know of a
    graph besides its rows' shape."""
    return _segmentable(plan), "tile" in plan.extra["output_kinds"], _strided(plan)


def row_config(
    p: dict, m: int, n: int, dtype: str, shape: tuple[bool, ...] = (False, True)
) -> list[int]:
    """The launch configuration a row candidate with parameters ``p`` uses for M x N rows
    (``shape``: the graph's ``row_shape``)."""
    tuned = (p.get("table") or {}).get(f"{m},{n},{dtype}")
    return (list(tuned) + [0, 0])[:7] if tuned else row_policy(p, m, n, *shape)
