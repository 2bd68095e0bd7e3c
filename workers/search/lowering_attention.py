"""Lower an attention reference to the ``attention`` family's plan.

Two spellings are recognised:

- **written out**, as Hugging Face's eager attention and most model code write it:
  ``matmul(q, kᵀ)`` (times or divided by a number, or ``q`` scaled first), an optional causal
  mask computed from shapes only (``tril``/``triu`` of ``ones``, ``arange`` comparisons, an
  additive ``-inf`` matrix), a softmax over the keys (in float32 or not), ``matmul(probs, v)``;
  key/value heads shared by groups of query heads (``repeat_interleave`` or the
  ``unsqueeze``/``expand``/``reshape`` of ``repeat_kv``);
- **PyTorch's** ``F.scaled_dot_product_attention`` (with ``is_causal``, ``scale``,
  ``enable_gqa``; no ``attn_mask``, no dropout).

Anything else in the graph (a mask that is an input, dropout, a bias, ops after the output
product) is refused with the reason. The plan's ``extra`` holds what the kernel needs: the
input names, the scale, whether a causal mask applies and, where the trace shows it, which
diagonal it keeps (``align``: ``bottom_right`` when the queries are the last positions of the
keys, as in decoding with a KV cache; ``top_left`` as ``scaled_dot_product_attention`` aligns
it). A mask's diagonal is a number in the trace, so the template searches both alignments
when the trace cannot tell, and the correctness gates decide.
"""

from __future__ import annotations

import math
import operator

import torch

from workers.search.lowering import NoTemplate, Plan

aten = torch.ops.aten

_MATMULS = {aten.bmm.default, aten.matmul.default}
# Ops that pass a value through unchanged (shape, copy or dtype), on any operand.
_PASS = {
    aten.view.default,
    aten._unsafe_view.default,
    aten.reshape.default,
    aten.expand.default,
    aten.clone.default,
    aten.contiguous.default,
    aten.alias.default,
    aten.detach.default,
    aten._to_copy.default,
    aten.lift_fresh_copy.default,
}
# Ops that repeat key/value heads for grouped-query attention (repeat_interleave semantics).
_REPEAT = {
    aten.unsqueeze.default,
    aten.repeat_interleave.self_int,
    aten.slice.Tensor,  # repeat_kv's hidden[:, :, None] records a full slice first
}
_TRANSPOSES = {aten.transpose.int, aten.permute.default, aten.t.default}


def is_attention(calls: list[torch.fx.Node]) -> bool:
    """Whether the graph looks like attention: an SDPA call, or a softmax between two matrix
    products."""
    names = [getattr(n.target, "__name__", str(n.target)) for n in calls]
    if any("scaled_dot_product" in name for name in names):
        return True
    softmax = [i for i, n in enumerate(calls) if n.target == aten._softmax.default]
    mms = [i for i, n in enumerate(calls) if n.target in _MATMULS]
    return (
        len(softmax) == 1 and any(i < softmax[0] for i in mms) and any(i > softmax[0] for i in mms)
    )


def _full_slice(node: torch.fx.Node) -> bool:
    """``x[:, :, None]`` records slices that keep every element; a real slice changes keys."""
    a = list(node.args) + [0, 0, None, None, 1][len(node.args) :]
    size = node.args[0].meta["val"].shape[a[1]]
    return (a[2] or 0) == 0 and (a[3] is None or a[3] >= size) and (a[4] or 1) == 1


def _ancestors(node: torch.fx.Node) -> set[torch.fx.Node]:
    seen, todo = set(), [node]
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        todo.extend(x for x in n.all_input_nodes)
    return seen


class _Walk:
    """Follows operands back to the problem's inputs, remembering every node it passes."""

    def __init__(self, placeholders: list[torch.fx.Node], refs: list[str]) -> None:
        self.ref = dict(zip(placeholders, refs, strict=True))
        self.seen: set[torch.fx.Node] = set()
        self.scale = 1.0

    def scalar(self, a) -> float:
        if isinstance(a, bool) or not isinstance(a, int | float):
            raise NoTemplate("attention scaled by a tensor; templates take a number")
        return float(a)

    def to_input(self, node, *, allow: set, what: str) -> tuple[str, int]:
        """(input name, transposes passed) for ``node``: views, copies, casts and the ops in
        ``allow`` only; a multiply or divide by a number folds into the scale."""
        transposes = 0
        while isinstance(node, torch.fx.Node) and node.op == "call_function":
            self.seen.add(node)
            t = node.target
            if t in _TRANSPOSES:
                transposes += 1
            elif t == aten.slice.Tensor and not _full_slice(node):
                raise NoTemplate(f"attention {what} is a slice of an input; no template fits")
            elif t in (aten.mul.Tensor, aten.mul.Scalar) and not isinstance(
                node.args[1], torch.fx.Node
            ):
                self.scale *= self.scalar(node.args[1])
            elif t in (aten.div.Tensor, aten.div.Scalar) and not isinstance(
                node.args[1], torch.fx.Node
            ):
                self.scale /= self.scalar(node.args[1])
            elif t not in _PASS and t not in allow:
                raise NoTemplate(f"attention {what} computed by {t}; no template fits")
            node = node.args[0]
        if node not in self.ref:
            raise NoTemplate(f"attention {what} is not an input of the forward")
        self.seen.add(node)
        return self.ref[node], transposes

    def mask(self, node) -> None:
        """A mask must come from shapes alone (ones, arange, full, tril/triu and comparisons):
        an input in it is a padding or document mask, which the template does not take."""
        if not isinstance(node, torch.fx.Node):
            raise NoTemplate("attention mask is not a tensor")
        above = _ancestors(node)
        if any(n.op == "placeholder" for n in above):
            raise NoTemplate("attention with a mask that is an input is not covered")
        self.seen |= above


