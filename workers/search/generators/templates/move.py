"""The ``move`` family: one op that moves elements along any dimension, as a kernel of its own
(``workers.search.lowering_move``): ``cat``, ``stack``, a slice (with a step) or a ``split``
piece, ``F.pad`` (constant, reflect, replicate), ``repeat``, ``flip``, ``roll``, ``tril`` and
``triu``; and a strided copy of a view (``view``: a select, an expand, slices of an input,
copied contiguous).

Every program writes BLOCK elements of the flat, contiguous output; each element's coordinates
(from the output's sizes, passed at run time) say where in the operand it comes from: a cat's
operand is chosen by the coordinate along its dimension (one masked load per operand, so nothing
outside an operand is read, joined with ``tl.where``), a slice reads ``start + i·step``, a pad
reads ``i - left`` where that is inside the input and writes the pad value elsewhere (a reflect
pad mirrors the coordinate back in, a replicate pad clamps it), a repeat reads ``i % n``, a
flip ``n - 1 - i``, a roll by ``r`` (in ``[0, n)``) ``i - r`` wrapped round, and a strided copy
reads ``i``. The operands are read through their own strides (a permuted, sliced, selected or
expanded view is not copied: the wrapper takes it as a torch view, its numbers fitted as the
op's are). Coordinates are 32-bit wherever every index fits (as in the pool family: a
64-bit division per coordinate costs the kernel much of its speed), else 64-bit.

The wrapper computes the output's shape from the operands' shapes at run time; the numbers the
op takes (slice bounds, pads) are ``(D·a_num) // a_den + c`` of their dimension's size ``D``
where the traces at other sizes showed them moving (``plan.extra["fits"]``), else as traced.
A stack is a cat of the operands each viewed with a dimension of 1 inserted; a repeat of more
dimensions than its input has views the input with leading dimensions of 1, as torch does.
"""

from __future__ import annotations

import json

from workers.search.generators.templates.common import _forward_head, _header, _literal
from workers.search.ir import Plan

_HELPERS = '''

def _ke_number(fit, size):
    """A number the op takes at this size: ``(size * a_num + up) // a_den + c`` (``up``: how
    it rounds, where traced at a size it does not divide)."""
    num, den, c, *up = fit
    return (size * num + (up[0] if up else 0)) // den + c


def _ke_fits(fits, inputs):
    """The fits with each size of an input (``["size", name, dim]``) read at this call: a
    causal mask buffered for the longest sequence, sliced ``[:T, :T]`` to the input's."""
    return [[0, 1, inputs[f[1]].shape[f[2]]] if f[0] == "size" else f for f in fits]


def _ke_slice(t, dim, start, end, step):
    """``t`` sliced along ``dim`` from and to fitted numbers of that dimension's size."""
    n = t.shape[dim]
    return t[(slice(None),) * dim + (slice(_ke_number(start, n), _ke_number(end, n), step),)]


def _ke_piece(t, dim, size, piece):
    """Piece ``piece`` of ``t`` split along ``dim`` into pieces of a fitted size."""
    n = t.shape[dim]
    size = _ke_number(size, n)
    start = min(n, piece * size)
    return t.narrow(dim, start, min(n, start + size) - start)


def _ke_select(t, dim, index):
    """``t`` at a fitted index of ``dim`` (the dimension dropped)."""
    return t.select(dim, _ke_number(index, t.shape[dim]))


def _ke_expand(t, sizes):
    """``t`` expanded: -1 keeps a dimension, a fit is a size of its own."""
    return t.expand([s if s == -1 else _ke_number(s, 1) for s in sizes])


def _ke_dtype(ops):
    """The dtype torch.cat gives its operands (the promoted one)."""
    dtype = ops[0].dtype
    for a in ops[1:]:
        dtype = torch.promote_types(dtype, a.dtype)
    return dtype


def _ke_i32(out, *operands):
    """Whether every flat index of ``out`` (the last block's too) and every element offset of
    the operands fit 32 bits (then the kernel's coordinates are computed in them)."""
    reach = [sum((s - 1) * abs(t) for s, t in zip(a.shape, a.stride())) for a in operands]
    return out.numel() < 2**31 - 2**14 and all(r < 2**31 for r in reach)
'''


