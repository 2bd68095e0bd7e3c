"""Recognise a problem's operator by tracing its reference, never by its file name.

The reference ``Model`` is built and run under a fake-tensor mode (no memory, any size) and
traced with ``make_fx`` into an ATen graph. That graph is lowered into a small expression IR
(inputs, constants, pointwise ops, last-dimension reductions) which the template generator
turns into Triton. The result is a :class:`Plan` naming the operator family, or a
:class:`NoTemplate` saying plainly why no template fits (e.g. a sort, or an op no template
expresses).

The lowering and the IR are in :mod:`workers.search.lowering`; they are re-exported here.
"""

from __future__ import annotations

import ast
import contextlib
import contextvars
import inspect
import itertools
import logging
import math
import re
from fractions import Fraction

from workers.search.ir import wider_than_row
from workers.search.lowering import (
    IRNode,
    NoTemplate,
    Plan,
    _columns,
    _Lowerer,
    refuse_convolutions,
)
from workers.search.lowering_attention import is_attention, lower_attention
from workers.search.lowering_conv import is_conv, lower_conv
from workers.search.lowering_move import BANDS, fit_ints, is_move, lower_move, only_moves
from workers.search.lowering_pool import is_pool, lower_pool
from workers.search.lowering_staged import MAX_STAGES, lower_staged, stage_ref
from workers.search.lowering_state import attach as attach_state
from workers.search.lowering_state import take_state_writes


def load_problem(source: str, *, name: str = "kernelevolve_problem") -> dict:
    """Execute a problem module's source and return its namespace."""
    namespace: dict = {"__name__": name}
    # Untrusted code: the portal reaches this only through trace_problem_confined (the sandbox).
    exec(compile(source, f"<{name}>", "exec"), namespace)  # noqa: S102
    for required in ("Model", "get_inputs", "get_init_inputs"):
        if required not in namespace:
            raise NoTemplate(f"the problem does not define {required} (KernelBench format)")
    return namespace


def trace_problem(source: str, train: bool = False) -> Plan:
    """Trace the reference and return a :class:`Plan`; raise :class:`NoTemplate` if none fits.
    The module runs in eval mode, as the gates run it, unless ``train`` (the workload's
    ``"mode": "train"``)."""
    token = _TRAIN.set(train)
    try:
        return _trace_problem(source)
    finally:
        _TRAIN.reset(token)


# The mode the module is traced in (every trace of one problem, at every size, in the same).
_TRAIN: contextvars.ContextVar[bool] = contextvars.ContextVar("ke_trace_train", default=False)
# Which kernel of how many the traces at other sizes are compared with ((0, 1): a single one).
_STAGE: contextvars.ContextVar[tuple[int, int]] = contextvars.ContextVar(
    "ke_trace_stage", default=(0, 1)
)


def _trace_problem(source: str) -> Plan:
    top, shapes = _trace(source, {})
    stages = top.stages or [top]
    for i, plan in enumerate(stages):
        # Every stage's constants and slices follow the sizes (a pad written out before a
        # softmax reads it is as wide as the row plus its columns at every width): each is
        # fitted against the same stage of the traces at other sizes.
        token = _STAGE.set((i, len(stages)))
        try:
            _follow_sizes(source, plan, shapes)
        finally:
            _STAGE.reset(token)
    if top.stages:
        first = top.stages[0]
        top.forward_args, top.init_source, top.preamble = (
            first.forward_args,
            first.init_source,
            first.preamble,
        )
        top.summary = f"{len(top.stages)} kernels: " + "; then ".join(
            stage.summary + (f", written as {stage_ref(j)}" if j < len(top.stages) - 1 else "")
            for j, stage in enumerate(top.stages)
        )
    return top


def _follow_sizes(source: str, plan: Plan, shapes: dict) -> None:
    """A kernel's constants computed from sizes, slice bounds and fixed widths, as the wrapper
    computes them at any size (each found by tracing again at other sizes)."""
    if plan.family in ("row", "elementwise") and any(n.kind == "const" for n in plan.nodes):
        _symbolic_constants(source, plan, shapes)
    if plan.family in ("row", "elementwise", "scan") and _slice_bounds(plan):
        _slice_offsets(source, plan)
    if "columns" in plan.extra:
        _fixed_columns(source, plan)
    if plan.family == "move" and plan.extra.get("ints"):
        _move_fits(source, plan, shapes)
    if plan.extra.get("scan_prefix", [1, 1, -1]) != [1, 1, -1]:
        raise NoTemplate(
            "a cumsum of a row's first columns other than all but the last (an exclusive "
            "cumsum is cat([zeros, cumsum(x[..., :-1])]))"
        )
    for j, p, q, off in plan.extra.get("narrow_outputs", []):
        if wider_than_row(p, q, off):
            plan.summary += f", output {j} {_columns(p, q, off)} columns wide"
        else:
            plan.summary += f", output {j} the first {_columns(p, q, off)} columns of each row"


def _fixed_columns(source: str, plan: Plan) -> None:
    """Rows as wide as an arange no input has (``F.one_hot(t, 16)``): the wrapper writes that
    width as traced, so it must not move with the problem's sizes (traced again with them
    doubled); one that does is refused in words."""
    sizes = _size_constants(load_problem(source))
    again = _trace_moved(source, {k: 2 * v for k, v in sizes.items()}, plan) if sizes else None
    if again is not None and again[0].extra.get("columns") != plan.extra["columns"]:
        raise NoTemplate(
            "an arange along the row whose length moves with the input sizes but is no input's "
            "width; templates take the rows' width from an input or a fixed number"
        )


def _move_fits(source: str, plan: Plan, shapes: dict) -> None:
    """The numbers a ``move`` kernel's op takes (slice bounds, split pieces, pads) as fractions
    of their dimension plus a number (``extra["fits"]``, :func:`lowering_move.fit_ints`): a
    ``chunk(2)`` piece ends at half the dimension at every size, ``x[:, 1:]`` one in from the
    start. Traced again with every size constant doubled and tripled (and at the tail case's
    sizes where a number moves); where the problem does not trace there (or traces as another
    op), the numbers stay as traced."""
    traced, sizes = [plan.extra["ints"]], [_inputs(shapes)]
    for scaled in _scaled_sizes(source):
        again = _trace_moved(source, scaled, plan)
        if again is None:
            return
        _same_operands(again[0], plan)
        if not _same_move(again[0], plan):
            return
        traced.append(again[0].extra["ints"])
        sizes.append(_inputs(again[1]))
    if any(len({t[i][0] for t in traced}) > 1 for i in range(len(traced[0]))):
        # A number that moves may be a fraction that rounds (a ``chunk(2)`` piece of 9 is 5
        # wide, ``x[:, : D // 2]`` 4): the tail case's sizes, which no block divides, say how.
        again = _trace_moved(source, _tail_sizes(source), plan)
        if again is not None and _same_move(again[0], plan):
            traced.append(again[0].extra["ints"])
            sizes.append(_inputs(again[1]))
    plan.extra["fits"] = fit_ints(traced, sizes)


def _inputs(shapes: dict) -> dict:
    """The forward's own inputs' shapes (not the values earlier kernels write)."""
    return {k: v for k, v in shapes.items() if not k.startswith("_ke_")}


def _same_move(other: Plan, plan: Plan) -> bool:
    """Whether a trace at other sizes moves elements as ``plan`` does, with as many numbers."""
    return (
        other.family == "move"
        and other.extra.get("kind") == plan.extra["kind"]
        and other.extra.get("merge") == plan.extra.get("merge")
        and len(other.extra.get("ints", [])) == len(plan.extra["ints"])
    )


def _same_operands(other: Plan, plan: Plan) -> None:
    """NoTemplate where a trace at other sizes moves another number of operands (pieces of an
    ``unbind`` of a dimension that grows): the candidate reads as many as traced."""
    count = len(plan.extra.get("operands", []))
    if other.family == "move" and len(other.extra.get("operands", [])) != count:
        raise NoTemplate(
            f"the op that moves elements takes {count} operands at the traced sizes and "
            f"{len(other.extra['operands'])} at others (pieces of a dimension that grows); "
            "templates take as many at every size"
        )


def _slice_bounds(plan: Plan) -> list:
    """Where the plan slices the row: its shifted reads, column bounds and narrow outputs, as
    fractions of the row."""
    return [_bound(plan, ref)[0] for ref in _bound_refs(plan)]


def _bound_refs(plan: Plan) -> list[tuple]:
    """Each place a plan holds a slice bound: ``(node, attr)`` or ``("narrow", index)``."""
    refs: list[tuple] = [(n, "shift") for n in plan.nodes if n.attrs.get("shift")]
    refs += [(n, "frac") for n in plan.nodes if n.op == "col_lt"]
    refs += [("narrow", i) for i in range(len(plan.extra.get("narrow_outputs", [])))]
    if "scan_prefix" in plan.extra:
        refs.append(("scan_prefix", None))
    return refs


def _bound(plan: Plan, ref: tuple) -> tuple[Fraction, int]:
    """A bound as (fraction of the row, columns added)."""
    if ref[0] == "narrow":
        _, p, q, off = plan.extra["narrow_outputs"][ref[1]]
    elif ref[0] == "scan_prefix":
        p, q, off = plan.extra["scan_prefix"]
    else:
        p, q, *rest = ref[0].attrs[ref[1]]
        off = rest[0] if rest else 0
    return Fraction(p, q), off


