"""State a forward updates in place: a module's buffers (BatchNorm's running statistics in
training mode, a counter of batches seen, any buffer a forward moves with ``copy_``, ``add_``,
``mul_``, ...). A candidate must leave the module as the reference does, so the writes are part
of what it computes: :func:`take_state_writes` turns each buffer's final value into one more
output of the graph (the lowering then computes it beside the others, and the kernel stores it
into the buffer itself), and an integer counter moved by a constant (``num_batches_tracked += 1``)
into a counter the candidate bumps on the device. The correctness gate compares the buffers
after every call (:mod:`workers.gates.correctness`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from workers.search.ir import NoTemplate, Plan

aten = torch.ops.aten


@dataclass
class StateWrites:
    """What the forward writes: ``values`` (buffer references, in the order their final values
    were appended to the graph's outputs) and ``counters`` (``[reference, amount]``: a 0-d
    integer buffer the forward moves by a constant)."""

    values: list[str] = field(default_factory=list)
    counters: list[list] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.values or self.counters)


def take_state_writes(gm: torch.fx.GraphModule, refs: list[str]) -> StateWrites:
    """Rewrite ``gm`` so that no node writes an input in place: each write to a buffer or
    parameter becomes its functional form (``copy_`` the value copied), later reads of the
    buffer read that value, and each written buffer's final value is appended to the graph's
    outputs. NoTemplate for a write the candidate could not reproduce (a forward argument
    written in place, a write that broadcasts or changes the dtype)."""
    holders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    ref_of = dict(zip(holders, refs, strict=False))
    current: dict = {}  # placeholder -> the node holding its value now
    counted: dict = {}  # 0-d integer placeholder -> the constant added so far
    for n in list(gm.graph.nodes):
        if n.op != "call_function":
            continue
        if current:
            n.args = torch.fx.map_arg(n.args, lambda a: current.get(a, a))
            n.kwargs = torch.fx.map_arg(n.kwargs, lambda a: current.get(a, a))
        target = n.args[0] if n.args else None
        name = getattr(getattr(n.target, "overloadpacket", None), "__name__", "")
        written = next((p for p, v in current.items() if v is target), target)
        if written not in ref_of or not name.endswith("_") or name.startswith("_"):
            continue
        ref = ref_of[written]
        if not ref.startswith("self"):
            raise NoTemplate(f"the reference writes its input {ref} in place; no template fits")
        val = written.meta["val"]
        if val.dim() == 0 and not val.is_floating_point():
            amount = _constant_step(n, target)
            if amount is None:
                raise NoTemplate(f"the reference moves the integer {ref} by a value it computes")
            if n.users or any(u is not n and u.target != n.target for u in written.users):
                raise NoTemplate(
                    f"the reference reads the counter {ref} (BatchNorm with momentum=None "
                    "averages by the batches seen); a value read back from the device per call "
                    "is not covered"
                )
            counted[written] = counted.get(written, 0) + amount
            gm.graph.erase_node(n)
            continue
        new = _functional(gm, n, name)
        value = new.meta.get("val")
        if (
            not isinstance(value, torch.Tensor)
            or tuple(value.shape) != tuple(val.shape)
            or value.dtype != val.dtype
        ):
            raise NoTemplate(
                f"the reference writes {ref} in place with a value of another shape or dtype"
            )
        current[written] = new
    if counted and any(p in current for p in counted):
        raise NoTemplate("an integer buffer both counted and written in place")
    writes = StateWrites(
        values=[ref_of[p] for p in current],
        counters=[[ref_of[p], amount] for p, amount in counted.items()],
    )
    if current:
        out = next(n for n in gm.graph.nodes if n.op == "output")
        values = out.args[0]
        values = list(values) if isinstance(values, list | tuple) else [values]
        out.args = (values + list(current.values()),)
    gm.graph.lint()
    gm.recompile()
    return writes


def _constant_step(n: torch.fx.Node, target) -> int | None:
    """The integer ``add_``/``sub_`` moves a counter by, or None."""
    if n.target not in (aten.add_.Tensor, aten.add_.Scalar, aten.sub_.Tensor, aten.sub_.Scalar):
        return None
    other = n.args[1] if len(n.args) > 1 else None
    alpha = n.kwargs.get("alpha", 1)
    if not isinstance(other, int) or isinstance(other, bool) or not isinstance(alpha, int):
        return None
    sign = -1 if n.target in (aten.sub_.Tensor, aten.sub_.Scalar) else 1
    return sign * other * alpha


def _functional(gm: torch.fx.GraphModule, n: torch.fx.Node, name: str) -> torch.fx.Node:
    """The node that holds what the in-place ``n`` leaves in its first argument (``n`` gone)."""
    if n.target is aten.copy_.default:
        new = n.args[1]
        if not isinstance(new, torch.fx.Node):
            raise NoTemplate("the reference copies a number into a buffer; no template fits")
        n.replace_all_uses_with(new)  # ``copy_`` returns the buffer: its new value
        gm.graph.erase_node(n)
        return new
    packet = getattr(aten, name[:-1], None)
    functional = getattr(packet, n.target._overloadname, None) if packet is not None else None
    if functional is None:
        raise NoTemplate(f"the reference updates a buffer with {name}; no template fits")
    n.target = functional  # same arguments, same value, now a new tensor
    return n


def attach(plan: Plan, writes: StateWrites, body: Plan) -> None:
    """Mark ``body``'s last outputs (``plan``'s kernel that computes them) as the buffers they
    are written into; NoTemplate where its family's kernels do not write buffers."""
    if not writes:
        return
    if body.family != "row":
        raise NoTemplate(
            f"the reference updates {', '.join(writes.values + [c[0] for c in writes.counters])} "
            f"in place; only row kernels (reductions, norms) write module state, and this "
            f"reference lowers as {plan.family}"
        )
    first = len(body.outputs) - len(writes.values)
    body.extra["state_outputs"] = {str(first + k): ref for k, ref in enumerate(writes.values)}
    if writes.counters:
        body.extra["counters"] = writes.counters
    updated = ", ".join(writes.values + [c[0] for c in writes.counters])
    body.summary += f"; updates {updated} in place"
