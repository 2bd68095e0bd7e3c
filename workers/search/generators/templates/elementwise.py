"""The ``elementwise`` family: pointwise graphs over flattened tensors."""

from __future__ import annotations

from workers.search.generators.templates.common import (
    _bcast,
    _bcast_args,
    _bcast_rank,
    _bcast_rows,
    _bcast_wrapper,
    _bind_inputs,
    _dtype_line,
    _Emitter,
    _forward_head,
    _frac,
    _header,
    _io_names,
    _kernel,
    _refs,
    bcast_view,
)
from workers.search.ir import wider_than_row
from workers.search.trace import Plan


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


def _bcast_kernel(plan: Plan) -> str:
    """Rows of the last dimension, ROWS per program, the row loop in BLOCK columns: a
    broadcast input's offsets are its rows' (from each row's leading coordinates, worked out
    once per row) plus its column stride, so no per-element division."""
    kept, last = _bcast(plan), _bcast_rank(plan) - 1
    narrow = {j: (p, q, off) for j, p, q, off in plan.extra.get("narrow_outputs", [])}
    # An output wider than the row (a pad, a repeat): the loop runs over its columns, past the
    # row's N, so a moved column's read and a wide output's store are masked by the rows alone
    # and their own columns (``mask`` keeps the inputs' columns below N).
    wide = any(wider_than_row(*w) for w in narrow.values())
    rows_only = "rmask[:, None]" if wide else "mask"

    def shifted(node, ptr, k, sh):
        # A column moved by a slice or a cat: the same row, ``sh`` columns on, masked to it;
        # read from the row's far end (``N - 1 - (c + sh)``) where a flip mirrors it.
        inside = f"{rows_only} & ((cols + {sh} >= 0) & (cols + {sh} < N))[None, :]"
        if node.attrs.get("mirror"):
            col = f"(N - 1 - cols - {sh})"
            if node.attrs["role"] == "bcast":
                at = f"boff{k}"  # the same value along the row
                if last in kept[k]:
                    at = f"rb{k}[:, None] + {col}[None, :] * s{k}_{last}"
                return f"tl.load({ptr} + {at}, mask={inside}, other=0.0)"
            return f"tl.load({ptr} + rows[:, None] * N + {col}[None, :], mask={inside}, other=0.0)"
        if node.attrs["role"] == "bcast":
            step = f" + {sh} * s{k}_{last}" if last in kept[k] else ""
            return f"tl.load({ptr} + boff{k}{step}, mask={inside}, other=0.0)"
        return f"tl.load({ptr} + toff + {sh}, mask={inside}, other=0.0)"

    em = _Emitter(
        plan,
        "tl.load({ptr} + toff, mask=mask, other=0.0)",
        "",
        "tl.load({ptr} + boff{k}, mask=bmask{k}, other=0.0)",
        shifted=shifted,
        positions={"col": "cols[None, :]", "mrow": "(rows % R)[:, None]"},
    )
    body = [
        # NC > 0: the row length a compile-time constant; I32: every offset fits 32 bits and
        # index arithmetic runs in them (compile's static-shape kernels do both; without them a
        # batch norm over [32, 32, 32, 32] ran at 0.93x of compile on an H100, KernelBench 33)
        "if NC > 0:",
        "    N = NC",
        "pid = tl.program_id(0)",
        "rows = pid * ROWS + tl.arange(0, ROWS)",
        "if not I32:",
        "    rows = rows.to(tl.int64)",
        "rmask = rows < M",
        *_bcast_rows(plan, "rows"),
    ]
    inner = [
        "cols = start + tl.arange(0, BLOCK)",
        "mask = rmask[:, None] & (cols < N)[None, :]",
        "toff = rows[:, None] * N + cols[None, :]",
    ]
    for k, dims in sorted(kept.items()):
        if last in dims:
            inner.append(f"boff{k} = rb{k}[:, None] + cols[None, :] * s{k}_{last}")
            inner.append(f"bmask{k} = mask")
        else:  # the same value along the row: one load per row, broadcast (KernelBench 12)
            inner.append(f"boff{k} = rb{k}[:, None]")
            inner.append(f"bmask{k} = rmask[:, None]")
    used = {a for node in plan.nodes for a in node.args} | set(plan.outputs)
    for node in plan.nodes:
        if node.kind == "input" and node.id not in used:
            continue  # a weight's own node, read only through its view
        stmt = em.stmt(node)
        if stmt:
            inner.append(stmt)
    for j, o in enumerate(plan.outputs):
        val = em.name(plan.nodes[o])
        if j in narrow:  # its row: the first N·p/q + off columns (a GLU's half), or more (a pad)
            inner.append(f"NO{j} = {_width(*narrow[j])}")
            inner.append(
                f"tl.store(out{j}_ptr + rows[:, None] * NO{j} + cols[None, :], {val}, "
                f"mask={rows_only} & (cols < NO{j})[None, :])"
            )
        else:
            inner.append(f"tl.store(out{j}_ptr + toff, {val}, mask=mask)")
    # Only as many columns as the widest output has (all of them unless every output is narrow).
    if wide:
        widths = sorted(
            {_width(*narrow[j]) if j in narrow else "N" for j in range(len(plan.outputs))}
        )
        bound = widths[0]
        for other in widths[1:]:
            bound = f"tl.maximum({bound}, {other})"
        body.append(f"for start in range(0, {bound}, BLOCK):")
    elif narrow and len(narrow) == len(plan.outputs):
        widths = set(narrow.values())
        if all(off == 0 for _, _, off in widths):  # fractions of the row: the largest
            bound = _width(*max(widths, key=lambda pqo: pqo[0] / pqo[1]))
        else:  # one width, or all N (N/2 + 10 and N - 5 cross at N = 30)
            bound = _width(*widths.pop()) if len(widths) == 1 else "N"
        body.append(f"for start in range(0, {bound}, BLOCK):")
    else:
        body.append("for start in range(0, N, BLOCK):")
    body += ["    " + line for line in inner]
    return _kernel(
        "_ke_broadcast", plan, ["ROWS", "BLOCK", "NC", "I32"], body, ["M", "N", *_sizes(plan)]
    )