def _set_bound(plan: Plan, ref: tuple, frac: Fraction, off: int, up: int = 0) -> None:
    """Keep a bound as column ``(p·N + up) // q + off``; ``up`` only on a kernel's shifts and
    column tests (a narrow output or a scan prefix at a width that does not divide is refused
    by torch itself)."""
    if ref[0] == "narrow":
        plan.extra["narrow_outputs"][ref[1]][1:] = [frac.numerator, frac.denominator, off]
    elif ref[0] == "scan_prefix":
        plan.extra["scan_prefix"] = [frac.numerator, frac.denominator, off]
    else:
        bound = [frac.numerator, frac.denominator, off]
        ref[0].attrs[ref[1]] = bound + [up] if up else bound


def _slice_offsets(source: str, plan: Plan) -> None:
    """Slices are traced as fractions of the row (``chunk(2)`` splits at N/2 at every width);
    a bound that is a number of columns from either end (``x[..., 1:]``, ``narrow(-1, 0, n -
    1)``, a shift by one column through ``cat``) is a different fraction at other widths.
    Traced again with every size constant doubled and tripled, each bound's column is fitted
    as ``a·N + c`` (``a`` a fraction, ``c`` whole columns) and the plan keeps that; a bound
    that is neither (it moves otherwise with the sizes) is refused in words. Where ``a·N`` is
    not whole (an odd row), how it rounds is read off the tail case's sizes (``_rounding``)."""
    fits = _column_fits(source, plan)
    if fits is None:
        return
    refs = _bound_refs(plan)
    ups = _rounding(source, plan, refs, fits)
    for ref, (frac, off), up in zip(refs, fits, ups, strict=True):
        _set_bound(plan, ref, frac, off, up)


def _column_fits(source: str, plan: Plan) -> list[tuple[Fraction, int]] | None:
    """Each bound as ``(a, c)``: column ``a·N + c`` at every width (see ``_slice_offsets``), or
    None where the problem has no sizes to move."""
    moved = _scaled_sizes(source)
    if not moved:
        return None
    refs = _bound_refs(plan)
    traced = [plan]
    for k, scaled in zip((2, 3), moved, strict=True):
        again = _trace_moved(source, scaled, plan)
        if again is None:
            return None  # it traces only at its own sizes: nothing moves there
        traced.append(again[0])
        if k == 2 and _slice_bounds(again[0]) == _slice_bounds(plan):
            # Fractions of the row (the common case): one more trace is enough.
            return [_bound(plan, ref) for ref in refs]
    widths = [p.extra.get("row_width") for p in traced]
    lists = [[_bound(p, r) for r in _bound_refs(p)] for p in traced]
    fits = None
    if len({len(b) for b in lists}) == 1 and None not in widths and len(set(widths[:2])) == 2:
        fits = [_fit(widths, [b[i] for b in lists]) for i in range(len(refs))]
    if fits is None or None in fits:
        raise NoTemplate(
            "a slice bound that is neither a fraction of the row nor a number of columns from "
            "either end of it; templates slice at a·N + c columns"
        )
    return fits


def _scaled_sizes(source: str) -> list[dict]:
    """The problem's size constants (tuple shapes too, each element) doubled, then tripled: the
    overrides of the traces that show which numbers move with the sizes (none: no sizes)."""
    ns = load_problem(source)
    sizes, shapes = _size_constants(ns), _shape_constants(ns)
    if not sizes and not shapes:
        return []
    return [
        {
            **{name: k * v for name, v in sizes.items()},
            **{name: tuple(k * e for e in v) for name, v in shapes.items()},
        }
        for k in (2, 3)
    ]


def _tail_sizes(source: str) -> dict:
    """The sizes of the correctness gate's tail case (``contract.problem.edge_cases``: each
    size of 4 or more becomes a power of two plus one): a row width that does not divide."""
    from workers.contract.problem import tail_size

    ns = load_problem(source)
    out: dict = {k: tail_size(v) for k, v in _size_constants(ns).items()}
    out.update({k: tuple(tail_size(e) for e in v) for k, v in _shape_constants(ns).items()})
    return out


def _shape_constants(ns: dict) -> dict:
    """The problem's tuple-of-sizes module constants (``input_shape = (32768,)``)."""
    return {
        k: v
        for k, v in ns.items()
        if not k.startswith("_")
        and isinstance(v, tuple)
        and v
        and all(isinstance(e, int) and not isinstance(e, bool) and e >= 1 for e in v)
    }


