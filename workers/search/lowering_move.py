"""Ops that move elements along any dimension, as a kernel of their own (the ``move`` family):
``torch.cat`` and ``torch.stack`` along any dimension, a slice (with a step) or a piece of
``split`` / ``chunk`` along any dimension, ``F.pad`` (constant, reflect or replicate) of any
trailing dimensions, ``repeat`` and ``flip`` of any dimensions.

The row lowering moves columns only along the last dimension, inside one kernel
(:mod:`workers.search.lowering_slices`); where it refuses a graph, such an op alone is one
kernel here, and a graph with more around it is a chain (:func:`lowering_staged.lower_chain`):
the op's output written once, the pointwise ops and reductions around it in the row families'
kernels. Each output element's coordinates give, for every operand, where to read it (a
masked load, so nothing outside an operand is touched) or the pad value.

The operands are inputs (or the values an earlier kernel of the chain wrote), read through
their strides, possibly through views that need no sizes (``unsqueeze``, ``squeeze``,
``permute``, ``transpose``), which the wrapper takes as torch views. The numbers the op takes
(slice bounds, split sizes, pads, repeats) are kept as traced and fitted against traces at other
sizes (``trace._follow_sizes``): a ``chunk(2)`` bound is half the dimension at every size."""

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
MOVES = {
    aten.cat.default,
    aten.stack.default,
    aten.slice.Tensor,
    aten.constant_pad_nd.default,
    aten.repeat.default,
    aten.flip.default,
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
_BIG = 1 << 62  # ``x[a:]`` traces its end as 2**63 - 1: kept as "to the end"


def is_move(calls: list[torch.fx.Node]) -> bool:
    return any(n.target in MOVES for n in calls)


def only_moves(calls: list[torch.fx.Node]) -> bool:
    """Whether the graph is one op that moves elements and size-free views (or a split's
    piece): where :func:`lower_move` refuses such a graph, its reason is the one to give."""
    moves = [n for n in calls if n.target in MOVES]
    rest = [n for n in calls if n.target not in MOVES]
    return len(moves) == 1 and all(n.target in _VIEWS or n.target is operator.getitem for n in rest)


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
    return inner  # alias, detach


def _operand(node, ph_ref: dict, seen: set) -> str:
    """The wrapper's expression for an operand: an input, through size-free views."""
    chain = []
    while isinstance(node, torch.fx.Node) and node.op == "call_function":
        if node.target not in _VIEWS:
            name = getattr(node.target, "__name__", node.target)
            raise NoTemplate(f"{name} before the op that moves elements; it moves inputs")
        chain.append(node)
        seen.add(node)
        node = node.args[0]
    if node not in ph_ref:
        raise NoTemplate("an operand of the op that moves elements is not a tensor input")
    expr = ph_ref[node]
    for view in reversed(chain):
        expr = _view_expr(view, expr)
    return expr


def _norm(dim: int, rank: int) -> int:
    return dim % rank if rank else 0


def lower_move(gm: torch.fx.GraphModule, refs: list[str]) -> Plan:
    """The ``move`` plan of a graph that is one such op on inputs (see the module docstring),
    or NoTemplate saying why not."""
    graph = gm.graph
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    ph_ref = dict(zip(placeholders, refs, strict=True))
    calls = [n for n in graph.nodes if n.op == "call_function"]
    moves = [n for n in calls if n.target in MOVES]
    if len(moves) != 1:
        raise NoTemplate(f"{len(moves)} ops that move elements; one kernel moves once")
    op = moves[0]
    outs = next(n for n in graph.nodes if n.op == "output").args[0]
    outs = list(outs) if isinstance(outs, list | tuple) else [outs]
    if len(outs) != 1 or not isinstance(outs[0], torch.fx.Node):
        raise NoTemplate("several outputs beside the op that moves elements")
    res = outs[0]
    copies = []  # a copy of the op's (contiguous) output is that output
    while (
        res.target in (aten.clone.default, aten.alias.default) and res.args[0].op != "placeholder"
    ):
        copies.append(res)
        res = res.args[0]
    piece = None
    if op.target in _SPLITS:
        if res.target is not operator.getitem or res.args[0] is not op:
            raise NoTemplate("a split whose pieces are not the output")
        piece = int(res.args[1])
    elif res is not op:
        name = getattr(res.target, "__name__", res.target)
        raise NoTemplate(f"{name} after the op that moves elements")
    seen = {op, res, *copies}
    tensors = op.args[0] if op.target in (aten.cat.default, aten.stack.default) else [op.args[0]]
    operands = [_operand(a, ph_ref, seen) for a in tensors]
    # (a split's other pieces stay in the graph, unused)
    extra = [n for n in calls if n not in seen and n.users]
    if extra:
        name = getattr(extra[0].target, "__name__", extra[0].target)
        raise NoTemplate(f"{name} beside the op that moves elements")
    vals = [a.meta["val"] for a in tensors]
    out_val = res.meta["val"]
    if op.target == aten.cat.default and len({v.dim() for v in vals}) > 1:
        raise NoTemplate("a cat of tensors of different ranks (an empty 1-d one among them)")
    # (a cat or stack of different dtypes: each operand's values are cast to the promoted one)
    spec = _spec(op, piece, vals, out_val)
    plan = Plan(family="move", forward_args=[], init_source="", preamble="")
    refs_used = sorted({ph_ref[p] for p in placeholders if p.users}, key=refs.index)
    plan.nodes = [
        IRNode(id=i, kind="input", attrs={"ref": r, "role": "tile"})
        for i, r in enumerate(refs_used)
    ]
    plan.outputs = [0]
    plan.extra.update(spec, operands=operands, rank=out_val.dim(), ranks=[v.dim() for v in vals])
    kind = {"pad": "constant pad", "reflect": "reflect pad", "replicate": "replicate pad"}
    plan.summary = (
        f"{kind.get(spec['kind'], spec['kind'])} {_said(spec)}, "
        f"{len(operands)} operand(s) read in place"
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
        start = a[2] if len(a) > 2 and a[2] is not None else 0
        end = a[3] if len(a) > 3 and a[3] is not None else _BIG
        step = int(a[4]) if len(a) > 4 else 1
        if step < 1:
            raise NoTemplate(f"a slice with step {step}")
        end = min(int(end), _BIG)
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
    raise NoTemplate(f"{t} is not an op that moves elements")  # not reached: MOVES


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
    return f"of dimensions {spec['dims']}"


def fit_ints(traced: list[list[list[int]]]) -> list[list[int]]:
    """Each of a plan's numbers as ``[a_num, a_den, c]`` or ``[a_num, a_den, c, up]``, the
    number being ``(D·a_num + up) // a_den + c`` (``D`` the size of the dimension it applies
    to; ``up`` how a fraction rounds: ``chunk(k)`` pieces are ``ceil(D / k)``, ``[k - 1, k]``
    with ``up = k - 1``) from the same numbers traced at several sizes (``traced[k][i] =
    [value, D]``); NoTemplate where one is neither a number nor such a fraction plus one."""
    fits = []
    for i, (value, dim) in enumerate(traced[0]):
        points = [t[i] for t in traced]
        if all(v == value for v, _ in points):
            fits.append([0, 1, int(value)])
            continue
        if all(d == dim for _, d in points):
            raise NoTemplate("a number the op takes moves with sizes other than its dimension's")
        fit = _rounded_fit(points)
        if fit is None:
            raise NoTemplate(
                "a slice bound, split size or pad that is neither a number nor a fraction of "
                "its dimension plus a number"
            )
        fits.append(fit)
    return fits


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