def _sizes(plan: Plan) -> list[str]:
    """The broadcast kernel's size arguments after M and N: the rows' second-last size (``R``,
    a tril/triu's) and the broadcast inputs' sizes and strides."""
    return (["R"] if plan.extra.get("mrow") else []) + _bcast_args(plan)


def _out_shape(narrow: tuple[int, int, int] | None) -> str:
    """An output's shape: the rows', or for a narrow output its first N·p/q + off columns
    (none where the row has fewer: ``x[..., 1:]`` of an empty row is empty), for a wider one
    its N·p/q + off columns."""
    if narrow is None:
        return "shape"
    p, q, off = narrow
    if wider_than_row(p, q, off):
        width = f"shape[-1] * {p} // {q}" + (f" + {off}" if off else "")
        return f"(*shape[:-1], {f'max(0, {width})' if off < 0 else width})"
    if not off:
        return f"(*shape[:-1], shape[-1] * {p} // {q})"
    return f"(*shape[:-1], min(shape[-1], max(0, shape[-1] * {p} // {q} + {off})))"


def _width(p: int, q: int, off: int) -> str:
    """A narrow output's width in the kernel: ``N·p/q + off`` columns, within ``[0, N]`` as a
    slice's length is (``x[..., :8]`` of a 4-wide row has 4); a wider output's, not below 0."""
    if wider_than_row(p, q, off):
        return f"tl.maximum({_frac(p, q, off)}, 0)" if off < 0 else _frac(p, q, off)
    if not off:
        return _frac(p, q)
    return f"tl.minimum(tl.maximum({_frac(p, q, off)}, 0), N)"