def _tril_offset(node: torch.fx.Node) -> int | None:
    """The diagonal a ``tril(ones, k)`` keeps (or ``triu(ones, k)`` masks out), as traced."""
    for n in _ancestors(node):
        if n.op == "call_function" and n.target == aten.tril.default:
            return int(n.args[1]) if len(n.args) > 1 else 0
        if n.op == "call_function" and n.target == aten.triu.default:
            return (int(n.args[1]) if len(n.args) > 1 else 0) - 1
    return None


def lower_attention(gm: torch.fx.GraphModule, refs: list[str]) -> Plan:
    graph = gm.graph
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    calls = [n for n in graph.nodes if n.op == "call_function"]
    walk = _Walk(placeholders, refs)
    out_node = next(n for n in graph.nodes if n.op == "output")
    outs = out_node.args[0]
    outs = list(outs) if isinstance(outs, list | tuple) else [outs]
    if len(outs) != 1 or not isinstance(outs[0], torch.fx.Node):
        raise NoTemplate("attention with several outputs is not covered")
    sdpa = [n for n in calls if "scaled_dot_product" in getattr(n.target, "__name__", "")]
    causal, offset = False, None
    if sdpa:
        if len(sdpa) != 1:
            raise NoTemplate(f"{len(sdpa)} attention calls in the reference; templates fuse one")
        call = sdpa[0]
        a, kw = call.args, call.kwargs
        names = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal")
        if "for_cpu" in call.target.__name__ or "flash" in call.target.__name__:
            names = ("query", "key", "value", "dropout_p", "is_causal")
        args = {**dict(zip(names, a, strict=False)), **kw}
        if args.get("attn_mask") is not None:
            raise NoTemplate("scaled_dot_product_attention with attn_mask is not covered")
        if float(args.get("dropout_p") or 0.0) != 0.0:
            raise NoTemplate("attention with dropout is not covered")
        causal = bool(args.get("is_causal", False))
        offset = 0 if causal else None  # SDPA's causal mask keeps the top-left diagonal
        node = outs[0]
        while node is not call:
            if not (node.target is operator.getitem and node.args[1] == 0) and (
                node.target not in _PASS
            ):
                raise NoTemplate(f"attention output passes through {node.target}")
            walk.seen.add(node)
            node = node.args[0]
        walk.seen.add(call)
        q, tq = walk.to_input(args["query"], allow=set(), what="query")
        k, tk = walk.to_input(args["key"], allow=set(), what="key")
        v, tv = walk.to_input(args["value"], allow=set(), what="value")
        if tq or tk or tv:
            raise NoTemplate("attention on transposed inputs is not covered")
        head_dim = int(args["query"].meta["val"].shape[-1])
        scale = args.get("scale")
        scale = 1.0 / math.sqrt(head_dim) if scale is None else walk.scalar(scale)
        walk.scale *= scale
    else:
        # Back from the output: views and casts to the second product.
        node = outs[0]
        while node.target not in _MATMULS:
            if node.op != "call_function" or node.target not in _PASS:
                raise NoTemplate(f"attention output passes through {node.target}")
            walk.seen.add(node)
            node = node.args[0]
        pv = node
        walk.seen.add(pv)
        # The probabilities: views and casts of the one softmax.
        probs = pv.args[0]
        while probs.target != aten._softmax.default:
            if probs.target not in _PASS:
                raise NoTemplate(f"attention probabilities pass through {probs.target}")
            walk.seen.add(probs)
            probs = probs.args[0]
        walk.seen.add(probs)
        ndim = len(probs.meta["val"].shape)
        if probs.args[1] % ndim != ndim - 1:
            raise NoTemplate("softmax over other than the keys' dimension")
        v, tv = walk.to_input(pv.args[1], allow=_REPEAT, what="value")
        if tv:
            raise NoTemplate("attention values transposed; no template fits")
        # The scores: casts, scaling and a mask, back to the first product.
        s = probs.args[0]
        while s.target not in _MATMULS:
            walk.seen.add(s)
            t, a = s.target, s.args
            if t in _PASS:
                s = a[0]
            elif t in (aten.mul.Tensor, aten.mul.Scalar) and not isinstance(a[1], torch.fx.Node):
                walk.scale *= walk.scalar(a[1])
                s = a[0]
            elif t in (aten.div.Tensor, aten.div.Scalar) and not isinstance(a[1], torch.fx.Node):
                walk.scale /= walk.scalar(a[1])
                s = a[0]
            elif t in (aten.masked_fill.Scalar, aten.masked_fill.Tensor):
                if not isinstance(a[2], float) or a[2] != float("-inf"):
                    raise NoTemplate("attention scores filled with other than -inf")
                walk.mask(a[1])
                causal, offset = True, _tril_offset(a[1])
                s = a[0]
            elif t == aten.where.self:  # where(keep, scores, -inf)
                fill = a[2]
                walk.mask(a[0])
                if isinstance(fill, torch.fx.Node):
                    walk.mask(fill)
                causal, offset = True, _tril_offset(a[0])
                s = a[1]
            elif t == aten.add.Tensor:  # scores + a -inf triangle built from shapes
                scores, bias = a[0], a[1]
                if isinstance(scores, torch.fx.Node) and scores.op == "call_function":
                    if not any(n.op == "placeholder" for n in _ancestors(bias)):
                        walk.mask(bias)
                        causal, offset = True, _tril_offset(bias)
                        s = scores
                        continue
                raise NoTemplate("attention scores plus a tensor (a bias) are not covered")
            else:
                raise NoTemplate(f"attention scores pass through {t}; no template fits")
        qk = s
        walk.seen.add(qk)
        q, tq = walk.to_input(qk.args[0], allow=set(), what="query")
        k, tk = walk.to_input(qk.args[1], allow=_REPEAT, what="key")
        if tq or tk != 1:
            raise NoTemplate("attention scores are not q @ k transposed")
    unused = [
        n for n in calls if n not in walk.seen and n.users and n.target is not operator.getitem
    ]
    if unused:
        raise NoTemplate(f"attention with extra ops ({unused[0].target}) is not covered")
    by_ref = {r: p for p, r in walk.ref.items()}
    shapes = {r: tuple(by_ref[r].meta["val"].shape) for r in (q, k, v)}
    if any(not by_ref[r].meta["val"].is_floating_point() for r in (q, k, v)):
        raise NoTemplate("attention on non-floating inputs is not covered")
    qs, ks, vs = shapes[q], shapes[k], shapes[v]
    if len(qs) not in (3, 4) or len(ks) != len(qs) or ks != vs:
        raise NoTemplate(
            f"attention shapes q {list(qs)}, k {list(ks)}, v {list(vs)}: templates take "
            "[batch, heads, tokens, head_dim] (or [batch*heads, tokens, head_dim]) with k and v "
            "alike"
        )
    heads_q, heads_kv = (qs[1], ks[1]) if len(qs) == 4 else (qs[0], ks[0])
    if qs[-1] != ks[-1] or heads_q % heads_kv or (len(qs) == 4 and qs[0] != ks[0]):
        raise NoTemplate(
            f"attention shapes q {list(qs)} and k {list(ks)} do not pair query heads with "
            "key/value heads"
        )
    tq_n, tk_n = qs[-2], ks[-2]
    align = None
    if causal and offset is not None:
        if tq_n == tk_n and offset == 0:
            align = None  # either alignment fits the traced shape: the search decides
        elif offset == tk_n - tq_n:
            align = "bottom_right"
        elif offset == 0:
            align = "top_left"
        else:
            raise NoTemplate(f"a causal mask keeping diagonal {offset} is not covered")
    if sdpa and causal:
        align = "top_left"  # is_causal means the top-left diagonal at every shape
    plan = Plan(family="attention", forward_args=[], init_source="", preamble="")
    plan.extra.update(
        q=q,
        k=k,
        v=v,
        scale=float(walk.scale),
        # A scale of 1/sqrt(head_dim) is a rule, not a number: the traced shape's value would be
        # wrong for every other head size.
        scale_rule=(
            "inv_sqrt_head_dim"
            if math.isclose(walk.scale, 1.0 / math.sqrt(qs[-1]), rel_tol=1e-9)
            else "constant"
        ),
        causal=causal,
        align=align,
        head_dim=int(qs[-1]),
        ndim=len(qs),
    )
    groups = heads_q // heads_kv
    plan.summary = (
        f"attention softmax({q} {k}ᵀ × "
        + (f"{walk.scale:.6g}" if plan.extra["scale_rule"] == "constant" else "1/√head_dim")
        + (" + causal mask" if causal else "")
        + f") {v}: {heads_q} query heads"
        + (f" over {heads_kv} key/value heads (groups of {groups})" if groups > 1 else "")
        + f", head dim {qs[-1]}"
    )
    return plan