def _rounding(source: str, plan: Plan, refs: list, fits: list) -> list[int]:
    """How each bound rounds where ``a·N`` is not whole: ``up`` in ``(p·N + up) // q``. A
    ``chunk(2)`` of 9 columns splits at 5 (``(N + 1) // 2``), ``x[..., : N // 2]`` at 4. Read
    off one more trace at the tail case's sizes; a bound that matches no rounding there is
    refused in words."""
    ups = [0] * len(refs)
    if all(frac.denominator == 1 for frac, _ in fits):
        return ups
    again = _trace_moved(source, _tail_sizes(source), plan)
    width = again[0].extra.get("row_width") if again else None
    tail_refs = _bound_refs(again[0]) if again else []
    if not width or len(tail_refs) != len(refs):
        return ups  # not traceable there: the gate's tail case says what happens
    for i, ((frac, off), tail_ref) in enumerate(zip(fits, tail_refs, strict=True)):
        got, got_off = _bound(again[0], tail_ref)
        col = got * width + got_off
        p, q = frac.numerator, frac.denominator
        match = [up for up in range(q) if (p * width + up) // q + off == col]
        if not match:
            raise NoTemplate(
                f"a slice bound at column {col} of {width} is neither {frac}·N rounded down nor "
                "up; templates slice at a·N + c columns"
            )
        ups[i] = match[0]
    return ups


def _fit(widths: list[int], bounds: list[tuple[Fraction, int]]) -> tuple[Fraction, int] | None:
    """``(a, c)`` with column ``a·N + c`` at each traced width ``N``, or None."""
    cols = [frac * w + off for (frac, off), w in zip(bounds, widths, strict=True)]
    a = (cols[1] - cols[0]) / (widths[1] - widths[0])
    c = cols[0] - a * widths[0]
    if c.denominator != 1 or a.denominator > 64 or not -4 <= a <= 4:
        return None
    if any(a * w + c != col for w, col in zip(widths, cols, strict=True)):
        return None
    return a, int(c)


def _trace(source: str, overrides: dict) -> tuple[Plan, dict]:
    """The plan at the problem's sizes (its module constants replaced by ``overrides``), and
    the shape of each tensor the forward takes (by name)."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.func import functional_call
    from torch.fx.experimental.proxy_tensor import make_fx

    ns = load_problem(source)
    ns.update(overrides)
    model_cls = ns["Model"]
    try:
        with FakeTensorMode(allow_non_fake_inputs=True):
            model = model_cls(*ns["get_init_inputs"]())
            model.train(_TRAIN.get())  # eval unless the workload trains (as the gates run it)
            # A Python number among the inputs (``forward(self, A, s: float)``) is traced as a
            # 0-d tensor, so the graph keeps it as an input instead of baking in its value.
            inputs = [
                torch.tensor(float(x))
                if isinstance(x, int | float) and not isinstance(x, bool)
                else x
                for x in ns["get_inputs"]()
            ]
            # Detached: the trace is of the forward alone (a class weight of ``nll_loss`` that
            # requires grad fails autograd's check before any decomposition sees it).
            named = {**dict(model.named_parameters()), **dict(model.named_buffers())}
            state = {k: v.detach() for k, v in named.items()}
            names = list(state)

            def call(params, *args):
                return functional_call(model, params, args)

            with _composites_as_reductions():
                gm = make_fx(call, decomposition_table=_pointwise_decompositions())(state, *inputs)
            _functional_in_place(gm)
            _view_round_trips(gm)
            _views_before_pointwise(gm)
    except NoTemplate:
        raise
    except Exception as exc:  # noqa: BLE001 - any tracing failure means no template
        if type(exc).__name__ == "DynamicOutputShapeException":
            raise NoTemplate(
                f"the reference uses {exc}: its output's shape depends on the values; "
                "no template fits"
            ) from exc
        if type(exc).__name__ == "DataDependentOutputException":
            # .item(), a Python if on a tensor, a check that raises on bad values
            # (F.gaussian_nll_loss checks var >= 0)
            raise NoTemplate(
                f"the reference reads a tensor's value on the host ({exc}: .item(), an if on a "
                "tensor, a check of the values); a kernel's output cannot steer the host's "
                "code, no template fits"
            ) from exc
        raise NoTemplate(f"the reference could not be traced: {type(exc).__name__}: {exc}") from exc
    _scalar_constants(gm)  # outside the fake mode: the numbers are read

    forward_args = [p for p in inspect.signature(model_cls.forward).parameters if p != "self"]
    if any(
        inspect.signature(model_cls.forward).parameters[p].kind
        in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
        for p in forward_args
    ):
        raise NoTemplate("the reference forward takes *args/**kwargs; no template fits")
    refs = [_attribute(n) for n in names] + forward_args[: len(inputs)]
    init_source, preamble = _copy_init(source)
    writes = take_state_writes(gm, refs)  # buffers the forward updates: outputs too
    plan = _lower_any(gm, refs)
    renamed = candidate_args(forward_args, plan_families(plan))
    if renamed != forward_args:  # an argument a wrapper binds: lowered again under its new name
        original, forward_args = forward_args, renamed
        refs = [_attribute(n) for n in names] + forward_args[: len(inputs)]
        plan = _lower_any(gm, refs)  # (the state writes are the module's: names kept)
        plan.extra["arg_names"] = original  # the names the candidate's forward takes
    attach_state(plan, writes, _body(plan))
    shapes = {
        name: tuple(int(d) for d in x.shape)
        for name, x in zip(forward_args, inputs, strict=False)
        if isinstance(x, torch.Tensor) and x.dim() > 0
    }
    for i, stage in enumerate(plan.stages or [plan]):
        stage.forward_args = forward_args + [stage_ref(j) for j in range(i)]
        stage.init_source = init_source
        stage.preamble = preamble
    for j, shape in enumerate(plan.extra.get("stage_shapes", [])):  # the last stage's sizes
        shapes[stage_ref(j)] = tuple(shape)  # may be an earlier stage's output's
    return plan, shapes


# The names each family's wrapper binds in a candidate's forward (its parameters ``p``, its
# output ``out``, the sizes ``M``, ``N``, ``K``, launch numbers, views of the operands): a
# reference's forward argument named alike would be overwritten before the wrapper reads it (an
# einsum over ``p`` and ``v`` read the parameters' dict as its first operand); so would one named
# after a module the wrappers use (``math``, ``triton``) in every family, or one the wrappers
# number (``in0``, ``out0``, ``a1``, ``s2_0``, ``_ke_s1``). Tests hold every family's wrapper
# to its list (test_argument_names.py).
WRAPPER_NAMES: dict[str, frozenset[str]] = {
    family: frozenset(names.split())
    for family, names in {
        "elementwise": "L0 L1 L2 L3 M N block dt grid n odt rows shape warps",
        "row": "K L0 L1 L2 L3 M N Q1 VL block_n const count dt ev_t ev_v fuse grid hints i32 kc "
        "level mc nc odt one_pass part programs rows seg segs sp stages tiles tree vc warps",
        "scan": "K M N block blocks dt odt p part per phase rows segs tiles",
        "cross_entropy": "M V block_v loss out p t2 valid x2",
        "pool": "block ceil dilation divisor flags geometry grid include_pad kernel kp kwp lead "
        "out outs p padding sizes stride total window xin",
        "conv": "B K M batched bias bias_arg block_k block_m block_n cin cin_g cl cout_g dilation "
        "dot grid groups kernel kslice layout odt out output_padding outs p padding phases "
        "precision qs room sizes stride swg swi swo taps w5 wt x5 xin",
        "matmul": "BT K M N al3 b3 bl3 block_k block_m block_n kb_per odt oshape out p part "
        "precision presplit rbm rbn rtiles split stages stride_bb tiles upcast warps",
        "move": "block extra grid ops out p shape total",
        "attention": "B D HKV HQ TK TQ block_d block_m block_n block_r chunk fma full grid groups "
        "kk mk ml ms narrow off out p part pre precision programs qq rows scale split stages "
        "upcast vv warps",
    }.items()
}
MODULES = frozenset("F math nn tl torch triton".split())  # the candidates' own imports


def plan_families(plan: Plan) -> list[str]:
    """The families whose wrappers a candidate of ``plan`` runs (each stage's)."""
    names = [plan.family] + [stage.family for stage in plan.stages]
    return sorted({f for name in names for f in name.split("+") if f in WRAPPER_NAMES})


def candidate_args(names: list[str], families: list[str]) -> list[str]:
    """The reference's forward arguments as a candidate of ``families`` names them: each the
    same, unless one of their wrappers binds that name (``wrapper_binds``), then with
    underscores added until it is free (a candidate is called positionally, as the reference
    is)."""
    out: list[str] = []
    for name in names:
        new = name
        while wrapper_binds(new, families) or new in out or (new != name and new in names):
            new += "_"
        out.append(new)
    return out


def wrapper_binds(name: str, families: list[str]) -> bool:
    """Whether a wrapper of one of ``families`` binds ``name``: listed, a module, or a name
    the wrappers number."""
    numbered = re.fullmatch(r"(in|out|a|s)\d+(_\d+)?|_ke_\w*", name)
    listed = any(name in WRAPPER_NAMES[f] for f in families if f in WRAPPER_NAMES)
    return listed or name in MODULES or numbered is not None


def _lower_any(gm, refs: list[str]) -> Plan:
    """The plan of the traced graph ``gm`` whose inputs the candidate reads as ``refs``."""
    try:
        return _lower(gm, refs)
    except NoTemplate as exc:  # products with more around them: a chain of kernels
        return lower_staged(gm, refs, _lower, exc)


def _attribute(name: str) -> str:
    """A parameter's or buffer's dotted name as Python the candidate reads it by: a layer of
    an ``nn.Sequential`` or ``nn.ModuleList`` by its index (``network.0.weight`` ->
    ``self.network[0].weight``)."""
    return "self" + "".join(f"[{p}]" if p.isdigit() else f".{p}" for p in name.split("."))


def _lower(gm, refs: list[str]) -> Plan:
    """The single-kernel plan of a traced graph (its family's lowering)."""
    plan = _lower_graph(gm, refs)
    fixed = _cast_dtype(gm)
    if fixed and plan.family in _CASTING and not plan.extra.get("index_outputs"):
        plan.extra["out_dtype"] = fixed
    return plan


# Families whose wrappers allocate their outputs in ``odt`` (:func:`templates.common._dtype_line`).
_CASTING = ("row", "elementwise", "scan")


def _cast_dtype(gm) -> str | None:
    """The dtype the reference casts its floating outputs to (``x.half()``,
    ``.to(torch.bfloat16)``), as ``torch`` names it, where that is not the inputs' own. Traced
    with float32 inputs, a floating output of another dtype can only come from such a cast; a
    cast to float32 reads as "the inputs' dtype" (``x.float().sum().to(x.dtype)``), so it is
    left to follow them. Outputs that are all booleans or all of one integer dtype (``(x >
    0).any(-1)``, ``torch.round(x / s).to(torch.int8)``) are allocated in it (the kernel
    computes in floating point; the store converts, as torch's cast does: nonzero is True, an
    integer truncated towards zero)."""
    import torch

    out = next(n for n in gm.graph.nodes if n.op == "output").args[0]
    outs = out if isinstance(out, list | tuple) else [out]
    dtypes, others = set(), set()
    for node in outs:
        val = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
        if isinstance(val, torch.Tensor) and val.is_floating_point():
            dtypes.add(val.dtype)
        elif isinstance(val, torch.Tensor):
            others.add(val.dtype)
    if others:
        return str(others.pop()) if len(others) == 1 and not dtypes else None
    ins = {
        n.meta["val"].dtype
        for n in gm.graph.nodes
        if n.op == "placeholder"
        and isinstance(n.meta.get("val"), torch.Tensor)
        and n.meta["val"].is_floating_point()
    }
    if len(dtypes) != 1 or dtypes <= ins | {torch.float32}:
        return None
    return str(dtypes.pop())


def _lower_graph(gm, refs: list[str]) -> Plan:
    calls = [n for n in gm.graph.nodes if n.op == "call_function"]
    if is_conv(calls):  # alone, else a stage of a chain (lowering_staged cuts around it)
        return lower_conv(gm, refs)
    refuse_convolutions(calls)  # any other (before any family's own reasons)
    if is_attention(calls):
        return lower_attention(gm, refs)
    if is_pool(calls):
        return lower_pool(gm, refs)
    if only_moves(calls) and any(n.target in BANDS for n in calls):
        # A tril / triu and moves alone: the move kernel never reads what the diagonal cuts
        # off (the row lowering computes it from coordinates, reading every element).
        try:
            return lower_move(gm, refs)
        except NoTemplate:
            pass
    try:
        return _Lowerer(gm, refs).lower()
    except NoTemplate as exc:
        if not (is_move(calls) or only_moves(calls)):
            raise
        # An op that moves elements other than along the row (a cat along dimension 1, a
        # reflect pad): a kernel of its own where it is all the graph does (else the row
        # lowering's reason stands, and the chains cut the graph around the op).
        try:
            return lower_move(gm, refs)
        except NoTemplate as why:
            raise (why if only_moves(calls) else exc) from None


def _body(plan: Plan) -> Plan:
    """The kernel that writes a staged plan's outputs (and so its module state): the last
    stage, else the plan itself."""
    return plan.stages[-1] if plan.stages else plan


# A constant the trace computed from a size, as the wrapper computes it again at any size.
_SIZE_FORMS = (
    (lambda d: d, "float({})"),
    (lambda d: 1.0 / d, "1.0 / {}"),
    (lambda d: math.sqrt(d), "math.sqrt({})"),
    (lambda d: 1.0 / math.sqrt(d), "1.0 / math.sqrt({})"),
)


def _symbolic_constants(source: str, plan: Plan, shapes: dict) -> None:
    """Constants of ``plan`` that the trace computed from the inputs' sizes (``x.sum() /
    x.shape[0]``, a KL divergence's ``batchmean``, ``x / math.sqrt(x.size(-1))``) become number
    inputs the wrapper computes from the shapes at run time; the rest stay literals.

    Which constants come from sizes is found by tracing again with every size constant of the
    problem moved (by a different amount each): a constant that moves with them is matched to
    a size of an input (or its number of elements) in one of a few forms (n, 1/n, sqrt(n),
    1/sqrt(n)) at both sizes. One that moves but matches none is refused in words: at any
    other size than the traced one the kernel would compute something else."""
    ns = load_problem(source)
    sizes = _size_constants(ns)
    if not sizes:
        return
    # Each size moved by a different amount; by multiples of a step where the problem needs
    # sizes that divide (``n_embd % n_head == 0``).
    for step in _SIZE_STEPS:
        moved = {k: v + step * (1 + i) for i, (k, v) in enumerate(sorted(sizes.items()))}
        again = _trace_moved(source, moved, plan)
        if again is not None:
            break
    if again is None:
        return  # the problem does not trace at other sizes: keep the traced constants
    other, other_shapes = again
    if [(n.kind, n.op) for n in other.nodes] != [(n.kind, n.op) for n in plan.nodes]:
        return
    for node, again in zip(plan.nodes, other.nodes, strict=True):
        if node.kind != "const" or _close(node.value, again.value):
            continue
        expr = _size_expression(node.value, again.value, shapes, other_shapes)
        if expr is None:
            raise NoTemplate(
                f"a constant computed from the input sizes ({node.value:g} at the traced sizes, "
                f"{again.value:g} at others) in a form the templates cannot compute at run time"
            )
        node.kind, node.value = "input", None
        node.attrs = {"ref": expr, "role": "scalar", "from_sizes": True}
        node.cat = "const"
    if any(n.attrs.get("from_sizes") for n in plan.nodes):
        plan.summary += ", constants computed from the input sizes at run time"


_SIZE_STEPS = (1, 2, 4, 8, 16, 64)


def _trace_moved(
    source: str, overrides: dict, like: Plan | None = None
) -> tuple[Plan, dict] | None:
    """``_trace`` at other sizes, or None where the problem does not trace there.

    Where it does not, or traces as a kernel unlike ``like``, the constants that bound a size
    without being one move with the sizes too, the largest first: minGPT's ``max_seqlen``
    (its causal mask's length) must stay at least ``seq_len``, and a ``seq_len`` that reaches
    it drops the mask's slice from the graph."""
    first = _trace_moved_once(source, overrides)
    if first is not None and (like is None or _alike(first[0], like)):
        return first
    ns = load_problem(source)
    ratios = [
        v / ns[k]
        for k, v in overrides.items()
        if isinstance(v, int) and isinstance(ns.get(k), int) and ns[k] > 0
    ]
    ratio = max(ratios, default=1.0)
    if ratio <= 1:
        return first
    bounds = sorted(
        (
            k
            for k, v in ns.items()
            if k not in overrides
            and not k.startswith("_")
            and isinstance(v, int)
            and not isinstance(v, bool)
            and v > 1
        ),
        key=lambda k: -ns[k],
    )[:_MAX_BOUNDS]
    moved = dict(overrides)
    for name in bounds:
        # More than in proportion, by an amount that grows faster than the sizes: a number
        # that follows the sizes (a slice to ``T``) is then no fraction of the bound's length
        # at every traced size, and is told apart from one that is (a fit by fractions rounds
        # away a fixed excess).
        moved[name] = math.ceil(ns[name] * ratio) + 8 * math.ceil(ratio) ** 2
        again = _trace_moved_once(source, moved)
        if again is not None and (like is None or _alike(again[0], like)):
            return again
    return first


# How many constants that bound the sizes are tried (each one more trace).
_MAX_BOUNDS = 3


def _alike(other: Plan, plan: Plan) -> bool:
    """Whether a trace at other sizes is the same kernel as ``plan`` (its values differ)."""
    return (
        other.family == plan.family
        and [(n.kind, n.op) for n in other.nodes] == [(n.kind, n.op) for n in plan.nodes]
        and other.extra.get("kind") == plan.extra.get("kind")
        and len(other.extra.get("ints", [])) == len(plan.extra.get("ints", []))
    )


def _trace_moved_once(source: str, overrides: dict) -> tuple[Plan, dict] | None:
    """``_trace`` at other sizes, or None where the problem does not trace there (sizes that
    must agree, a broadcast, fail loudly in the fake-tensor log: kept quiet here)."""
    quiet = logging.getLogger("torch._subclasses.fake_tensor")
    level = quiet.level
    quiet.setLevel(logging.CRITICAL)
    try:
        plan, shapes = _trace(source, overrides)
        index, count = _STAGE.get()
        stages = plan.stages or [plan]
        if len(stages) != count:
            return None  # cut into other kernels at these sizes: nothing to compare with
        return stages[index], shapes
    except NoTemplate:
        return None
    finally:
        quiet.setLevel(level)


def _size_expression(a: float, b: float, shapes: dict, other: dict) -> str | None:
    for name, shape in shapes.items():
        again = other.get(name)
        if again is None or len(again) != len(shape):
            continue
        sizes = [(f"{name}.shape[{k}]", shape[k], again[k]) for k in range(len(shape))]
        sizes.append((f"{name}.numel()", math.prod(shape), math.prod(again)))
        for expr, d1, d2 in sizes:
            if d1 <= 0 or d2 <= 0:
                continue
            for form, text in _SIZE_FORMS:
                if _close(form(d1), a) and _close(form(d2), b):
                    return text.format(expr)
    # A number times one of those forms of a size: ``1 / math.sqrt(k.size(-1))`` of heads
    # split from the input (``n_embd // n_head`` columns) is ``sqrt(n_head) / sqrt(n_embd)``.
    for name, shape in shapes.items():
        again = other.get(name)
        if again is None or len(again) != len(shape):
            continue
        for k in range(len(shape)):
            d1, d2 = shape[k], again[k]
            if d1 <= 0 or d2 <= 0 or d1 == d2:
                continue
            for form, text in _SIZE_FORMS[1:]:
                scale = a / form(d1)
                if scale and _close(scale * form(d2), b):
                    return f"{scale!r} * " + text.format(f"{name}.shape[{k}]")
    # The difference of two sizes of one input (a KV cache's keys less its queries, the offset
    # of a causal mask over the last queries)
    for name, shape in shapes.items():
        again = other.get(name)
        if again is None or len(again) != len(shape):
            continue
        for i, j in itertools.permutations(range(len(shape)), 2):
            if _close(shape[i] - shape[j], a) and _close(again[i] - again[j], b):
                return f"float({name}.shape[{i}] - {name}.shape[{j}])"
    return None


def _close(x: float | None, y: float | None) -> bool:
    if x is None or y is None:
        return x is y
    return math.isclose(x, y, rel_tol=1e-6, abs_tol=1e-12)


def _size_constants(ns: dict) -> dict:
    """The problem's int module constants that change an input's shape."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    def shapes(overrides: dict):
        saved = {k: ns[k] for k in overrides}
        ns.update(overrides)
        try:
            with FakeTensorMode(allow_non_fake_inputs=True):
                return [
                    tuple(x.shape) if isinstance(x, torch.Tensor) else None
                    for x in ns["get_inputs"]()
                ]
        finally:
            ns.update(saved)

    ints = {
        k: v
        for k, v in ns.items()
        if not k.startswith("_") and isinstance(v, int) and not isinstance(v, bool) and v >= 1
    }
    try:
        base = shapes({})
    except Exception:  # noqa: BLE001 - then nothing is known to be a size
        return {}
    found = {}
    for k, v in ints.items():
        try:
            if shapes({k: v + 1}) != base:
                found[k] = v
        except Exception:  # noqa: BLE001 - e.g. a constant that must stay even
            continue
    return found


def _per_channel(out, weight, bias):
    """``out * weight + bias`` with both along dimension 1 (a norm's affine per channel)."""
    along_channels = (1, -1) + (1,) * (out.dim() - 2)
    if weight is not None:
        out = out * weight.view(along_channels)
    if bias is not None:
        out = out + bias.view(along_channels)
    return out


# Pointwise functions ATen writes as other pointwise ops, the way PyTorch's own reference
# decompositions write them (so the candidate computes what torch computes: lerp's two forms
# around a weight of 0.5, logaddexp's care of infinities). Only those whose result does not
# depend on the dtype the trace runs in: ``nan_to_num``'s default bounds are the dtype's own
# largest values, which a decomposition would bake in as float32's (the lowering writes it).
# (Those whose decompositions write ``prims`` ops, hypot, fmax, copysign, isnan and others,
# the lowering writes itself.)
_DECOMPOSED = (
    "lerp", "logaddexp", "logaddexp2", "addcmul", "addcdiv", "celu", "threshold",
    "hardshrink", "softshrink", "logit", "sinc", "frac", "sgn", "_prelu_kernel",
    "logical_and", "logical_or", "logical_xor", "logical_not", "isinf", "soft_margin_loss",
)  # fmt: skip

# Rearrangements ATen writes as one op, decomposed into the view, permute and copy they are
# (the move family writes those): pixel_shuffle(x, r) is a view to six dimensions, a permute
# and a contiguous copy.
_MOVES_DECOMPOSED = ("pixel_shuffle", "pixel_unshuffle", "channel_shuffle")
# Boolean reductions, as ATen's references write them: ``any`` a sum of the booleans compared
# with 0, ``all`` that of their negation.
_REDUCTIONS_DECOMPOSED = ("any", "all")


def _shape_views() -> set:
    """ATen's views that only reshape (the same elements in the same order)."""
    import torch

    aten = torch.ops.aten
    return {
        aten.view.default, aten.reshape.default, aten._unsafe_view.default,
        aten.squeeze.dim, aten.squeeze.dims, aten.unsqueeze.default,
    }  # fmt: skip


def _view_round_trips(gm) -> None:
    """Views of views that come back to the first one's input shape (torch's 2-d loss views
    ``[N, C, d]`` logits as ``[N, C, 1, d]``, the decomposition squeezes them back) read as
    that input itself: the same elements in the same order, and no change of the rows' shape
    for the lowering to refuse."""
    import torch

    views = _shape_views()
    for n in list(gm.graph.nodes):
        if n.op != "call_function" or n.target not in views:
            continue
        src = n.args[0]
        while isinstance(src, torch.fx.Node) and src.op == "call_function" and src.target in views:
            src = src.args[0]
        if src is n.args[0] or not isinstance(src, torch.fx.Node):
            continue
        val, was = n.meta.get("val"), src.meta.get("val")
        if isinstance(val, torch.Tensor) and isinstance(was, torch.Tensor):
            if tuple(val.shape) == tuple(was.shape) and val.stride() == was.stride():
                n.replace_all_uses_with(src)
    for n in reversed(list(gm.graph.nodes)):  # the views no one reads any more
        if n.op == "call_function" and n.target in views and not n.users:
            gm.graph.erase_node(n)
    gm.recompile()


def _views_before_pointwise(gm) -> None:
    """A pointwise op on an input, viewed with 1s inserted and then broadcast against a wider
    value (``(x * 2)[:, :, None] - y[:, None]``, ``y.exp().view(1, r, m)``), becomes the op on
    the input's view: the same elements, computed where they are read. The kernel then reads
    the input through its strides instead of a chain writing the op's value first. Only views
    that insert or drop 1s, of ops whose tensor operands all have the op's own shape."""
    import torch

    aten = torch.ops.aten
    views = _shape_views()

    def pointwise(n) -> bool:
        t = n.target
        if n.op != "call_function" or not isinstance(t, torch._ops.OpOverload):
            return False
        if torch.Tag.nondeterministic_seeded in t.tags or t._schema.is_mutable:
            return False  # (an in-place op moved onto a view would write the input)
        return torch.Tag.pointwise in t.tags or t == aten._to_copy.default

    def ones_only(n) -> bool:
        before, after = n.args[0].meta.get("val"), n.meta.get("val")
        if not isinstance(before, torch.Tensor) or not isinstance(after, torch.Tensor):
            return False
        return [d for d in before.shape if d != 1] == [d for d in after.shape if d != 1]

    def broadcast(n) -> bool:  # read by pointwise ops, one of whose values is wider than it
        val = n.meta["val"]
        for u in n.users:
            out = u.meta.get("val")
            if not pointwise(u) or not isinstance(out, torch.Tensor):
                continue
            if out.numel() > val.numel() or (out.shape == val.shape and broadcast(u)):
                return True
        return False

    changed = True
    while changed:
        changed = False
        for v in list(gm.graph.nodes):
            if v.op != "call_function" or v.target not in views or not v.users:
                continue
            src = v.args[0]
            if not isinstance(src, torch.fx.Node) or not pointwise(src) or not ones_only(v):
                continue
            if not broadcast(v):
                continue
            shape = tuple(src.meta["val"].shape)
            operands = [a for a in src.args if isinstance(a, torch.fx.Node)]
            if not operands or any(
                not isinstance(a.meta.get("val"), torch.Tensor)
                or (a.meta["val"].dim() and tuple(a.meta["val"].shape) != shape)
                for a in operands
            ):
                continue
            with gm.graph.inserting_before(v):
                args = []
                for a in src.args:
                    if isinstance(a, torch.fx.Node) and a.meta["val"].dim():
                        viewed = gm.graph.call_function(v.target, (a, *v.args[1:]), v.kwargs)
                        viewed.meta["val"] = v.target(a.meta["val"], *v.args[1:], **v.kwargs)
                        a = viewed
                    args.append(a)
                op = gm.graph.call_function(src.target, tuple(args), src.kwargs)
                op.meta["val"] = src.target(
                    *(a.meta["val"] if isinstance(a, torch.fx.Node) else a for a in args),
                    **src.kwargs,
                )
            v.replace_all_uses_with(op)
            gm.graph.erase_node(v)
            if not src.users:
                gm.graph.erase_node(src)
            changed = True
    gm.recompile()


def _scalar_constants(gm) -> None:
    """A number the forward makes a tensor (``torch.min(x, torch.tensor(self.value))``) traces
    as a constant attribute copied in (``lift_fresh_copy``); it becomes ``scalar_tensor(value)``,
    which every lowering reads as a number."""
    import torch

    aten = torch.ops.aten
    for n in list(gm.graph.nodes):
        value = getattr(gm, n.target, None) if n.op == "get_attr" else None
        if not isinstance(value, torch.Tensor) or value.dim() != 0:
            continue
        for user in list(n.users):
            if user.op != "call_function" or user.target != aten.lift_fresh_copy.default:
                continue
            with gm.graph.inserting_before(user):
                made = gm.graph.call_function(
                    aten.scalar_tensor.default, (value.item(),), {"dtype": value.dtype}
                )
            made.meta = dict(user.meta)
            user.replace_all_uses_with(made)
            gm.graph.erase_node(user)
        if not n.users:
            gm.graph.erase_node(n)
    gm.recompile()


def _functional_in_place(gm) -> None:
    """In-place ops on values the forward made (``sqrt_`` of a product of norms, ``fill_`` of an
    ``empty_like``, as ``F.cosine_embedding_loss`` writes them) become their functional forms
    where nothing reads the old value afterwards: each node then says what its value is. One on
    an input, on a view, or on a value read again after it changes, is left as it is (and
    refused in words)."""
    import torch

    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    for n in list(gm.graph.nodes):
        t = n.target
        if n.op != "call_function" or not isinstance(t, torch._ops.OpOverload):
            continue
        name = t.overloadpacket.__name__
        if not name.endswith("_") or name.startswith("_") or not n.args:
            continue
        packet = getattr(torch.ops.aten, name[:-1], None)
        functional = getattr(packet, t._overloadname, None) if packet is not None else None
        written = n.args[0]
        # Only a value the forward made, not an input, nor a view (writing a slice changes the
        # value it views, which others may read), and nothing reads it afterwards.
        if functional is None or not isinstance(written, torch.fx.Node):
            continue
        if written.op != "call_function" or getattr(written.target, "is_view", False):
            continue
        if all(order[u] < order[n] for u in written.users if u is not n):
            n.target = functional
    gm.recompile()


def _pointwise_decompositions() -> dict:
    import torch
    from torch._decomp import get_decompositions

    names = _DECOMPOSED + _MOVES_DECOMPOSED + _REDUCTIONS_DECOMPOSED
    table = get_decompositions([getattr(torch.ops.aten, name) for name in names])
    aten = torch.ops.aten
    table[aten.gather.default] = _gather_as_pick
    for k in (1, 2, 3):  # nearest upsampling by whole factors: each element repeated (a move)
        op = getattr(aten, f"upsample_nearest{k}d")
        table[op.default] = _nearest_as_repeat
        table[op.vec] = _nearest_vec_as_repeat
    table[aten.nll_loss_forward.default] = _nll_loss_as_picks
    table[aten.nll_loss2d_forward.default] = _nll_loss_as_picks
    table[aten.linspace.default] = _linspace_as_coordinates
    # identity matrices and diagonals as comparisons of an element's coordinates
    table[aten.eye.default] = _eye_as_coordinates
    table[aten.eye.m] = _eye_as_coordinates
    table[aten.diag_embed.default] = _diag_embed_as_coordinates
    table[aten.diagonal.default] = _diagonal_as_pick
    # torch.cdist: both of ATen's forms as the reduction over every pair's differences it is
    table[aten._euclidean_dist.default] = _euclidean_dist_as_pairs
    table[aten._cdist_forward.default] = _cdist_as_pairs
    return table


def _on_diagonal(n: int, m: int, device):
    """``[n, m]`` booleans, true where an element's row equals its column (the lowering reads
    the two aranges as the elements' coordinates, as it reads ``tril`` and ``triu``)."""
    import torch

    return torch.arange(n, device=device)[:, None] == torch.arange(m, device=device)[None, :]


def _linspace_as_coordinates(
    start, end, steps, *, dtype=None, layout=None, device=None, pin_memory=None
):
    """``torch.linspace(start, end, steps)`` of numbers: element ``i`` is ``start + i * step``
    in the first half and ``end - (steps - 1 - i) * step`` in the second, as ATen's kernel
    computes it (so both ends are exact), from each element's index (an arange)."""
    import torch

    dtype = torch.get_default_dtype() if dtype is None else dtype
    if not all(isinstance(v, int | float) for v in (start, end)) or steps < 2:
        return NotImplemented
    if not dtype.is_floating_point:  # (integer steps round as ATen's kernel does, not so)
        return NotImplemented
    step = (end - start) / (steps - 1)
    i = torch.arange(steps, device=device).to(dtype)
    return torch.where(i < steps // 2, start + i * step, end - (steps - 1 - i) * step).to(dtype)


def _eye_as_coordinates(n, m=None, *, dtype=None, layout=None, device=None, pin_memory=None):
    """``torch.eye(n, m)``: 1 where an element's row equals its column, else 0."""
    import torch

    dtype = torch.get_default_dtype() if dtype is None else dtype
    return _on_diagonal(n, n if m is None else m, device).to(dtype)


def _diag_embed_as_coordinates(x, offset=0, dim1=-2, dim2=-1):
    """``torch.diag_embed(x)`` (and ``torch.diag`` of a vector): each row of ``x`` on the
    diagonal of a square matrix, 0 elsewhere. Other offsets or dimensions are left as they
    are (refused in words)."""
    import torch

    if offset != 0 or (dim1 % (x.dim() + 1), dim2 % (x.dim() + 1)) != (x.dim() - 1, x.dim()):
        return NotImplemented
    n = x.shape[-1]
    return torch.where(_on_diagonal(n, n, x.device), x.unsqueeze(-2), 0).to(x.dtype)


def _diagonal_as_pick(x, offset=0, dim1=0, dim2=1):
    """``x.diagonal()`` over the last two dimensions (a matrix's diagonal, its trace's
    operand): the sum over each row of the one element whose column is the row's, as
    ``gather`` of one element a row is (:func:`_picked`). Other dimensions or offsets are left
    as they are."""
    import torch

    if x.dim() < 2 or offset != 0:
        return NotImplemented
    if sorted((dim1 % x.dim(), dim2 % x.dim())) != [x.dim() - 2, x.dim() - 1]:
        return NotImplemented
    n, m = x.shape[-2], x.shape[-1]
    if n > m:  # the diagonal's length is the shorter side's
        return NotImplemented
    return torch.where(_on_diagonal(n, m, x.device), x, 0).sum(-1).to(x.dtype)


def _pair_differences(x1, x2):
    """Every row of ``x1`` minus every row of ``x2`` (``[..., P, R, M]``, leading dimensions
    broadcast), as ``torch.cdist`` pairs them."""
    return x1.unsqueeze(-2) - x2.unsqueeze(-3)


def _euclidean_dist_as_pairs(x1, x2):
    """``torch.cdist``'s Euclidean form (ATen writes it as one product of ``[-2x, |x|^2, 1]``
    operands, which no template reads) as what it computes: the root of each pair's summed
    squared differences, a reduction over rows as wide as both inputs broadcast (the row
    kernels read each input through its strides). Exact where ATen's product cancels."""
    return _cdist_as_pairs(x1, x2, 2.0)


def _cdist_as_pairs(x1, x2, p, compute_mode=None):
    """``torch.cdist``'s p-norm form (``_cdist_forward``) as each pair's norm of differences:
    the count of those that differ for p = 0, the largest for p = inf, else the p-th root of
    the sum of their p-th powers."""
    d = _pair_differences(x1, x2)
    if p == 0:
        return (d != 0).to(d.dtype).sum(-1)
    if p == float("inf"):
        return d.abs().amax(-1)
    if p == 1:
        return d.abs().sum(-1)
    if p == 2:
        return d.pow(2).sum(-1).sqrt()
    return d.abs().pow(p).sum(-1).pow(1.0 / p)


def _nearest_as_repeat(x, output_size, *scales):
    """Nearest upsampling by a whole scale factor (``F.interpolate(x, scale_factor=2)``):
    output element ``i`` reads input ``i // f``, which is each element repeated ``f`` times,
    written as the view, expand and copy that is (the move family's); a factor that is not
    whole, or an output ``size`` given instead of a factor, is left as it is."""
    spatial = list(x.shape[2:])
    out = [int(o) for o in output_size]
    if len(out) != len(spatial) or any(i == 0 or o % i for o, i in zip(out, spatial, strict=True)):
        return NotImplemented
    factors = [o // i for o, i in zip(out, spatial, strict=True)]
    # By a scale factor only: an output of a fixed ``size`` is not a whole multiple of every
    # input size the candidate may be given.
    if len(scales) != len(factors) or any(
        s is None or float(s) != f for s, f in zip(scales, factors, strict=True)
    ):
        return NotImplemented
    lead = list(x.shape[:2])
    ones = [d for i in spatial for d in (i, 1)]
    wide = [d for i, f in zip(spatial, factors, strict=True) for d in (i, f)]
    return x.reshape(lead + ones).expand(lead + wide).contiguous().view(lead + out)


def _nearest_vec_as_repeat(x, output_size, scale_factors):
    if output_size is None:
        if scale_factors is None:
            return NotImplemented
        output_size = [int(i * f) for i, f in zip(x.shape[2:], scale_factors, strict=True)]
        return _nearest_as_repeat(x, output_size, *scale_factors)
    return _nearest_as_repeat(x, output_size, *(scale_factors or ()))


def _picked(x, dim: int, index, size: int | None = None):
    """``x`` at ``index`` along ``dim`` (``index`` of size 1 there, broadcast against ``x``
    elsewhere; ``x`` may be a number, then ``size`` is the dimension's): the one element each
    row's column index names, as a sum over the dimension of the elements whose column equals
    it; 0 where none does."""
    import torch

    size = x.shape[dim] if size is None else size
    along = [1] * index.dim()
    along[dim] = size
    columns = torch.arange(size, device=index.device).view(along)
    return torch.where(columns == index, x, 0.0).sum(dim, keepdim=True)


def _gather_as_pick(x, dim, index, sparse_grad=False):
    """``torch.gather`` of one element a row (``lsm.gather(1, t[:, None])``, the index of size
    1 along ``dim`` and the input's size elsewhere) as the reduction over the row it is (a
    one-hot sum, :func:`_picked`): the row kernels then compute the values and pick from them
    in one pass. A gather of several elements a row is left as it is (refused in words)."""
    dim = dim % max(x.dim(), 1)
    shape = list(index.shape)
    if x.dim() == 0 or index.dim() != x.dim() or shape[dim] != 1:
        return NotImplemented
    if any(shape[d] != x.shape[d] for d in range(x.dim()) if d != dim):
        return NotImplemented
    return _picked(x, dim, index).to(x.dtype)


def _nll_loss_as_picks(x, target, weight, reduction, ignore_index):
    """``nll_loss`` with class weights or over more than ``[tokens, classes]`` (a segmentation
    loss of ``[N, C, H, W]`` logits) as the picks and sums it is, in torch's own definition:
    each element's loss ``-w[t] x[t]`` (0 where ``t`` is ``ignore_index``), summed, or
    divided by the summed weights for ``mean``. The 2-d unweighted loss is left to the
    cross-entropy template."""
    import torch

    if x.dim() < 2 or (weight is None and x.dim() == 2):
        return NotImplemented
    ones = [d for d in range(2, x.dim()) if x.shape[d] == 1 and target.shape[d - 1] == 1]
    if x.dim() == 4 and ones:
        # [N, C, d] logits, which torch views as [N, C, 1, d] for its 2-d loss: as they were
        d = ones[0]
        out = _nll_loss_as_picks(x.squeeze(d), target.squeeze(d - 1), weight, reduction,
                                 ignore_index)  # fmt: skip
        return (out[0].unsqueeze(d - 1), out[1]) if reduction == 0 else out
    # An ignored element's target names no class, so that nothing is picked for it.
    t = target.unsqueeze(1)
    t = torch.where(t != ignore_index, t, -1)
    picked = _picked(x, 1, t).squeeze(1)
    if weight is None:
        w = _picked(1.0, 1, t, x.shape[1]).squeeze(1)  # 1 where a class is named
    else:
        along = [1] * x.dim()
        along[1] = x.shape[1]
        w = _picked(weight.view(along), 1, t).squeeze(1)
    loss = -picked * w
    total = w.sum()  # nll_loss's second output (read by nothing unless the mean divides by it)
    if reduction == 0:
        return loss, total
    return (loss.sum() if reduction == 2 else loss.sum() / total), total


@contextlib.contextmanager
def _composites_as_reductions():
    """While tracing, functions that ATen decomposes into ops no template reads (instance
    norm becomes a batch norm over a reshaped tensor with empty running statistics) are
    written as the reductions they are, so the graph is the one the lowering knows (and
    ``F.glu`` over another than the last dimension as the chunk and gate it is). Only the
    trace sees this: the candidate is checked against the untouched reference."""
    import torch
    import torch.nn.functional as F

    original = F.instance_norm
    original_group = F.group_norm
    original_batch = F.batch_norm

    def batch_norm(x, running_mean, running_var, weight=None, bias=None, training=False,
                   momentum=0.1, eps=1e-5):  # fmt: skip
        along_channels = (1, -1) + (1,) * (x.dim() - 2)
        if not training and running_mean is not None and running_var is not None:
            out = (x - running_mean.view(along_channels)) * torch.rsqrt(
                running_var.view(along_channels) + eps
            )
            return _per_channel(out, weight, bias)
        if not training or x.dim() < 2:
            return original_batch(x, running_mean, running_var, weight, bias, training,
                                  momentum, eps)  # fmt: skip
        # Training: statistics of the batch, per channel (over every dimension but 1); the
        # running statistics, where kept, move towards them in place, as torch's kernel does
        # (the variance unbiased there), so the graph says what the candidate must write.
        dims = (0,) + tuple(range(2, x.dim()))
        mean = x.mean(dim=dims, keepdim=True)
        var = x.var(dim=dims, keepdim=True, unbiased=False)
        out = _per_channel((x - mean) * torch.rsqrt(var + eps), weight, bias)
        if running_mean is not None and running_var is not None:
            if momentum is None:
                raise NoTemplate(
                    "batch norm with momentum=None averages its running statistics by the "
                    "number of batches seen, a value read at run time; not covered"
                )
            if x.numel() > x.shape[1]:  # else torch's own kernel refuses the batch
                unbiased = x.var(dim=dims, unbiased=True).reshape(-1)
                running_mean.copy_(running_mean * (1 - momentum) + mean.reshape(-1) * momentum)
                running_var.copy_(running_var * (1 - momentum) + unbiased * momentum)
        return out

    def group_norm(x, num_groups, weight=None, bias=None, eps=1e-5):
        if x.dim() < 2 or x.shape[1] % num_groups:
            return original_group(x, num_groups, weight, bias, eps)
        grouped = x.reshape(x.shape[0], num_groups, -1)  # a group's elements are contiguous
        mean = grouped.mean(dim=-1, keepdim=True)
        var = grouped.var(dim=-1, keepdim=True, unbiased=False)
        out = ((grouped - mean) * torch.rsqrt(var + eps)).reshape(x.shape)
        return _per_channel(out, weight, bias)

    def instance_norm(x, running_mean=None, running_var=None, weight=None, bias=None,
                      use_input_stats=True, momentum=0.1, eps=1e-5):  # fmt: skip
        if running_mean is not None or running_var is not None or not use_input_stats:
            return original(
                x, running_mean, running_var, weight, bias, use_input_stats, momentum, eps
            )
        dims = tuple(range(2, x.dim()))
        mean = x.mean(dim=dims, keepdim=True)
        var = x.var(dim=dims, keepdim=True, unbiased=False)
        out = (x - mean) * torch.rsqrt(var + eps)
        return _per_channel(out, weight, bias)

    originals = (
        torch.matmul, torch.mm, torch.bmm, torch.Tensor.__matmul__, torch.Tensor.matmul,
        torch.Tensor.bmm, torch.einsum,
    )  # fmt: skip

    def product(fallback):
        def call(a, b, *args, **kwargs):
            if args or kwargs or not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
                return fallback(a, b, *args, **kwargs)
            return _vector_product(a, b, fallback)

        return call

    def einsum(equation, *operands):
        return _einsum_product(equation, operands, originals[-1])

    rolls = (torch.roll, torch.Tensor.roll)

    def roll(fallback):
        def call(x, shifts, dims=None):
            return _roll_as_cat(x, shifts, dims, fallback)

        return call

    original_glu = F.glu

    def glu(x, dim=-1):
        # Along the last dimension the row kernels slice the halves themselves; along another,
        # the halves are a chunk of the input (a move), gated pointwise.
        if not isinstance(x, torch.Tensor) or dim % max(x.dim(), 1) == x.dim() - 1:
            return original_glu(x, dim)
        value, gate = x.chunk(2, dim)
        return value * torch.sigmoid(gate)

    F.instance_norm, F.group_norm, F.batch_norm = instance_norm, group_norm, batch_norm
    F.glu = glu
    torch.matmul, torch.mm, torch.bmm = (product(f) for f in originals[:3])
    torch.Tensor.__matmul__, torch.Tensor.matmul, torch.Tensor.bmm = (
        product(f) for f in originals[3:6]
    )
    torch.einsum = einsum
    torch.roll, torch.Tensor.roll = (roll(f) for f in rolls)
    try:
        yield
    finally:
        torch.roll, torch.Tensor.roll = rolls
        F.instance_norm, F.group_norm, F.batch_norm = original, original_group, original_batch
        F.glu = original_glu
        (
            torch.matmul, torch.mm, torch.bmm, torch.Tensor.__matmul__, torch.Tensor.matmul,
            torch.Tensor.bmm, torch.einsum,
        ) = originals  # fmt: skip


def _roll_as_cat(x, shifts, dims, fallback):
    """``torch.roll`` of one dimension is the concatenation of its two slices: the last
    ``s`` entries, then the rest (``s`` the shift modulo the size). Written so, the slices
    lowering reads the columns where the roll puts them; anything else is the roll it was."""
    import torch

    shift, dim = shifts, dims
    if isinstance(shifts, list | tuple):
        shift = shifts[0] if len(shifts) == 1 else None
    if isinstance(dims, list | tuple):
        dim = dims[0] if len(dims) == 1 else None
    if dim is None or not isinstance(shift, int) or not isinstance(x, torch.Tensor):
        return fallback(x, shifts, dims)
    n = x.shape[dim]
    if not n or not shift % n:
        return fallback(x, shifts, dims)
    s = shift % n
    return torch.cat((x.narrow(dim, n - s, s), x.narrow(dim, 0, n - s)), dim)


def _vector_product(a, b, fallback):
    """A matrix times a vector is a reduction, not a matrix product: a 128 x 128 tile grid over
    an (M, K) @ (K, 1) product has M / 128 programs (0.05x of compile on the H200, KernelBench
    4): (M, K) @ (K, 1) is each row of A times B, summed along the row. Anything else is the
    product it was (a vector times a matrix too: the rows would run down B's columns, with
    the vector along them, which the row lowering does not read)."""
    if a.dim() >= 2 and b.dim() >= 2 and a.shape[-1] == b.shape[-2] > 1 and b.shape[-1] == 1:
        row = b.reshape(*b.shape[:-2], 1, b.shape[-2])  # [..., K, 1] as [..., 1, K], batched too
        return (a * row).sum(dim=-1, keepdim=True)
    return fallback(a, b)


def _einsum_product(equation: str, operands: tuple, fallback):
    """``einsum`` of two operands that is not a matrix product (no letter of its own on each
    side with one summed over, as ``ik,kj->ij`` has) is a broadcast product and a sum: a dot per
    head ``bhd,bhd->bh``, a matrix times a vector ``bd,d->b``, an outer product ``bi,bj->bij``.
    Written so, the trace sees the reduction it is; anything else is the einsum it was."""
    ops = operands[0] if len(operands) == 1 and isinstance(operands[0], list | tuple) else operands
    eq = equation.replace(" ", "")
    if len(ops) != 2 or "..." in eq or "->" not in eq:
        return fallback(equation, *operands)
    lhs, out = eq.split("->")
    sa, sb = lhs.split(",") if lhs.count(",") == 1 else ("", "")
    a, b = ops
    plain = all(len(set(s)) == len(s) == t.dim() for s, t in ((sa, a), (sb, b)))
    summed = (set(sa) | set(sb)) - set(out)
    gemm = bool(set(sa) - set(sb)) and bool(set(sb) - set(sa)) and bool(summed & set(sa) & set(sb))
    if not sa or not plain or gemm or len(set(out)) != len(out) or set(out) - set(sa + sb):
        return fallback(equation, *operands)
    order = list(out) + [c for c in dict.fromkeys(sa + sb) if c not in out]

    def spread(t, letters):  # its dimensions in ``order``, size 1 where it has no such letter
        t = t.permute([letters.index(c) for c in order if c in letters])
        for i, c in enumerate(order):
            if c not in letters:
                t = t.unsqueeze(i)
        return t

    product = spread(a, sa) * spread(b, sb)
    return product.sum(dim=tuple(range(len(out), len(order)))) if summed else product


# ---------------------------------------------------------------------------- source copying


class _SuperFix(ast.NodeTransformer):
    def visit_Call(self, node: ast.Call):  # noqa: N802 - ast API
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id == "super" and node.args:
            node.args = []
        return node


# The problem file's own functions, which a candidate does not copy.
_PROBLEM_FUNCTIONS = ("get_inputs", "get_init_inputs")


def _copy_init(source: str) -> tuple[str, str]:
    """``Model.__init__`` renamed for ``ModelNew``, plus the problem's imports, constants, the
    other classes it defines (their ``forward`` dropped) and its helper functions.

    Parameters must have the same names and shapes as the reference's so they can be copied,
    so the constructor is reused verbatim (with ``super(Model, self)`` made ``super()``).
    """
    tree = ast.parse(source)
    init = None
    preamble: list[str] = []
    for stmt in tree.body:
        if isinstance(stmt, ast.ClassDef) and stmt.name == "Model":
            for item in stmt.body:
                if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                    init = item
        elif isinstance(stmt, ast.ClassDef):
            # A module the constructor builds (minGPT's ``Block`` holds a
            # ``CausalSelfAttention``): the same parameters need the same class, but its
            # forward is the reference's computation, which the candidate never calls.
            stmt.body = [
                s for s in stmt.body if not (isinstance(s, ast.FunctionDef) and s.name == "forward")
            ] or [ast.Pass()]
            preamble.append(ast.unparse(stmt))
        elif isinstance(stmt, ast.FunctionDef) and stmt.name not in _PROBLEM_FUNCTIONS:
            preamble.append(ast.unparse(stmt))  # a helper the constructor may call
        elif isinstance(stmt, ast.Import | ast.ImportFrom):
            preamble.append(ast.unparse(stmt))
        elif isinstance(stmt, ast.Assign):
            try:
                ast.literal_eval(stmt.value)
            except ValueError:
                continue
            preamble.append(ast.unparse(stmt))
    if init is None:
        return "    def __init__(self, *args, **kwargs):\n        super().__init__()\n", ""
    init = _SuperFix().visit(init)
    ast.fix_missing_locations(init)
    body = ast.unparse(init)
    return "\n".join("    " + line for line in body.splitlines()) + "\n", "\n".join(preamble)


def trace_fits(source: str) -> tuple[Plan | None, str]:
    """(plan, summary) when a template fits, else (None, the reason in words)."""
    try:
        plan = trace_problem(source)
    except NoTemplate as exc:
        return None, f"no template fits: {exc}"
    return plan, plan.summary


def plan_to_dict(plan: Plan) -> dict:
    """A plan as JSON-able data (it crosses the sandbox boundary this way, never pickled)."""
    return {
        "family": plan.family,
        "forward_args": list(plan.forward_args),
        "init_source": plan.init_source,
        "preamble": plan.preamble,
        "nodes": [
            {
                "id": n.id,
                "kind": n.kind,
                "op": n.op,
                "args": list(n.args),
                "value": n.value,
                "attrs": dict(n.attrs),
                "cat": n.cat,
            }
            for n in plan.nodes
        ],
        "outputs": list(plan.outputs),
        "extra": dict(plan.extra),
        "summary": plan.summary,
        "stages": [plan_to_dict(stage) for stage in plan.stages],
    }


def plan_from_dict(data: dict, *, stage: bool = False) -> Plan:
    """The inverse of ``plan_to_dict``, checking the shape of data that came from a child which
    ran untrusted code (it only ever becomes candidate source, which runs sandboxed). A stage's
    plan has no stages of its own."""

    def need(value, kind, what):
        if not isinstance(value, kind):
            raise NoTemplate(f"the traced plan is malformed: {what}")
        return value

    if data.get("stages") and (stage or not 2 <= len(data["stages"]) <= MAX_STAGES):
        raise NoTemplate("the traced plan is malformed: stages")
    nodes = []
    for i, n in enumerate(need(data.get("nodes"), list, "nodes")):
        need(n, dict, f"nodes[{i}]")
        args = tuple(need(a, int, f"nodes[{i}].args") for a in need(n.get("args"), list, "args"))
        value = n.get("value")
        if value is not None:
            value = float(need(value, int | float, f"nodes[{i}].value"))
        nodes.append(
            IRNode(
                id=need(n.get("id"), int, f"nodes[{i}].id"),
                kind=need(n.get("kind"), str, f"nodes[{i}].kind"),
                op=need(n.get("op", ""), str, f"nodes[{i}].op"),
                args=args,
                value=value,
                attrs=need(n.get("attrs", {}), dict, f"nodes[{i}].attrs"),
                cat=need(n.get("cat", "tile"), str, f"nodes[{i}].cat"),
            )
        )
    return Plan(
        family=need(data.get("family"), str, "family"),
        forward_args=[
            need(a, str, "forward_args")
            for a in need(data.get("forward_args"), list, "forward_args")
        ],
        init_source=need(data.get("init_source"), str, "init_source"),
        preamble=need(data.get("preamble"), str, "preamble"),
        nodes=nodes,
        outputs=[need(o, int, "outputs") for o in need(data.get("outputs"), list, "outputs")],
        extra=need(data.get("extra", {}), dict, "extra"),
        summary=need(data.get("summary", ""), str, "summary"),
        stages=[
            plan_from_dict(need(part, dict, "stages"), stage=True)
            for part in need(data.get("stages", []), list, "stages")
        ],
    )


TRACE_TIMEOUT_S = 120
TRACE_MEMORY_BYTES = 8 << 30


def trace_problem_confined(source: str, train: bool = False) -> Plan:
    """``trace_problem`` for an untrusted problem: the tracing (which runs the problem's own
    code) happens behind the sandbox boundary; only the plan, as checked data, comes back."""
    from workers.boundary import BoundaryUnavailable
    from workers.confined import ConfinedFailure, run_confined

    try:
        answer = run_confined(
            "workers.search.trace",
            {"source": source, "train": bool(train)},
            timeout_s=TRACE_TIMEOUT_S,
            cpu_s=TRACE_TIMEOUT_S,
            memory_bytes=TRACE_MEMORY_BYTES,
        )
    except BoundaryUnavailable:
        raise
    except ConfinedFailure as exc:
        raise NoTemplate(f"the reference could not be traced: {exc}") from exc
    if isinstance(answer.get("no_template"), str):
        raise NoTemplate(answer["no_template"])
    if not isinstance(answer.get("plan"), dict):
        raise NoTemplate(f"the reference could not be traced: {answer.get('error', 'no plan')}")
    return plan_from_dict(answer["plan"])


def case_rows(
    source: str, arg_index: int, cases: list[dict], dim: int | list | None = -1
) -> dict[str, list]:
    """{case name: [M, N, dtype]}: the rows a row-family candidate sees in each case, from the
    shape of forward argument ``arg_index`` (M rows of its dimension ``dim``, N long; ``dim``
    None: one row of every element; ``[k]``: rows of its dimensions from ``k`` on, flattened)
    under the case's overrides; shapes only (fake tensors), nothing is allocated."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    ns = load_problem(source)
    keys = {k for case in cases for k in (case.get("overrides") or {})}
    base = {k: ns[k] for k in keys if k in ns}
    out = {}
    for case in cases:
        ns.update(base)
        ns.update(case.get("overrides") or {})
        with FakeTensorMode(allow_non_fake_inputs=True):
            inputs = list(ns["get_inputs"]())
        t = inputs[arg_index]
        if dim is None:
            n = int(t.numel())
        elif isinstance(dim, list):  # rows of the trailing dimensions from dim[0] on
            n = math.prod(int(x) for x in t.shape[dim[0] :])
        else:
            n = int(t.shape[dim]) if t.dim() else 1
        m = int(t.numel()) // n if n else 0
        dtype = case.get("dtype") if t.is_floating_point() and case.get("dtype") else None
        out[str(case["name"])] = [m, n, dtype or str(t.dtype).removeprefix("torch.")]
    return out


def case_rows_confined(
    source: str, arg_index: int, cases: list[dict], dim: int | list | None = -1
) -> dict[str, list]:
    """:func:`case_rows` behind the sandbox boundary (it runs the problem's ``get_inputs``);
    {} when it cannot say."""
    from workers.confined import ConfinedFailure, run_confined

    request = {"source": source, "rows": {"arg_index": arg_index, "cases": cases, "dim": dim}}
    try:
        answer = run_confined(
            "workers.search.trace",
            request,
            timeout_s=TRACE_TIMEOUT_S,
            cpu_s=TRACE_TIMEOUT_S,
            memory_bytes=TRACE_MEMORY_BYTES,
        )
    except ConfinedFailure:
        return {}
    rows = answer.get("rows")
    if not isinstance(rows, dict):
        return {}
    ok = {}
    for name, value in rows.items():
        if (
            isinstance(value, list)
            and len(value) == 3
            and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value[:2])
            and isinstance(value[2], str)
            and len(value[2]) < 32
        ):
            ok[str(name)] = value
    return ok


def _serve(request: dict) -> dict:
    if isinstance(request.get("rows"), dict):
        rows = request["rows"]
        try:
            dim = rows.get("dim", -1)
            rows_of = case_rows(
                request["source"],
                int(rows["arg_index"]),
                rows["cases"],
                None if dim is None else int(dim),
            )
            return {"rows": rows_of}
        except Exception as exc:  # noqa: BLE001 - the problem's own code failed: say so
            return {"error": f"{type(exc).__name__}: {exc}"[:300]}
    try:
        train = request.get("train") is True
        return {"plan": plan_to_dict(trace_problem(request["source"], train))}
    except NoTemplate as exc:
        return {"no_template": str(exc)}


__all__ = [
    "IRNode",
    "NoTemplate",
    "Plan",
    "load_problem",
    "plan_from_dict",
    "plan_to_dict",
    "trace_fits",
    "trace_problem",
    "trace_problem_confined",
    "case_rows",
    "case_rows_confined",
]


if __name__ == "__main__":
    from workers.confined import serve_json

    serve_json(_serve)