def _fits(plan: Plan) -> list:
    """Each number the op takes as ``[a_num, a_den, c]`` (or ``["size", input, dim]``): as
    fitted, else the traced value."""
    e = plan.extra
    return e.get("fits") or [[0, 1, int(v)] for v, _ in e.get("ints", [])]


def _operand_lines(plan: Plan) -> tuple[list[str], int]:
    """Wrapper lines binding each operand ``a{k}`` as the kernel reads it (rank ``R``, the
    kernel's rank, at least 1), and ``R``."""
    e = plan.extra
    kind, rank = e["kind"], int(e["rank"])
    lines = []
    if e.get("flat"):  # a roll of the flattened input: the kernel rolls one dimension
        return [f"        flat = {e['operands'][0]}\n", "        a0 = flat.reshape(-1)\n"], 1
    for k, expr in enumerate(e["operands"]):
        if kind == "stack":
            expr = f"{expr}.unsqueeze({int(e['dim'])})"
        elif kind == "repeat":
            lead = len(e["reps"]) - int(e["ranks"][k])
            if lead > 0:  # torch views the input with leading dimensions of 1
                expr = f"{expr}[{'None, ' * lead}...]"
        if rank == 0:
            expr = f"{expr}.reshape(1)"
        lines.append(f"        a{k} = {expr}\n")
    return lines, max(rank, 1)


