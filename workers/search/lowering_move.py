"""Ops that move elements along any dimension, as a kernel of their own (the ``move`` family):
``torch.cat`` and ``torch.stack`` along any dimension, a slice (with a step) or a piece of
``split`` / ``chunk`` along any dimension, ``F.pad`` (constant, reflect or replicate) of any
trailing dimensions, ``repeat``, ``flip`` and ``roll`` of any dimensions, ``tril`` and ``triu``
(outside a product's epilogue, which has its own); and a strided copy of a view of an input
(``x[:, ::2].contiguous()``, ``x[:, 3]``, ``x[:, None].expand(-1, 4, -1)``).

The row lowering moves columns only along the last dimension, inside one kernel
(:mod:`workers.search.lowering_slices`); where it refuses a graph, such an op alone is one
kernel here, and a graph with more around it is a chain (:func:`lowering_staged.lower_chain`):
the op's output written once, the pointwise ops and reductions around it in the row families'
kernels. Each output element's coordinates give, for every operand, where to read it (a
masked load, so nothing outside an operand is touched) or the pad value.

The operands are inputs (or the values an earlier kernel of the chain wrote), read through
their strides, possibly through views (``unsqueeze``, ``permute``, ``transpose``; a slice, a
``select``, an ``unbind`` piece, an ``expand``), which the wrapper takes as torch views (a
one-dimension roll traces as a cat of two slices of its input). The numbers the op and the views
take (slice bounds, indices, split sizes, pads, shifts) are kept as traced, the op's first, and
fitted against traces at other sizes (``trace._follow_sizes``): a ``chunk(2)`` bound is half the
dimension at every size. The wrapper computes the views' numbers with the template's helpers
(``_ke_slice``, ``_ke_piece``, ``_ke_select``, ``_ke_expand``, reading ``_FITS``)."""

from __future__ import annotations

import math
import operator
from fractions import Fraction

import torch

from workers.search.ir import IRNode, NoTemplate, Plan

aten = torch.ops.aten

_SPLITS = {aten.split.Tensor, aten.split_with_sizes.default}
_REFLECT = {
    aten.reflection_pad1d.default,
    aten.reflection_pad2d.default,
    aten.reflection_pad3d.default,
}
_REPLICATE = {
    aten.replication_pad1d.default,
    aten.replication_pad2d.default,
    aten.replication_pad3d.default,
}
# A triangle of the last two dimensions (a move alone; beside other ops, the row lowering
# computes it from coordinates).
BANDS = {aten.tril.default, aten.triu.default}
MOVES = {
    aten.cat.default,
    aten.stack.default,
    aten.slice.Tensor,
    aten.constant_pad_nd.default,
    aten.repeat.default,
    aten.flip.default,
    aten.roll.default,
    *BANDS,
    *_SPLITS,
    *_REFLECT,
    *_REPLICATE,
}
# Views the wrapper takes as torch views of an operand (none needs a size).
_VIEWS = {
    aten.unsqueeze.default,
    aten.squeeze.dim,
    aten.permute.default,
    aten.transpose.int,
    aten.t.default,
    aten.alias.default,
    aten.detach.default,
}
# Views that take numbers (fitted as the op's are); a piece of ``unbind`` (``getitem``) is one.
_SIZED = {aten.slice.Tensor, aten.select.int, aten.expand.default}
# A copy of a view is the view (the kernel reads it through its strides).
_COPIES = {aten.clone.default, aten.alias.default, aten.contiguous.default}
_UNBIND = {aten.unbind.int}
# Views that take sizes of their own: not read through (their reason is said, not the row's).
_RESHAPES = {aten.view.default, aten._unsafe_view.default, aten.reshape.default}
_BIG = 1 << 62  # ``x[a:]`` traces its end as 2**63 - 1: kept as "to the end"


def is_move(calls: list[torch.fx.Node]) -> bool:
    """Whether the graph moves elements: an op of MOVES, or a view that takes numbers (whose
    copy, where nothing else fits, is a strided copy)."""
    return any(n.target in MOVES or n.target in _SIZED or n.target in _UNBIND for n in calls)


def only_moves(calls: list[torch.fx.Node]) -> bool:
    """Whether the graph is ops that move elements, views and copies only: where
    :func:`lower_move` refuses such a graph, its reason is the one to give."""
    kinds = MOVES | _VIEWS | _SIZED | _COPIES | _UNBIND | _RESHAPES | {operator.getitem}
    return all(n.target in kinds for n in calls)