def _source_bcast(plan: Plan, p: dict) -> str:
    """Elementwise with inputs that broadcast along some dimensions (``plan.extra["bcast"]``):
    the tiles are read contiguous, each broadcast input through its own strides (a view of it
    expanded to the rows' shape), checked against the dimensions the trace saw it vary in."""
    refs = _refs(plan)
    tensors = [r for r in refs if r not in _refs(plan, "scalar")]
    tiles = _refs(plan, "tile")
    shape_ref = tiles[0] if tiles else tensors[0]
    shape = f"{shape_ref}.shape"
    if not tiles:  # rows wider than every input (an outer sum): the inputs' broadcast shape
        views = [
            (bcast_view(n) or n.attrs["ref"]) + ".shape"
            for n in plan.inputs("bcast")
            if not n.attrs.get("prefix")  # narrowed to the rows' shape, so not its source
        ]
        shape = f"torch.broadcast_shapes({', '.join(views)})"
        if plan.extra.get("columns"):  # as wide as an arange along the row (F.one_hot's classes)
            shape = f"(*{shape}[:-1], {int(plan.extra['columns'])})"
    narrow = {j: (p, q, off) for j, p, q, off in plan.extra.get("narrow_outputs", [])}
    outs = "".join(
        f"        out{j} = torch.empty({_out_shape(narrow.get(j))}, dtype=odt, "
        f"device={shape_ref}.device)\n"
        for j in range(len(plan.outputs))
    )
    args, ret = _io_names(plan, refs)
    # every offset lies within the row-major index space or an output (a pad's wider rows)
    outs_numel = ", ".join(f"out{j}.numel()" for j in range(len(plan.outputs)))
    return (
        _header(plan, p)
        + _bcast_kernel(plan)
        + _forward_head(plan)
        + _dtype_line(tensors, plan)
        + (
            "        odt = torch.get_default_dtype()\n"
            if plan.extra.get("float_out") and not plan.extra.get("out_dtype")
            else ""
        )
        + f"        shape = {shape}\n"
        + _bcast_wrapper(plan, "shape")
        + outs
        + "        N = shape[-1] if len(shape) else 1\n"
        + "        M = math.prod(shape[:-1])\n"
        + ("        R = shape[-2]\n" if plan.extra.get("mrow") else "")
        + f"        if M == 0:\n            return {ret}\n"
        + f"        block = min({p['block']}, triton.next_power_of_2(N))\n"
        + f"        rows = max(1, min(64, {p['block'] * p['tiles']} // block))\n"
        + f"        warps = max(1, min(16, rows * block // (32 * {p['vec']})))\n"
        + "        grid = (triton.cdiv(M, rows),)\n"
        + f"        _ke_broadcast[grid]({', '.join(args + ['M', 'N', *_sizes(plan)])}, "
        + f"ROWS=rows, BLOCK=block, NC=N, I32=max(M * N, {outs_numel}) < 2**31, "
        + "num_warps=warps)\n"
        + f"        return {ret}\n"
    )


def _source_elementwise(plan: Plan, p: dict) -> str:
    if plan.extra.get("bcast"):
        return _source_bcast(plan, p)
    refs = _refs(plan)
    numbers = _refs(plan, "scalar")  # Python floats, passed to the kernel as they are
    tensors = [r for r in refs if r not in numbers]
    warps = max(1, min(32, p["block"] // (32 * p["vec"])))
    ref0 = (_refs(plan, "tile") or tensors)[0]  # not a 0-d cell nor a parameter left unread
    outs = "".join(
        f"        out{j} = torch.empty({ref0}.shape, dtype=odt, device={ref0}.device)\n"
        for j in range(len(plan.outputs))
    )
    names, ret = _io_names(plan, refs)
    args = ", ".join(names)
    return (
        _header(plan, p)
        + _elementwise_kernel(plan)
        + _forward_head(plan)
        + _dtype_line(tensors, plan)
        + _bind_inputs(refs, numbers)
        + outs
        + f"        n = out0.numel()\n        if n == 0:\n            return {ret}\n"
        + f"        grid = (triton.cdiv(n, {p['block']} * {p['tiles']}),)\n"
        + f"        _ke_elementwise[grid]({args}, n, BLOCK={p['block']}, TILES={p['tiles']}, "
        f"num_warps={warps})\n" + f"        return {ret}\n"
    )
