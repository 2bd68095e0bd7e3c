"""Matrix products with more around them than one kernel holds, as a chain of kernels (compile
runs them so too): ``Linear`` then a softmax, a GroupNorm, a log-sum-exp over the features, a
cross-entropy over a vocabulary; an MLP (``Linear``, activation, ``Linear``, ...); a product
whose operand is computed (``sigmoid(h) @ W``); a pooling of a product's output.

The graph is cut where a value must be written to memory: at each product's output (after the
view that gives ``Linear`` on ``[..., K]`` its leading dimensions back), at each pooling's, and
at each operand a product or a pooling reads that is computed rather than an input. Each piece
is lowered by the ordinary lowering, the values cut before it read as inputs (``stage_ref(j)``),
and a product's piece takes the pointwise ops after it into its epilogue where the next cut
allows. A stage may be
of any family but attention (row reductions over any dimensions, elementwise, a scan, a
cross-entropy, a pool, a product); the search moves the products' launches and the last
stage's, the others keep their family's defaults.

A product whose epilogue is pointwise is never cut: the single fused kernel writes less."""

from __future__ import annotations

import operator

import torch

from workers.search.ir import NoTemplate, Plan
from workers.search.lowering_attention import _ancestors

aten = torch.ops.aten
MAX_STAGES = 64  # a 16-layer MLP is 17; VGG19 with its activations fused is 25
# Views between a product and the value its stage writes (Linear's rows viewed back as
# ``[..., N]``).
_VIEWS = {aten.view.default, aten._unsafe_view.default, aten.reshape.default}


def stage_ref(j: int) -> str:
    """The name later stages read stage ``j``'s output by (a local of the candidate's forward)."""
    return f"_ke_s{j}"