def _view_expr(node: torch.fx.Node, inner: str) -> str:
    t, a = node.target, node.args
    if t == aten.unsqueeze.default:
        return f"{inner}.unsqueeze({int(a[1])})"
    if t == aten.squeeze.dim:
        return f"{inner}.squeeze({int(a[1])})"
    if t == aten.permute.default:
        return f"{inner}.permute({tuple(int(d) for d in a[1])!r})"
    if t == aten.transpose.int:
        return f"{inner}.transpose({int(a[1])}, {int(a[2])})"
    if t == aten.t.default:
        return f"{inner}.t()"
    return inner  # alias, detach, a copy


def _sized_expr(node: torch.fx.Node, inner: str, ints: list) -> str:
    """The wrapper's expression for a view that takes numbers (a slice, a select, an unbind
    piece, an expand) of ``inner``: each number appended to ``ints`` (fitted later, read as
    ``_FITS[i]``)."""
    t, a = node.target, node.args
    if t is operator.getitem and a[0].target in _SPLITS:
        return _piece_expr(a[0], int(a[1]), inner, ints)
    if t is operator.getitem:  # a piece of unbind: a select
        t, a = aten.select.int, (a[0].args[0], a[0].args[1] if len(a[0].args) > 1 else 0, a[1])
    x = a[0].meta["val"]
    if t == aten.expand.default:
        out = node.meta["val"].shape
        lead = len(out) - x.dim()
        sizes = []
        for j, size in enumerate(out):
            if j >= lead and x.shape[j - lead] == size:
                sizes.append("-1")
            else:  # a number of its own, not a fraction of any dimension
                ints.append(_size(size, 1))
                sizes.append(f"_FITS[{len(ints) - 1}]")
        return f"_ke_expand({inner}, [{', '.join(sizes)}])"
    dim = _norm(int(a[1]) if len(a) > 1 else 0, x.dim())
    n = x.shape[dim]
    if t == aten.select.int:
        ints.append(_size(a[2], n))
        return f"_ke_select({inner}, {dim}, _FITS[{len(ints) - 1}])"
    start, end, step = _slice_args(a)
    ints += [_size(start, n), _size(end, n)]
    return f"_ke_slice({inner}, {dim}, _FITS[{len(ints) - 2}], _FITS[{len(ints) - 1}], {step})"


def _piece_expr(split: torch.fx.Node, piece: int, inner: str, ints: list) -> str:
    """The wrapper's expression for a piece of a split (or chunk) of ``inner``: a slice, by
    its size (``chunk(k)``'s pieces are ``ceil(D / k)`` wide: the size is the number that
    follows the sizes) or by the sizes given."""
    spec = _spec(split, piece, [split.args[0].meta["val"]], None)
    ints += spec["ints"]
    dim, at = spec["dim"], len(ints) - len(spec["ints"])
    if spec.get("piece") is not None:
        return f"_ke_piece({inner}, {dim}, _FITS[{at}], {piece})"
    return f"_ke_slice({inner}, {dim}, _FITS[{at}], _FITS[{at + 1}], 1)"


def _is_piece(node) -> bool:
    """Whether ``node`` is a piece of ``unbind`` (a select of its input) or of a split."""
    return (
        node.target is operator.getitem
        and isinstance(node.args[0], torch.fx.Node)
        and (node.args[0].target in _UNBIND or node.args[0].target in _SPLITS)
    )


def _read_through(node: torch.fx.Node) -> bool:
    """Whether the wrapper takes ``node`` as a torch view of its operand (a copy of a view too:
    the kernel reads it through its strides; a reshape that splits or merges dimensions)."""
    return (
        node.target in _VIEWS
        or node.target in _SIZED
        or node.target in _COPIES
        or node.target in _RESHAPES
        or _is_piece(node)
    )