def _shape_lines(plan: Plan, R: int) -> list[str]:
    """Wrapper lines computing the output's ``shape`` (of rank R) and what the kernel takes
    beyond sizes and strides (``extra``: cat ends, slice start, pad lefts)."""
    e = plan.extra
    kind = e["kind"]
    lines = ["        shape = list(a0.shape)\n", "        extra = []\n"]
    if kind in ("cat", "stack"):
        d = int(e["dim"])
        lines.append(
            f"        extra = [sum(a.shape[{d}] for a in ops[: k + 1]) for k in range(len(ops))]\n"
        )
        lines.append(f"        shape[{d}] = extra[-1]\n")
    elif kind == "slice" and e.get("piece") is not None:  # a split's piece, by its size
        d = int(e["dim"])
        lines += [
            f"        n = a0.shape[{d}]\n",
            "        size = _ke_number(_FITS[0], n)\n",
            f"        start = min(n, {int(e['piece'])} * size)\n",
            f"        shape[{d}] = min(n, start + size) - start\n",
            "        extra = [start]\n",
        ]
    elif kind == "slice":
        d = int(e["dim"])
        lines += [
            f"        n = a0.shape[{d}]\n",
            "        start, stop, step = slice(_ke_number(_FITS[0], n), _ke_number(_FITS[1], n), "
            f"{int(e['step'])}).indices(n)\n",
            f"        shape[{d}] = len(range(start, stop, step))\n",
            "        extra = [start]\n",
        ]
    elif kind in ("pad", "reflect", "replicate"):
        lines.append("        lefts = []\n")
        for i in range(_own(plan) // 2):
            d = R - 1 - i
            lines += [
                f"        n = a0.shape[{d}]\n",
                f"        left = _ke_number(_FITS[{2 * i}], n)\n",
                f"        shape[{d}] = max(0, n + left + _ke_number(_FITS[{2 * i + 1}], n))\n",
                "        lefts.append(left)\n",
            ]
        lines.append("        extra = lefts[::-1]\n")  # the kernel's: leading dimension first
    elif kind == "repeat":
        lines.append(f"        shape = [s * r for s, r in zip(a0.shape, {list(e['reps'])!r})]\n")
    elif kind == "roll":  # each shift in [0, n), as the kernel wraps it once
        lines += [
            f"        extra.append(_ke_number(_FITS[{i}], a0.shape[{d}]) % max(1, a0.shape[{d}]))\n"
            for i, d in enumerate(e["dims"])
        ]
    return lines


def _own(plan: Plan) -> int:
    """How many of the plan's numbers are the op's own (its operands' views' follow)."""
    e = plan.extra
    return int(e.get("own", len(e.get("ints", []))))


def _padded(plan: Plan, R: int) -> list[int]:
    """The dimensions a pad pads, leading first."""
    return list(range(R - _own(plan) // 2, R))


def _kernel(plan: Plan, R: int) -> str:
    """``_ke_move``: BLOCK output elements per program (see the module docstring)."""
    e = plan.extra
    kind = e["kind"]
    count = len(e["operands"])
    args = ["out_ptr", *(f"in{k}_ptr" for k in range(count)), "TOTAL"]
    args += [f"O{d}" for d in range(R)]
    args += [f"s{k}_{d}" for k in range(count) for d in range(R)]
    body = [
        "if I32:",
        "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)",
        "else:",
        "    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)",
        "mask = offs < TOTAL",
        "t = offs",
    ]
    for d in range(R - 1, 0, -1):
        body += [f"c{d} = t % O{d}", f"t = t // O{d}"]
    body.append("c0 = t")

    def offset(k: int, coords: dict) -> str:
        return " + ".join(f"{coords.get(d, f'c{d}')} * s{k}_{d}" for d in range(R))

    if kind in ("cat", "stack"):
        d = int(e["dim"])
        args += [f"e{k}" for k in range(count)]
        first = True
        for k in range(count):
            lo = "0" if k == 0 else f"e{k - 1}"
            body.append(f"inside = (c{d} >= {lo}) & (c{d} < e{k})")
            at = offset(k, {d: f"(c{d} - {lo})"})
            # each operand's values in the output's dtype (a cat promotes mixed dtypes)
            load = f"tl.load(in{k}_ptr + {at}, mask=mask & inside).to(out_ptr.dtype.element_ty)"
            if first:
                body.append(f"v = {load}")
                first = False
            else:
                body.append(f"v = tl.where(inside, {load}, v)")
    elif kind == "slice":
        d = int(e["dim"])
        args.append("start")
        at = f"(start + c{d} * {int(e['step'])})" if int(e["step"]) != 1 else f"(start + c{d})"
        body.append(f"v = tl.load(in0_ptr + {offset(0, {d: at})}, mask=mask)")
    elif kind in ("pad", "reflect", "replicate"):
        dims = _padded(plan, R)
        args += [f"n{d}" for d in dims] + [f"l{d}" for d in dims]
        inside = []
        for d in dims:
            body.append(f"i{d} = c{d} - l{d}")
            if kind == "reflect":  # torch's reflect pads are narrower than the input
                body.append(f"i{d} = tl.where(i{d} < 0, -i{d}, i{d})")
                body.append(f"i{d} = tl.where(i{d} >= n{d}, 2 * n{d} - 2 - i{d}, i{d})")
            elif kind == "replicate":
                body.append(f"i{d} = tl.minimum(tl.maximum(i{d}, 0), n{d} - 1)")
            else:
                inside.append(f"(i{d} >= 0) & (i{d} < n{d})")
        at = offset(0, {d: f"i{d}" for d in dims})
        if inside:
            fill = _literal(float(e.get("value", 0.0)))
            body.append(f"inside = {' & '.join(inside)}")
            body.append(f"v = tl.load(in0_ptr + {at}, mask=mask & inside, other={fill})")
        else:
            body.append(f"v = tl.load(in0_ptr + {at}, mask=mask)")
    elif kind == "repeat":
        dims = [d for d, r in enumerate(e["reps"]) if int(r) != 1]
        args += [f"n{d}" for d in dims]
        at = offset(0, {d: f"(c{d} % n{d})" for d in dims})
        body.append(f"v = tl.load(in0_ptr + {at}, mask=mask)")
    elif kind == "flip":
        at = offset(0, {d: f"(O{d} - 1 - c{d})" for d in e["dims"]})
        body.append(f"v = tl.load(in0_ptr + {at}, mask=mask)")
    elif kind == "roll":
        args += [f"r{k}" for k in range(len(e["dims"]))]
        rolled = {}
        for k, d in enumerate(e["dims"]):  # a dimension rolled twice is rolled by the sum
            body.append(f"i{d} = {rolled.get(d, f'c{d}')} - r{k}")
            body.append(f"i{d} = tl.where(i{d} < 0, i{d} + O{d}, i{d})")
            rolled[d] = f"i{d}"
        body.append(f"v = tl.load(in0_ptr + {offset(0, rolled)}, mask=mask)")
    elif kind == "view":
        body.append(f"v = tl.load(in0_ptr + {offset(0, {})}, mask=mask)")
    elif kind in ("tril", "triu"):  # what the diagonal cuts off is never read, written 0
        keep = "<=" if kind == "tril" else ">="
        body.append(f"keep = (c{R - 1} - c{R - 2}) {keep} {int(e['diagonal'])}")
        body.append(f"v = tl.load(in0_ptr + {offset(0, {})}, mask=mask & keep, other=0)")
    else:  # pragma: no cover - lowering_move makes no other kind
        raise ValueError(f"no move kernel for {kind}")
    body.append("tl.store(out_ptr + offs, v, mask=mask)")
    sig = ", ".join(args + ["I32: tl.constexpr", "BLOCK: tl.constexpr"])
    return "\n\n@triton.jit\ndef _ke_move(" + sig + "):\n" + "".join(f"    {s}\n" for s in body)


def _launch_args(plan: Plan, R: int) -> str:
    """The kernel's runtime arguments after the pointers, as the wrapper names them."""
    e = plan.extra
    kind = e["kind"]
    count = len(e["operands"])
    parts = ["total", "*shape"] + [f"*a{k}.stride()" for k in range(count)]
    if kind in ("cat", "stack", "slice", "roll"):
        parts.append("*extra")
    elif kind in ("pad", "reflect", "replicate"):
        parts += [f"a0.shape[{d}]" for d in _padded(plan, R)] + ["*extra"]
    elif kind == "repeat":
        parts += [f"a0.shape[{d}]" for d, r in enumerate(e["reps"]) if int(r) != 1]
    return ", ".join(parts)


def _source_move(plan: Plan, p: dict) -> str:
    e = plan.extra
    count = len(e["operands"])
    operands, R = _operand_lines(plan)
    ops = ", ".join(f"a{k}" for k in range(count))
    ret = "out" if int(e["rank"]) else "out.reshape(())"
    if e.get("flat"):
        ret = "out.reshape(flat.shape)"
    if e.get("merge"):  # a reshape after the op: neighbouring dimensions merged
        sizes = [" * ".join(f"out.shape[{d}]" for d in group) for group in e["merge"]]
        ret = f"out.reshape({', '.join(sizes)},)"
    fits = _fits(plan)
    body = "".join(operands) + f"        ops = ({ops},)\n" + "".join(_shape_lines(plan, R))
    sized = sorted({f[1] for f in fits if f[0] == "size"})
    if sized:  # numbers that are sizes of inputs, read at each call
        given = ", ".join(f"{name!r}: {name}" for name in sized)
        body = f"        fits = _ke_fits(_FITS, {{{given}}})\n" + body.replace("_FITS[", "fits[")
    return (
        _header(plan, p)
        + _kernel(plan, R)
        + _HELPERS
        + f"\n\n_PARAMS = {json.dumps(p, sort_keys=True)}\n_FITS = {json.dumps(fits)}\n"
        + _forward_head(plan)
        + "        p = _PARAMS\n"
        + body
        + "        out = torch.empty(shape, dtype=_ke_dtype(ops), device=a0.device)\n"
        + "        total = out.numel()\n"
        + f"        if total == 0:\n            return {ret}\n"
        + '        block = max(32, min(p["block"], triton.next_power_of_2(total)))\n'
        + "        grid = (triton.cdiv(total, block),)\n"
        + f"        _ke_move[grid](out, {ops}, {_launch_args(plan, R)}, "
        + 'I32=_ke_i32(out, *ops), BLOCK=block, num_warps=p["warps"])\n'
        + f"        return {ret}\n"
    )
