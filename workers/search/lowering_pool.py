"""Lower a pooling reference (``nn.MaxPool1d/2d/3d``, ``nn.AvgPool1d/2d/3d`` and their functional
forms) into the ``pool`` family's plan: one windowed reduction per output element, the window
given by kernel size, stride, padding, dilation and ceil mode, as traced. A 1-d pool traces as
a 2-d one over an inserted dimension of 1; the plan records that view so the candidate reads
the input as it is. Pooling beside other ops, or returning indices, is refused in one line."""

from __future__ import annotations

import operator

import torch

from workers.search.ir import IRNode, NoTemplate, Plan
from workers.search.lowering import _VIEW_OPS

aten = torch.ops.aten

_POOLS = {
    aten.max_pool2d_with_indices.default: ("max", 2),
    aten.max_pool3d_with_indices.default: ("max", 3),
    aten.avg_pool2d.default: ("avg", 2),
    aten.avg_pool3d.default: ("avg", 3),
}
# Views that only insert or drop dimensions of size 1 (how a 1-d pool reaches the 2-d op):
# the lowering's view ops less those that broadcast or cast.
_UNIT_VIEWS = _VIEW_OPS - {
    aten.expand.default,
    aten._to_copy.default,
    aten.lift_fresh_copy.default,
    aten.detach.default,
}


def is_pool(calls: list[torch.fx.Node]) -> bool:
    return any(n.target in _POOLS for n in calls)


def _triple(value, spatial: int, fill: int) -> list[int]:
    """A pooling argument (an int or one per spatial dimension) as three, padded in front."""
    values = [int(value)] * spatial if isinstance(value, int) else [int(v) for v in value]
    if len(values) == 1 and spatial > 1:
        values = values * spatial
    if len(values) != spatial:
        raise NoTemplate(f"a pooling argument {value!r} for {spatial} spatial dimensions")
    return [fill] * (3 - spatial) + values


def _nonunit(shape) -> list[int]:
    return [int(v) for v in shape if v != 1]