def _regroup(before: tuple, after: tuple) -> list[tuple[list[int], list[int]]] | None:
    """How a reshape from ``before`` to ``after`` groups dimensions: pairs (dimensions of
    ``before``, dimensions of ``after``) of equal sizes, each one dimension split into several,
    several merged into one, or one kept; None where a group does both (``(6, 4) -> (4, 6)``)."""
    groups: list[tuple[list[int], list[int]]] = []
    i = j = 0
    while i < len(before) or j < len(after):
        if i == len(before) or j == len(after):  # trailing dimensions of 1
            rest_b, rest_a = list(range(i, len(before))), list(range(j, len(after)))
            if any(before[d] != 1 for d in rest_b) or any(after[d] != 1 for d in rest_a):
                return None
            if not groups:
                return None if rest_b and rest_a else [(rest_b, rest_a)]
            groups[-1][0].extend(rest_b)
            groups[-1][1].extend(rest_a)
            break
        bd, ad = [i], [j]
        pb, pa = before[i], after[j]
        i, j = i + 1, j + 1
        while pb != pa:
            if pb < pa and i < len(before):
                bd.append(i)
                pb *= before[i]
                i += 1
            elif pa < pb and j < len(after):
                ad.append(j)
                pa *= after[j]
                j += 1
            else:
                return None
        if len(bd) > 1 and len(ad) > 1:
            return None
        groups.append((bd, ad))
    return groups


def _reshape_expr(node: torch.fx.Node, inner: str, ints: list) -> str:
    """The wrapper's expression for a reshape of ``inner`` (``pixel_shuffle``'s view to six
    dimensions): merged dimensions flattened, a split one unflattened into sizes fitted against
    it (every part fitted: a part left ``-1`` could be another part at another size), the last
    group first so earlier dimensions keep their places;
    NoTemplate where a group of dimensions is both split and merged."""
    before = tuple(node.args[0].meta["val"].shape)
    after = tuple(node.meta["val"].shape)
    groups = _regroup(before, after)
    if groups is None:
        raise NoTemplate(
            f"a reshape from {list(before)} to {list(after)} before the op that moves elements; "
            "it reads reshapes that split one dimension or merge neighbouring ones"
        )
    if not before:  # a number viewed with dimensions of 1
        return f"{inner}.reshape({(1,) * len(after)!r})"
    expr = inner
    for bd, ad in reversed(groups):
        if len(bd) > 1:
            expr = f"{expr}.flatten({bd[0]}, {bd[-1]})"
        elif len(ad) > 1:
            parts = []
            for d in ad:
                ints.append(_size(after[d], before[bd[0]]))
                parts.append(f"_ke_number(_FITS[{len(ints) - 1}], {inner}.shape[{bd[0]}])")
            expr = f"{expr}.unflatten({bd[0]}, ({', '.join(parts)},))"
    return expr


def _operand(node, ph_ref: dict, seen: set, ints: list) -> str:
    """The wrapper's expression for an operand: an input, through views (the numbers those
    take appended to ``ints``)."""
    chain = []
    while isinstance(node, torch.fx.Node) and node.op == "call_function":
        if not _read_through(node):
            name = getattr(node.target, "__name__", node.target)
            raise NoTemplate(
                f"{name} before the op that moves elements; it moves inputs and their "
                "slices, selects, expands and size-free views"
            )
        chain.append(node)
        seen.add(node)
        node = node.args[0]
        if node.target in _UNBIND or node.target in _SPLITS:
            seen.add(node)
            node = node.args[0]
    if node not in ph_ref:
        raise NoTemplate("an operand of the op that moves elements is not a tensor input")
    expr = ph_ref[node]
    for view in reversed(chain):
        if view.target in _RESHAPES:
            expr = _reshape_expr(view, expr, ints)
            continue
        sized = view.target in _SIZED or _is_piece(view)
        expr = _sized_expr(view, expr, ints) if sized else _view_expr(view, expr)
    return expr


def _norm(dim: int, rank: int) -> int:
    return dim % rank if rank else 0


def _output(graph: torch.fx.Graph) -> tuple:
    """(the graph's one output past copies of it (a copy of a value is that value, written
    contiguous), those copies); NoTemplate where it returns several."""
    outs = next(n for n in graph.nodes if n.op == "output").args[0]
    outs = list(outs) if isinstance(outs, list | tuple) else [outs]
    if len(outs) != 1 or not isinstance(outs[0], torch.fx.Node):
        raise NoTemplate("several outputs beside the op that moves elements")
    copies: list = []
    res = _past_copies(outs[0], copies)
    merge = None
    if res.target in _RESHAPES and res.args[0].op != "placeholder":
        # A reshape keeps the elements' order: the kernel writes its operand's value
        # contiguous and the wrapper reshapes that (a ``repeat_interleave``: an expand, copied,
        # then its repeated dimension merged into the next).
        merge = _merges(tuple(res.args[0].meta["val"].shape), tuple(res.meta["val"].shape))
        if merge is None:
            raise NoTemplate(
                "a view that splits a dimension after the op that moves elements; a reshape "
                "after it may only merge neighbouring dimensions"
            )
        copies.append(res)
        res = _past_copies(res.args[0], copies)
    return res, copies, merge