def lower_staged(gm: torch.fx.GraphModule, refs: list[str], lower, error: NoTemplate) -> Plan:
    """The chain's plan (family ``matmul+<family of the last stage>``, ``stages`` in order), or
    NoTemplate: ``error`` (the single-kernel lowering's reason) where the graph has no product
    (then :func:`lower_chain`), or its first product's own piece does not lower; else the failing
    piece's own reason, said to be before or after the product. ``lower(gm, refs)`` is the
    ordinary lowering."""
    from workers.search.lowering import (
        _COPIES,
        _MATMUL_OPS,
        _OPERAND_VIEWS,
        _PERMUTES,
        refuse_convolutions,
    )
    from workers.search.lowering_conv import CONVS
    from workers.search.lowering_pool import _POOLS, _UNIT_VIEWS

    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    mms = [n for n in gm.graph.nodes if n.op == "call_function" and n.target in _MATMUL_OPS]
    try:
        refuse_convolutions(list(gm.graph.nodes))  # one the conv family does not write
    except NoTemplate:
        raise error from None
    # A pooling op is a kernel of its own too (the pool family pools a tensor read as it is),
    # and so is a convolution (the conv family convolves an input, or a stage's output).
    pools = [n for n in gm.graph.nodes if n.op == "call_function" and n.target in {*_POOLS, *CONVS}]
    if not mms:
        return lower_chain(gm, refs, lower, error)
    cuts: set = set()
    for mm in mms + pools:
        for operand in mm.args[:3] if mm in mms else mm.args[:1]:
            root, copy = operand, None
            while (
                mm.target not in CONVS  # the conv family convolves a written tensor as it is
                and isinstance(root, torch.fx.Node)
                and root.op == "call_function"
                and (root.target in _OPERAND_VIEWS or root.target in _PERMUTES)
            ):
                if root.target in _COPIES and copy is None:
                    copy = root
                elif root.target in _PERMUTES and copy is not None:
                    # A copy of a permuted view (heads split out of a wider product's output,
                    # ``q.view(B, T, nh, hs).transpose(1, 2)`` merged into one batch): no
                    # strides read it, so the copy is a move kernel of its own, as eager makes.
                    root = copy
                    break
                root = root.args[0]
            if isinstance(root, torch.fx.Node) and root.op == "call_function":
                cuts.add(root)  # a computed operand: written by the stage before
        users = list(mm.users)
        if mm in pools:
            values = [u for u in users if u.target is operator.getitem and u.args[1] == 0]
            cut = values[0] if values else mm  # max pooling's values, not its indices
            while len(cut.users) == 1 and next(iter(cut.users)).target in _UNIT_VIEWS:
                cut = next(iter(cut.users))  # a 1-d pool's inserted dimensions dropped again
            cuts.add(cut)
            continue
        if (
            len(users) == 1
            and users[0].target in _VIEWS
            and users[0].meta["val"].shape[-1] == mm.meta["val"].shape[-1]
        ):
            mm = users[0]  # Linear on [..., K]: the product's rows viewed back as the input's
        cuts.add(mm)
    out = next(n for n in gm.graph.nodes if n.op == "output")
    cuts = _fused_attention(gm, cuts, set(mms), refs, lower, order)
    ends = sorted(cuts, key=order.get)
    if ends and _returns(out) == [ends[-1]]:
        ends = ends[:-1]  # the last product is the output itself: its stage is the last
    ends.append(out)
    if len(ends) > 2 * MAX_STAGES:  # before fusing each activation into its product
        raise NoTemplate(
            f"{len(ends) - 1} products, convolutions and poolings to cut the reference at; "
            f"templates chain at most {MAX_STAGES} kernels"
        )
    stages: list[Plan] = []
    kept: list = []  # the cut values written so far (the stages' outputs)
    i = 0
    while i < len(ends):
        # A product's stage takes the next piece in too where the two lower as one matmul
        # kernel (an activation between two products of an MLP, before the next cut), and a
        # convolution's where they lower as one conv kernel (a CNN's BatchNorm and ReLU).
        plan = None
        # (only a piece that reads this one: parallel products, q, k and v's projections,
        # are each a stage)
        if i + 1 < len(ends) and ends[i] in _ancestors(ends[i + 1]):
            try:
                plan = lower(*_piece(gm, kept, ends[i + 1], refs))
            except NoTemplate:
                plan = None
            if plan is not None and plan.family not in ("matmul", "conv"):
                plan = None
        if plan is not None:
            i += 1
        else:
            try:
                plan = lower(*_piece(gm, kept, ends[i], refs))
            except NoTemplate as exc:
                if not stages and order[ends[i]] >= order[mms[0]]:
                    raise error from None  # the first product itself does not lower
                # Not one kernel (a norm over the batch, then a softmax over the features):
                # the longest part of the piece that is, written out, and the piece again.
                lo = order[kept[-1]] if kept else -1
                split = _longest_prefix(gm, kept, refs, lower, _ends(gm), lo, order[ends[i]])
                if split is not None and split[1].family not in ("attention", "matmul"):
                    kept.append(split[0])
                    stages.append(split[1])
                    if len(stages) > MAX_STAGES:
                        raise NoTemplate(
                            f"more than {MAX_STAGES} kernels in a chain; templates chain at most "
                            f"{MAX_STAGES}"
                        ) from None
                    continue
                where = "after" if any(s.family == "matmul" for s in stages) else "before"
                raise NoTemplate(f"{where} the matrix product, {exc}") from None
        if len(plan.outputs) > 1 and i < len(ends) - 1:
            raise error
        stages.append(plan)
        if i < len(ends) - 1:
            kept.append(ends[i])
        i += 1
    if len(stages) < 2:
        raise error
    if len(stages) > MAX_STAGES:
        raise NoTemplate(f"{len(stages)} kernels in a chain; templates chain at most {MAX_STAGES}")
    top = Plan(family=_chain_family("matmul", stages), forward_args=[], init_source="", preamble="")
    top.stages = stages
    top.extra["stage_shapes"] = [[int(d) for d in n.meta["val"].shape] for n in kept]
    return top


