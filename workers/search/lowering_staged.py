"""A matrix product followed by more than a pointwise epilogue (``Linear`` then a softmax, a
GroupNorm, a log-sum-exp over the features, a cross-entropy over a vocabulary): two kernels, as
compile runs it. The graph is cut at the product: the first stage is the product alone (the
``matmul`` family, with its bias where ``addmm`` carries one), written once to memory; the
second stage is everything after it, lowered by the ordinary lowering with the product as one
more input (``STAGE_REF``), so whatever family fits the rest (row reductions over any
dimensions, elementwise, a scan, a cross-entropy, a pool) reads it.

A product whose epilogue is pointwise is never cut: the single fused kernel writes less. A
graph with several products, or whose product reads computed operands, is refused as before."""

from __future__ import annotations

import torch

from workers.search.ir import NoTemplate, Plan

# The name the second stage reads the product by (a local of the candidate's forward).
STAGE_REF = "_ke_mm"
_VIEWS = {
    torch.ops.aten.view.default,
    torch.ops.aten._unsafe_view.default,
    torch.ops.aten.reshape.default,
}


def lower_staged(gm: torch.fx.GraphModule, refs: list[str], lower, error: NoTemplate) -> Plan:
    """The two-stage plan of ``gm`` (family ``matmul+<family of the rest>``, ``stages`` [the
    product, the rest]), or NoTemplate: ``error`` (the single-kernel lowering's reason) where
    the graph is not one product whose operands are inputs, else the rest's own reason.
    ``lower(gm, refs)`` is the ordinary lowering."""
    from workers.search.lowering import _MATMUL_OPS

    calls = [n for n in gm.graph.nodes if n.op == "call_function"]
    mms = [n for n in calls if n.target in _MATMUL_OPS]
    if len(mms) != 1:
        raise error
    mm = mms[0]
    users = list(mm.users)
    if (
        len(users) == 1
        and users[0].target in _VIEWS
        and users[0].meta["val"].shape[-1] == mm.meta["val"].shape[-1]
    ):
        mm = users[0]  # Linear on [..., K]: the product's rows viewed back as the input's
    try:
        first = lower(*_used(_up_to(gm, mm), refs))
    except NoTemplate:
        raise error from None
    if first.family != "matmul" or first.reductions():
        raise error
    try:
        rest = lower(*_used(_after(gm, mm), [*refs, STAGE_REF]))
    except NoTemplate as exc:
        raise NoTemplate(f"after the matrix product, {exc}") from None
    if rest.family in ("matmul", "attention"):
        raise error
    plan = Plan(family=f"matmul+{rest.family}", forward_args=[], init_source="", preamble="")
    plan.stages = [first, rest]
    plan.extra["stage_shape"] = [int(d) for d in mm.meta["val"].shape]
    return plan


def _up_to(gm: torch.fx.GraphModule, mm: torch.fx.Node) -> torch.fx.GraphModule:
    """``gm`` returning the product ``mm`` (everything after it dropped; the inputs kept)."""
    graph = torch.fx.Graph()
    env: dict = {}
    for node in gm.graph.nodes:
        if node.op == "output":
            continue
        env[node] = graph.node_copy(node, lambda n: env[n])
    graph.output(env[mm])
    graph.eliminate_dead_code()
    return torch.fx.GraphModule(gm, graph)


def _after(gm: torch.fx.GraphModule, mm: torch.fx.Node) -> torch.fx.GraphModule:
    """``gm`` with the product read from one more input, placed after the others (its
    operands and what only they used dropped; the inputs kept)."""
    graph = torch.fx.Graph()
    env: dict = {}
    holders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for node in holders:
        env[node] = graph.node_copy(node, lambda n: env[n])
    product = graph.placeholder(STAGE_REF)
    product.meta = dict(mm.meta)
    env[mm] = product
    for node in gm.graph.nodes:
        if node.op == "output":
            graph.output(torch.fx.map_arg(node.args[0], lambda n: env[n]))
        elif node.op != "placeholder" and node is not mm:
            env[node] = graph.node_copy(node, lambda n: env[n])
    graph.eliminate_dead_code()
    return torch.fx.GraphModule(gm, graph)


def _used(gm: torch.fx.GraphModule, refs: list[str]) -> tuple[torch.fx.GraphModule, list[str]]:
    """``gm`` without the inputs its stage never reads (the product's operands after it, a
    bias before it), and the references of those it keeps: an unread input would otherwise
    count among the stage's rows and be passed to its kernel."""
    holders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    kept = []
    for node, ref in zip(holders, refs, strict=True):
        if node.users:
            kept.append(ref)
        else:
            gm.graph.erase_node(node)
    gm.recompile()
    return gm, kept