def lower_pool(gm: torch.fx.GraphModule, refs: list[str]) -> Plan:
    graph = gm.graph
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    ph_ref = dict(zip(placeholders, refs, strict=True))
    calls = [n for n in graph.nodes if n.op == "call_function"]
    pools = [n for n in calls if n.target in _POOLS]
    if len(pools) != 1:
        raise NoTemplate(f"{len(pools)} pooling ops in the reference; the template pools once")
    pool = pools[0]
    op, spatial = _POOLS[pool.target]
    a = list(pool.args)

    # The input: a placeholder, through views that insert dimensions of 1 (each dimension of
    # the pooled view is one of the input's, or None: inserted).
    chain_in, src = [], a[0]
    while src.op == "call_function" and src.target in _UNIT_VIEWS:
        chain_in.append(src)
        src = src.args[0]
    if src not in ph_ref or not src.meta["val"].is_floating_point():
        raise NoTemplate("the pooled tensor is computed by other ops; the template pools inputs")
    vdims = list(range(src.meta["val"].dim()))
    for view in reversed(chain_in):
        vdims = _apply_view(view, vdims)
    # The output: the pool's values (not its indices), through views that drop those 1s.
    out_node = next(n for n in graph.nodes if n.op == "output")
    outs = out_node.args[0]
    outs = list(outs) if isinstance(outs, list | tuple) else [outs]
    if len(outs) != 1 or not isinstance(outs[0], torch.fx.Node):
        raise NoTemplate("pooling that returns its indices (or several outputs) is not covered")
    chain, node = [], outs[0]
    while not (node.target is operator.getitem and node.args[0] is pool) and node is not pool:
        if node.op != "call_function" or node.target not in _UNIT_VIEWS:
            name = getattr(node.target, "__name__", node.target)
            raise NoTemplate(f"{name} beside the pooling; the template pools alone")
        chain.append(node)
        node = node.args[0]
    if node.target is operator.getitem and node.args[1] != 0:
        raise NoTemplate("pooling that returns its indices is not covered")
    # The output's dimensions, as positions of the pooled output's (None: inserted by a view).
    odims = list(range(len(vdims)))
    for view in reversed(chain):
        odims = _apply_view(view, odims, inserted_only=False)
    keep = [i for i, d in enumerate(vdims) if d is not None]
    if odims != keep:
        raise NoTemplate("the pooled output is viewed otherwise than the input was")
    allowed = set(chain) | set(chain_in) | {pool, node}
    extra_ops = [
        n
        for n in calls
        if n not in allowed
        and n.target is not operator.getitem
        and not (n.target in _UNIT_VIEWS and not n.users)  # a view of the unused indices
    ]
    if extra_ops:
        name = getattr(extra_ops[0].target, "__name__", extra_ops[0].target)
        raise NoTemplate(f"{name} beside the pooling; the template pools alone")

    kernel = _triple(a[1], spatial, 1)
    stride = _triple(a[2] if len(a) > 2 and a[2] else a[1], spatial, 1)
    padding = _triple(a[3] if len(a) > 3 else 0, spatial, 0)
    if op == "max":
        dilation = _triple(a[4] if len(a) > 4 else 1, spatial, 1)
        ceil = bool(a[5]) if len(a) > 5 else False
        include_pad, divisor = True, 0
    else:
        dilation = [1, 1, 1]
        ceil = bool(a[4]) if len(a) > 4 else False
        include_pad = bool(a[5]) if len(a) > 5 else True
        divisor = int(a[6]) if len(a) > 6 and a[6] else 0
    if any(2 * p > k for p, k in zip(padding, kernel, strict=True)):
        raise NoTemplate("padding of more than half the kernel (PyTorch refuses it too)")
    ref = ph_ref[src]
    plan = Plan(family="pool", forward_args=[], init_source="", preamble="")
    plan.nodes = [IRNode(id=0, kind="input", attrs={"ref": ref, "role": "tile"})]
    plan.outputs = [0]
    plan.extra.update(
        x=ref,
        op=op,
        spatial=spatial,
        vdims=vdims,
        keep=keep,
        kernel=kernel,
        stride=stride,
        padding=padding,
        dilation=dilation,
        ceil=ceil,
        include_pad=include_pad,
        divisor=divisor,
    )
    window = "x".join(str(k) for k in kernel[3 - spatial :])
    dims = spatial - sum(d is None for d in vdims)
    plan.summary = (
        f"{op} pooling over {ref} ({dims}-d as traced): window {window}, stride "
        f"{stride[3 - spatial :]}, padding {padding[3 - spatial :]}"
        + (f", dilation {dilation[3 - spatial :]}" if op == "max" else "")
        + (", ceil mode" if ceil else "")
        + ("" if include_pad or op == "max" else ", padding not counted")
        + (f", divisor {divisor}" if divisor else "")
    )
    return plan


def _apply_view(view: torch.fx.Node, dims: list, inserted_only: bool = True) -> list:
    """The dimensions after ``view`` (each an original position, or None for an inserted 1);
    a view that moves or merges dimensions is refused."""
    shape = tuple(view.meta["val"].shape)
    before = tuple(view.args[0].meta["val"].shape)
    t = view.target
    if t == aten.unsqueeze.default:
        at = view.args[1] % (len(dims) + 1)
        return dims[:at] + [None] + dims[at:]
    if t in (aten.squeeze.dim, aten.squeeze.dims, aten.squeeze.default):
        drop = view.args[1] if len(view.args) > 1 else [i for i, v in enumerate(before) if v == 1]
        drop = {d % len(dims) for d in ([drop] if isinstance(drop, int) else drop)}
        drop = {d for d in drop if before[d] == 1}
        if inserted_only and any(dims[d] is not None for d in drop):
            raise NoTemplate("a squeeze of an input dimension around the pooling")
        return [d for i, d in enumerate(dims) if i not in drop]
    if shape != before:
        raise NoTemplate(f"a view from {list(before)} to {list(shape)} around the pooling")
    return dims