def _fused_attention(gm, cuts: set, mms: set, refs: list[str], lower, order: dict) -> set:
    """``cuts`` less those inside an attention one flash-attention kernel takes whole: a
    softmax between two products (``softmax(q @ kᵀ · s, masked) @ v``) whose operands are
    heads split out of an earlier product's output (minGPT's ``c_attn``), cut apart for
    ``bmm`` (each head copied, the scores and the probabilities written). The attention's
    piece runs from the cuts before it to the first cut after its second product (where the
    heads go back side by side); where that piece does not lower as attention, ``cuts`` stay."""
    from workers.search.lowering import _COPIES, _OPERAND_VIEWS, _PERMUTES

    passing = _OPERAND_VIEWS | _PERMUTES | _COPIES
    out = next(n for n in gm.graph.nodes if n.op == "output")
    for node in gm.graph.nodes:
        if node.target == aten._softmax.default:
            above = _ancestors(node)
            qk = max((m for m in mms if m in above), key=order.get, default=None)
            pv = min((m for m in mms if node in _ancestors(m)), key=order.get, default=None)
            if qk is None or pv is None:
                continue
            end = pv
        elif "scaled_dot_product" in getattr(node.target, "__name__", ""):
            qk = pv = node
            end = next(
                (u for u in node.users if u.target is operator.getitem and u.args[1] == 0), node
            )
        else:
            continue
        # Forward to where the heads are side by side: their copy, or the view merging them.
        while len(end.users) == 1:
            (user,) = end.users
            if user.op == "output" or user.target not in passing:
                break
            merge = user.meta["val"].dim() == 3 and end.meta["val"].dim() == 4
            end = user
            if merge or (end in cuts and end.target in _COPIES):
                break
        last = out if set(end.users) == {out} else end
        before = _ancestors(end)
        others = [c for c in cuts if c in before and _product_cut(c, mms - {qk, pv})]
        held = set().union(*(_ancestors(c) for c in others)) if others else set()
        inner = {c for c in cuts if c in before and c is not end and c not in held}
        if not inner:
            continue
        kept = sorted((c for c in cuts - inner if order[c] < order[end]), key=order.get)
        try:
            plan = lower(*_piece(gm, kept, last, refs))
        except NoTemplate:
            continue
        if plan.family == "attention":
            cuts = (cuts - inner) | ({end} if last is end else set())
    return cuts


def _product_cut(cut, mms: set) -> bool:
    """Whether ``cut`` is a product's output (or its view), of one of ``mms``."""
    node = cut
    while node.op == "call_function" and node not in mms and node.target in _VIEWS:
        node = node.args[0]
    return node in mms


def lower_chain(gm: torch.fx.GraphModule, refs: list[str], lower, error: NoTemplate) -> Plan:
    """A graph without products that no one kernel holds (reductions over two sets of
    dimensions: a softmax over the batch, then a sum over the features; a norm, then a
    reduction over a view that changes the rows), as a chain of kernels (family
    ``chain+<family of the last stage>``): the longest prefix that lowers as one kernel writes
    its last value, and the rest reads it, cut again where it must be. NoTemplate ``error`` (the
    single kernel's reason) where no cut helps."""
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    out = next(n for n in gm.graph.nodes if n.op == "output")
    ends = _ends(gm)
    stages: list[Plan] = []
    kept: list = []
    while True:
        try:
            stages.append(lower(*_piece(gm, kept, out, refs)))
            break
        except NoTemplate:
            pass
        # The latest value still read on the way to the output: after the last one written,
        # else one before it (a masked mean: the mask's count written first, then the masked
        # sum, a reduction over another dimension, then their quotient).
        if len(stages) + 2 > MAX_STAGES:
            raise NoTemplate(
                f"more than {MAX_STAGES} kernels in a chain; templates chain at most {MAX_STAGES}"
            )
        found = _longest_prefix(gm, kept, refs, lower, _live(ends, kept, out), -1, order[out])
        if found is None:
            raise error
        kept.append(found[0])
        stages.append(found[1])
    if len(stages) < 2:
        raise error
    if any(s.family in ("attention", "matmul") for s in stages):
        raise error
    top = Plan(family=_chain_family("chain", stages), forward_args=[], init_source="", preamble="")
    top.stages = stages
    top.extra["stage_shapes"] = [[int(d) for d in n.meta["val"].shape] for n in kept]
    return top