def _past_copies(node: torch.fx.Node, copies: list) -> torch.fx.Node:
    """The value ``node`` copies (through copies of copies), each copy appended to ``copies``:
    a copy of a value is that value, written contiguous."""
    while node.target in _COPIES and node.args[0].op != "placeholder":
        copies.append(node)
        node = node.args[0]
    return node


def _merges(before: tuple, after: tuple) -> list[list[int]] | None:
    """The dimensions of ``before`` that make up each of ``after``'s, where ``after`` only
    merges neighbours (``(2, 3, 4) -> (6, 4)``: ``[[0, 1], [2]]``); None where it splits one."""
    groups, i = [], 0
    for size in after:
        group, prod = [], 1
        while i < len(before) and (not group or prod < size):
            group.append(i)
            prod *= before[i]
            i += 1
        if prod != size or not group:
            return None
        groups.append(group)
    rest = list(range(i, len(before)))
    if any(before[d] != 1 for d in rest) or (rest and not groups):
        return None
    if rest:
        groups[-1] += rest
    return groups


def _the_op(res: torch.fx.Node) -> tuple:
    """(the op that moves elements into the output, or None where the output is a view of an
    input (a strided copy); the piece of a split the output is, or None)."""
    if res.target is operator.getitem and res.args[0].target in _SPLITS:
        return res.args[0], int(res.args[1])  # (a split's piece alone: a slice of its own)
    if res.target in MOVES and res.target not in _SPLITS:
        return res, None
    if res.target in _VIEWS or res.target in _SIZED or _is_piece(res):
        return None, None
    name = getattr(res.target, "__name__", res.target)
    raise NoTemplate(f"{name} after the op that moves elements")


def lower_move(gm: torch.fx.GraphModule, refs: list[str]) -> Plan:
    """The ``move`` plan of a graph that is one such op on inputs or views of them, or a copy
    of such a view (see the module docstring), or NoTemplate saying why not."""
    graph = gm.graph
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    ph_ref = dict(zip(placeholders, refs, strict=True))
    calls = [n for n in graph.nodes if n.op == "call_function"]
    res, copies, merge = _output(graph)
    op, piece = _the_op(res)
    seen = {op, res, *copies}
    if op is None:
        tensors = [res]
    elif op.target in (aten.cat.default, aten.stack.default):
        tensors = list(op.args[0])
    else:
        tensors = [op.args[0]]
    vals = [a.meta["val"] for a in tensors]
    out_val = res.meta["val"]
    if op is not None and op.target == aten.cat.default and len({v.dim() for v in vals}) > 1:
        raise NoTemplate("a cat of tensors of different ranks (an empty 1-d one among them)")
    spec = {"kind": "view"} if op is None else _spec(op, piece, vals, out_val)
    ints = list(spec.get("ints", []))  # the op's numbers first, then its views'
    if op is None:
        seen.discard(res)  # the output's own views are the operand's
    operands = [_operand(a, ph_ref, seen, ints) for a in tensors]
    # (a split's and an unbind's other pieces stay in the graph, unused)
    extra = [n for n in calls if n not in seen and n.users]
    if extra:
        name = getattr(extra[0].target, "__name__", extra[0].target)
        raise NoTemplate(f"{name} beside the op that moves elements")
    # (a cat or stack of different dtypes: each operand's values are cast to the promoted one)
    plan = Plan(family="move", forward_args=[], init_source="", preamble="")
    refs_used = sorted({ph_ref[p] for p in placeholders if p.users}, key=refs.index)
    plan.nodes = [
        IRNode(id=i, kind="input", attrs={"ref": r, "role": "tile"})
        for i, r in enumerate(refs_used)
    ]
    plan.outputs = [0]
    plan.extra.update(spec, operands=operands, rank=out_val.dim(), ranks=[v.dim() for v in vals])
    plan.extra.update(ints=ints, own=len(spec.get("ints", [])), merge=merge)
    kind = {
        "pad": "constant pad",
        "reflect": "reflect pad",
        "replicate": "replicate pad",
        "view": "strided copy",
    }
    plan.summary = (
        f"{kind.get(spec['kind'], spec['kind'])} {_said(spec)}, "
        f"{len(operands)} operand(s) read in place"
        + (f", reshaped (dimensions {[g for g in merge if len(g) > 1]} merged)" if merge else "")
    )
    return plan