def _chain_family(head: str, stages: list[Plan]) -> str:
    """A chain's family: ``<head>+<the last stage's family>``, the head ``conv`` where a
    convolution (and no product) leads it: whose parameters the search tunes beside the last
    stage's."""
    if head == "chain" and any(s.family == "conv" for s in stages[:-1]):
        head = "conv"
    return f"{head}+{stages[-1].family}"


def _ends(gm: torch.fx.GraphModule) -> list:
    """Values a later kernel can read where a chain is cut: floating tensors (a 0-d total too)
    that a later op (not the output alone) uses, not views (a view's source is the value to
    write); the 0-d ones listed first."""
    out = next(n for n in gm.graph.nodes if n.op == "output")
    ends = [
        n
        for n in gm.graph.nodes
        if n.op == "call_function"
        and n.users
        and isinstance(n.meta.get("val"), torch.Tensor)
        and n.meta["val"].is_floating_point()
        and n.target not in _VIEWS
        and out not in n.users
    ]
    # 0-d totals first, so that a cut is tried there only where no tensor's helps (the latest
    # is tried first): arithmetic on a total alone is not a kernel of its own.
    return [n for n in ends if n.meta["val"].dim() == 0] + [n for n in ends if n.meta["val"].dim()]


def _live(ends: list, kept: list, out: torch.fx.Node) -> list:
    """Those of ``ends`` the output still reads other than through a value ``kept`` (written
    already), in graph order."""
    live, todo = set(), [out]
    while todo:
        node = todo.pop()
        for arg in node.all_input_nodes:
            if arg not in live and arg not in kept:
                live.add(arg)
                todo.append(arg)
    return [n for n in ends if n in live]


def _longest_prefix(gm, kept: list, refs: list[str], lower, ends: list, lo: int, hi: int):
    """(the last of ``ends`` (in their order) strictly between graph positions ``lo`` and
    ``hi`` whose value one kernel computes from the inputs and the values ``kept``, that
    kernel's plan), or None."""
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    for end in reversed([n for n in ends if lo < order[n] < hi]):
        try:
            return end, lower(*_piece(gm, kept, end, refs))
        except Exception:  # noqa: BLE001 - a part of a graph the lowering was not written for
            continue
    return None


def _returns(out: torch.fx.Node) -> list:
    values = out.args[0]
    return list(values) if isinstance(values, list | tuple) else [values]


def _piece(gm: torch.fx.GraphModule, kept: list, end: torch.fx.Node, refs: list[str]):
    """(the graph that computes ``end`` from the inputs and the values already written, read
    as inputs named ``stage_ref(j)``; the references of the inputs it reads). ``end`` is the
    output node for the last piece."""
    graph = torch.fx.Graph()
    env: dict = {}
    holders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for node in holders:
        env[node] = graph.node_copy(node, lambda n: env[n])
    for j, node in enumerate(kept):
        held = graph.placeholder(stage_ref(j))
        # A stage writes its output contiguous, whatever strides the reference's value had.
        held.meta = {**node.meta, "val": node.meta["val"].contiguous()}
        env[node] = held
    for node in gm.graph.nodes:
        if node.op == "placeholder" or node in env:
            continue
        if node.op == "output":
            graph.output(torch.fx.map_arg(node.args[0], lambda n: env[n]))
            break
        env[node] = graph.node_copy(node, lambda n: env[n])
        if node is end:
            graph.output(env[node])
            break
    graph.eliminate_dead_code()
    for node in reversed(list(graph.nodes)):  # what fx keeps as impure (an SDPA call) too
        schema = getattr(node.target, "_schema", None)
        if node.op == "call_function" and not node.users and not (schema and schema.is_mutable):
            graph.erase_node(node)
    names = [*refs, *(stage_ref(j) for j in range(len(kept)))]
    used = []
    for node, ref in zip([n for n in graph.nodes if n.op == "placeholder"], names, strict=True):
        if node.users:
            used.append(ref)
        else:  # an input this piece never reads would count among its rows
            graph.erase_node(node)
    return torch.fx.GraphModule(gm, graph), used