def _size(value: int, dim_size: int) -> list:
    """A number the op takes, with the size of the dimension it applies to: fitted later as a
    number or a fraction of that dimension plus a number (``trace._follow_sizes``)."""
    return [int(value), int(dim_size)]


def _spec(op: torch.fx.Node, piece: int | None, vals: list, out_val) -> dict:
    t, a = op.target, op.args
    x = vals[0]
    if t == aten.cat.default:
        return {"kind": "cat", "dim": _norm(int(a[1]) if len(a) > 1 else 0, out_val.dim())}
    if t == aten.stack.default:
        return {"kind": "stack", "dim": _norm(int(a[1]) if len(a) > 1 else 0, out_val.dim())}
    if t == aten.slice.Tensor:
        dim = _norm(int(a[1]) if len(a) > 1 else 0, x.dim())
        start, end, step = _slice_args(a)
        return {
            "kind": "slice",
            "dim": dim,
            "ints": [_size(start, x.shape[dim]), _size(end, x.shape[dim])],
            "step": step,
        }
    if t in _SPLITS:
        dim = _norm(int(a[2]) if len(a) > 2 else 0, x.dim())
        n = int(x.shape[dim])
        if t == aten.split.Tensor:
            # The piece's size is the number that follows the sizes (``chunk(k)`` splits into
            # pieces of ``ceil(D / k)``): its bounds are ``piece`` and ``piece + 1`` sizes in.
            size = int(a[1])
            return {
                "kind": "slice",
                "dim": dim,
                "ints": [_size(size, n)],
                "step": 1,
                "piece": piece,
            }
        sizes = [int(s) for s in a[1]]
        start, end = sum(sizes[:piece]), sum(sizes[: piece + 1])
        return {"kind": "slice", "dim": dim, "ints": [_size(start, n), _size(end, n)], "step": 1}
    if t in (aten.constant_pad_nd.default, *_REFLECT, *_REPLICATE):
        pads = [int(p) for p in a[1]]
        if len(pads) % 2 or len(pads) // 2 > x.dim():
            raise NoTemplate(f"a pad {pads} of a {x.dim()}-d tensor")
        kind = "pad" if t == aten.constant_pad_nd.default else "reflect"
        if t in _REPLICATE:
            kind = "replicate"
        value = float(a[2]) if kind == "pad" and len(a) > 2 and a[2] is not None else 0.0
        ints = [_size(p, x.shape[x.dim() - 1 - i // 2]) for i, p in enumerate(pads)]
        return {"kind": kind, "ints": ints, "value": value}
    if t == aten.repeat.default:
        reps = [int(r) for r in a[1]]
        return {"kind": "repeat", "reps": reps}
    if t == aten.flip.default:
        return {"kind": "flip", "dims": sorted({_norm(int(d), x.dim()) for d in a[1]})}
    if t == aten.roll.default:
        return _roll(a, x)
    if t in BANDS:
        kind = "tril" if t == aten.tril.default else "triu"
        if x.dim() < 2:
            raise NoTemplate(f"{kind} of a tensor of {x.dim()} dimension(s)")
        diagonal = a[1] if len(a) > 1 else op.kwargs.get("diagonal", 0)
        return {"kind": kind, "diagonal": int(diagonal)}
    raise NoTemplate(f"{t} is not an op that moves elements")  # not reached: MOVES


def _slice_args(a: tuple) -> tuple[int, int, int]:
    """A slice's (start, end, step) as traced (``x[a:]`` ends "to the end")."""
    start = a[2] if len(a) > 2 and a[2] is not None else 0
    end = a[3] if len(a) > 3 and a[3] is not None else _BIG
    step = int(a[4]) if len(a) > 4 else 1
    if step < 1:
        raise NoTemplate(f"a slice with step {step}")
    return int(start), min(int(end), _BIG), step


def _roll(a: tuple, x) -> dict:
    """A roll's spec: each shift with the dimension it rolls (a roll with no dimensions rolls
    the flattened tensor, ``flat``: its one dimension is the number of elements)."""
    shifts = [int(s) for s in a[1]]
    dims = [_norm(int(d), x.dim()) for d in (a[2] if len(a) > 2 else [])]
    if not dims:
        if len(shifts) != 1:
            raise NoTemplate(f"a roll of shifts {shifts} with no dimensions")
        return {"kind": "roll", "dims": [0], "ints": [_size(shifts[0], x.numel())], "flat": True}
    if len(dims) != len(shifts):
        raise NoTemplate(f"a roll of {len(shifts)} shifts along {len(dims)} dimensions")
    ints = [_size(s, x.shape[d]) for s, d in zip(shifts, dims, strict=True)]
    return {"kind": "roll", "dims": dims, "ints": ints}


def _said(spec: dict) -> str:
    kind = spec["kind"]
    if kind in ("cat", "stack", "slice"):
        return f"along dimension {spec['dim']}" + (
            f" (step {spec['step']})" if spec.get("step", 1) > 1 else ""
        )
    if kind in ("pad", "reflect", "replicate"):
        return f"{[v for v, _ in spec['ints']]}"
    if kind == "repeat":
        return f"by {spec['reps']}"
    if kind == "view":
        return "of a view of an input"
    if kind == "roll" and spec.get("flat"):
        return "of the flattened input"
    if kind in ("tril", "triu"):
        side = "and below" if kind == "tril" else "and above"
        return f"keeping diagonal {spec['diagonal']} {side} of the last two dimensions"
    return f"of dimensions {spec['dims']}"


def fit_ints(traced: list[list[list[int]]], sizes: list[dict] | None = None) -> list[list]:
    """Each of a plan's numbers as ``[a_num, a_den, c]`` or ``[a_num, a_den, c, up]``, the
    number being ``(D·a_num + up) // a_den + c`` (``D`` the size of the dimension it applies
    to; ``up`` how a fraction rounds: ``chunk(k)`` pieces are ``ceil(D / k)``, ``[k - 1, k]``
    with ``up = k - 1``) from the same numbers traced at several sizes (``traced[k][i] =
    [value, D]``); NoTemplate where one is neither a number nor such a fraction plus one.

    A number equal to a size of one of the forward's inputs at every traced size (``sizes[k]``:
    name -> shape) is that size, ``["size", name, dim]``, unless a plain fraction (``_plain``)
    fits too: minGPT slices its causal mask, buffered for ``max_seqlen``, to ``T = x.size(1)``,
    which at small sizes a fraction plus a number can also match."""
    fits = []
    for i, (value, dim) in enumerate(traced[0]):
        points = [t[i] for t in traced]
        if all(v == value for v, _ in points):
            fits.append([0, 1, int(value)])
            continue
        fit = None if all(d == dim for _, d in points) else _rounded_fit(points)
        size = _input_size([v for v, _ in points], sizes or [])
        if size is not None and (fit is None or not _plain(fit)):
            fit = size  # an input's size rather than a fraction that rounds, plus a number
        if fit is None and all(d == dim for _, d in points):
            raise NoTemplate("a number the op takes moves with sizes other than its dimension's")
        if fit is None:
            raise NoTemplate(
                "a slice bound, split size or pad that is neither a number nor a fraction of "
                "its dimension plus a number"
            )
        fits.append(fit)
    return fits


def _plain(fit: list) -> bool:
    """A fraction of the dimension with nothing added (``chunk``'s pieces, rounded up), or the
    whole dimension less a number (``x[:, 1:]``)."""
    num, den, c, *up = fit
    return c == 0 or (num == den and not up)


def _input_size(values: list[int], sizes: list[dict]) -> list | None:
    """``["size", name, dim]`` of the input whose dimension ``dim`` is ``values[k]`` at each
    traced size ``k``, or None."""
    if len(sizes) != len(values):
        return None
    for name, shape in sizes[0].items():
        for d in range(len(shape)):
            if all(
                len(s.get(name, ())) == len(shape) and s[name][d] == v
                for s, v in zip(sizes, values, strict=True)
            ):
                return ["size", name, d]
    return None


def _rounded_fit(points: list[list[int]]) -> list[int] | None:
    """The simplest ``[num, den, c(, up)]`` with ``(D·num + up) // den + c`` equal to each
    point's value at its ``D``: the smallest denominator, rounded down before up before
    anything else (``D // k`` and ``chunk``'s ``ceil(D / k)`` are the numbers torch takes)."""
    lo = min(points, key=lambda p: p[1])
    hi = max(points, key=lambda p: p[1])
    slope = Fraction(hi[0] - lo[0], hi[1] - lo[1])
    for den in range(1, 17):
        near = math.floor(slope * den)
        for num in (near, near + 1, near - 1, near + 2):
            for up in (0, den - 1, *range(1, den - 1)) if den > 1 else (0,):
                c = lo[0] - (lo[1] * num + up) // den
                if all((d * num + up) // den + c == v for v, d in points):
                    return [num, den, c] + ([up] if up else [])
    return None
