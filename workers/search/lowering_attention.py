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
_SPLITS = {aten.split.Tensor, aten.split_with_sizes.default}
_RESHAPES = {aten.view.default, aten._unsafe_view.default, aten.reshape.default}


def _mask_words(mask: dict) -> str:
    how = "equals" if mask["fill"] == "eq" else "differs from"
    return f", -inf where {mask['ref']} {how} {mask['value']:g}"


def _split_dim(before: list[int], after: list[int]) -> int | None:
    """The dimension a view splits in two (``(B, T, C) -> (B, T, nh, hs)``), or None."""
    if len(after) != len(before) + 1:
        return None
    for d in range(len(before)):
        if (
            before[:d] == after[:d]
            and before[d + 1 :] == after[d + 2 :]
            and after[d] * after[d + 1] == before[d]
        ):
            return d
    return None


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
        self.bound: dict[str, tuple[str, tuple[int, ...]]] = {}
        self.dtypes: list[torch.dtype] = []  # of q, k and v

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

    def operand(self, node, *, what: str, allow: set, transposes: int) -> str:
        """The input ``node`` reads (an input of the forward read through its strides, with
        ``transposes`` on the way), or a view of one bound in the wrapper (``bind``): heads
        split from a projection's ``(B, T, C)`` output, which the walk back to an input meets
        as another number of transposes or another rank."""
        scale = self.scale
        self.dtypes.append(node.meta["val"].dtype)
        try:
            ref, got = self.to_input(node, allow=allow, what=what)
            if got == transposes and not _through_4d(node, self.ref):
                return ref
        except NoTemplate:
            pass
        self.scale = scale  # the view's walk folds the same numbers again
        return self.bind(what, node, transposed=bool(transposes) and what == "key")

    def bind(self, what: str, node, transposed: bool) -> str:
        """The local name of a ``[batch, heads, tokens, head_dim]`` view (see ``heads``) the
        wrapper binds before the launch."""
        name = f"_ke_{what[0]}"
        self.bound[name] = self.heads(node, what=what, transposed=transposed)
        return name

    def heads(self, node, *, what: str, transposed: bool) -> tuple[str, tuple[int, ...]]:
        """(the expression of a ``[batch, heads, tokens, head_dim]`` view, its shape) for an
        operand ``bmm`` reads as ``[batch * heads, ...]``, where no input is that view itself:
        heads split out of one projection's output (``c_attn(x).split(C, 2)``, viewed as
        ``(B, T, nh, hs)`` and transposed). The view is read through its strides, where eager
        copies it. A key read transposed (``k.transpose(-2, -1)``) is given untransposed; a
        multiply or divide by a number folds into the scale."""
        while isinstance(node, torch.fx.Node) and node.op == "call_function":
            if node.meta["val"].dim() == 4:
                break
            if node.target not in _PASS:
                raise NoTemplate(f"attention {what} computed by {node.target}; no template fits")
            self.seen.add(node)
            node = node.args[0]
        if not isinstance(node, torch.fx.Node) or node.meta["val"].dim() != 4:
            raise NoTemplate(f"attention {what} is not a view of [batch, heads, tokens, dim]")
        shape = tuple(int(d) for d in node.meta["val"].shape)
        expr = self._view_expr(node, what)
        if transposed:  # a key read as kᵀ by the scores' product: its last two dimensions back
            undo = ".transpose(-2, -1)"
            expr = expr[: -len(undo)] if expr.endswith(undo) else expr + undo
            shape = shape[:2] + (shape[3], shape[2])
        return expr, shape

    def _view_expr(self, node, what: str) -> str:
        """Python for ``node`` as views of an input: transposes, the pieces of an equal split,
        a dimension split in two (the number of heads kept, the head size following the
        input), copies and same-size expands (the view is read as it is)."""
        ops: list[str] = []
        while isinstance(node, torch.fx.Node) and node.op == "call_function":
            self.seen.add(node)
            t, a = node.target, node.args
            val, src = node.meta["val"], None
            if t is operator.getitem and a[0].target in _SPLITS:
                split = a[0]
                self.seen.add(split)
                src = split.args[0]
                dim = int(split.args[2] if len(split.args) > 2 else 0) % src.meta["val"].dim()
                whole, piece = int(src.meta["val"].shape[dim]), int(val.shape[dim])
                if piece == 0 or whole % piece or split.target != aten.split.Tensor:
                    raise NoTemplate(f"attention {what} is a piece of an unequal split")
                ops.append(f".unflatten({dim}, ({whole // piece}, -1)).select({dim}, {a[1]})")
            elif t in _TRANSPOSES and t != aten.permute.default:
                dims = (1, 0) if t == aten.t.default else (int(a[1]), int(a[2]))
                ops.append(f".transpose({dims[0]}, {dims[1]})")
            elif t == aten.permute.default:
                ops.append(f".permute({[int(d) for d in a[1]]})")
            elif t in _RESHAPES:
                before = [int(d) for d in a[0].meta["val"].shape]
                after = [int(d) for d in val.shape]
                cut = _split_dim(before, after)
                if cut is None:
                    raise NoTemplate(f"attention {what} is a view of {before} as {after}")
                ops.append(f".unflatten({cut}, ({after[cut]}, -1))")
            elif t in (aten.mul.Tensor, aten.mul.Scalar, aten.div.Tensor, aten.div.Scalar) and (
                not isinstance(a[1], torch.fx.Node)
            ):
                factor = self.scalar(a[1])
                self.scale *= factor if t in (aten.mul.Tensor, aten.mul.Scalar) else 1 / factor
            elif t == aten.expand.default and list(val.shape) == list(a[0].meta["val"].shape):
                pass
            elif t not in _PASS - {aten.expand.default, aten._to_copy.default}:
                raise NoTemplate(f"attention {what} computed by {t}; no template fits")
            if src is None:
                src = a[0]
            node = src
        if node not in self.ref:
            raise NoTemplate(f"attention {what} is not an input of the forward")
        self.seen.add(node)
        return self.ref[node] + "".join(reversed(ops))

    def tensor_mask(self, cond, scores) -> dict:
        """A mask read from a tensor (a causal mask buffered for the longest sequence and
        sliced to the input's, ``bias[:, :, :T, :T] == 0``; a padding mask): the kernel reads
        it at each score through its strides, a dimension of one broadcast. ``fill`` says
        where the score becomes -inf: where the tensor equals ``value``, or where it does not."""
        fill, value, node = "ne", 0.0, cond
        number = len(node.args) > 1 and not isinstance(node.args[1], torch.fx.Node)
        if node.target in (aten.eq.Scalar, aten.ne.Scalar) and number:
            fill = "eq" if node.target == aten.eq.Scalar else "ne"
            value = self.scalar(node.args[1])
            self.seen.add(node)
            node = node.args[0]
        elif node.target in (aten.logical_not.default, aten.bitwise_not.default):
            fill = "eq"
            self.seen.add(node)
            node = node.args[0]
        elif node.meta["val"].dtype != torch.bool:
            raise NoTemplate("attention scores filled where a non-boolean tensor is nonzero")
        want = [int(d) for d in scores.meta["val"].shape]
        ops: list[str] = []
        while isinstance(node, torch.fx.Node) and node.op == "call_function":
            self.seen.add(node)
            t, a = node.target, node.args
            if t == aten.unsqueeze.default:
                ops.append(f".unsqueeze({int(a[1])})")
            elif t == aten.slice.Tensor:
                rank = a[0].meta["val"].dim()
                dim = int(a[1]) % rank
                start = a[2] if len(a) > 2 else 0
                step = a[4] if len(a) > 4 else 1
                pos = dim - rank + len(want)
                if start not in (0, None) or step != 1 or pos < len(want) - 2:
                    raise NoTemplate("attention mask sliced other than to the first queries/keys")
                if int(node.meta["val"].shape[dim]) != want[pos]:
                    raise NoTemplate("attention mask sliced to other than the scores' size")
            elif t not in (aten.alias.default, aten.detach.default):
                raise NoTemplate(f"attention mask computed by {t}; no template fits")
            node = a[0]
        if node not in self.ref:
            raise NoTemplate("attention mask is not an input of the forward")
        self.seen.add(node)
        # Its shape as the kernel reads it: the unsqueezes applied, the slices not (the kernel
        # reads the first queries' and keys' entries of what it is given).
        shape = [int(d) for d in node.meta["val"].shape]
        for op in reversed(ops):
            dim = int(op[len(".unsqueeze(") : -1])
            shape.insert(dim % (len(shape) + 1), 1)
        if len(shape) > 4 or len(shape) < 2:
            raise NoTemplate(f"attention mask of shape {shape}")
        got = [1] * (4 - len(shape)) + shape
        if any(g not in (1, w) for g, w in zip(got[:2], want[:2], strict=True)) or any(
            g != 1 and g < w for g, w in zip(got[2:], want[2:], strict=True)
        ):
            raise NoTemplate(f"attention mask of shape {shape} for scores {want}")
        return {"ref": self.ref[node] + "".join(reversed(ops)), "fill": fill, "value": value}

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


def _through_4d(node, inputs: dict) -> bool:
    """Whether the walk from ``node`` back to an input of fewer than four dimensions passes
    a 4-d value (heads viewed out of a ``(B, T, C)`` projection): then no stride of the input
    reads it as the kernel's ``[batch, heads, tokens, dim]``."""
    seen_4d = False
    while isinstance(node, torch.fx.Node) and node.op == "call_function":
        seen_4d = seen_4d or node.meta["val"].dim() == 4
        node = node.args[0]
    return seen_4d and node in inputs and node.meta["val"].dim() < 4


def _output_path(walk: _Walk, node, out_ops: list, stop) -> torch.fx.Node:
    """Back from the output to the attention's product (where ``stop``): views and casts, and
    where the heads go back side by side (``y.transpose(1, 2).contiguous()``, viewed as ``(B,
    T, C)``), the transposes the kernel's store takes and the merge of the last two
    dimensions, appended to ``out_ops`` from the output back."""
    while not stop(node):
        if node.op != "call_function" or not (
            node.target in _PASS | {aten.transpose.int}
            or (node.target is operator.getitem and node.args[1] == 0)
        ):
            raise NoTemplate(f"attention output passes through {node.target}")
        val, before = node.meta["val"], node.args[0].meta["val"]
        if node.target == aten.transpose.int:
            out_ops.append((int(node.args[1]) % 4, int(node.args[2]) % 4))
        elif node.target is operator.getitem:
            pass
        elif before.dim() == 4 and val.dim() == 3 and list(val.shape[:2]) == list(before.shape[:2]):
            if out_ops:
                raise NoTemplate("attention output merged before it is transposed, or twice")
            out_ops.append("merge")
        elif node.target in _RESHAPES and val.dim() == 4 and before.dim() == 3:
            pass  # the product's [batch * heads, ...] viewed as [batch, heads, ...]
        elif node.target in _RESHAPES and list(val.shape) != list(before.shape):
            raise NoTemplate(f"attention output viewed as {list(val.shape)}")
        walk.seen.add(node)
        node = node.args[0]
    return node


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
    tensor_mask: dict | None = None
    out_ops: list = []  # from the output back: transposes (dims), "merge"
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
        node = _output_path(walk, outs[0], out_ops, lambda n: n is call)
        walk.seen.add(call)
        q = walk.operand(args["query"], what="query", allow=set(), transposes=0)
        k = walk.operand(args["key"], what="key", allow=set(), transposes=0)
        v = walk.operand(args["value"], what="value", allow=set(), transposes=0)
        head_dim = int(args["query"].meta["val"].shape[-1])
        scale = args.get("scale")
        scale = 1.0 / math.sqrt(head_dim) if scale is None else walk.scalar(scale)
        walk.scale *= scale
    else:
        node = _output_path(walk, outs[0], out_ops, lambda n: n.target in _MATMULS)
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
        v = walk.operand(pv.args[1], what="value", allow=_REPEAT, transposes=0)
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
                if any(n.op == "placeholder" for n in _ancestors(a[1])):
                    if tensor_mask is not None:
                        raise NoTemplate("attention scores masked by two tensors")
                    tensor_mask = walk.tensor_mask(a[1], s)
                else:
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
        q = walk.operand(qk.args[0], what="query", allow=set(), transposes=0)
        k = walk.operand(qk.args[1], what="key", allow=_REPEAT, transposes=1)
    unused = [
        n for n in calls if n not in walk.seen and n.users and n.target is not operator.getitem
    ]
    if unused:
        raise NoTemplate(f"attention with extra ops ({unused[0].target}) is not covered")
    by_ref = {r: p for p, r in walk.ref.items()}
    shapes = {
        r: walk.bound[r][1] if r in walk.bound else tuple(by_ref[r].meta["val"].shape)
        for r in (q, k, v)
    }
    if not all(d.is_floating_point for d in walk.dtypes):
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
    if walk.bound:  # q, k, v as views of a wider input, bound in the wrapper
        plan.extra["bind"] = {r: expr for r, (expr, _) in walk.bound.items()}
    if tensor_mask is not None:
        if len(qs) != 4:
            raise NoTemplate("attention with a mask tensor over 3-d heads is not covered")
        plan.extra["mask"] = tensor_mask
    if out_ops:
        plan.extra["out_ops"] = list(reversed(out_ops))  # in the reference's order
    groups = heads_q // heads_kv
    plan.summary = (
        f"attention softmax({q} {k}ᵀ × "
        + (f"{walk.scale:.6g}" if plan.extra["scale_rule"] == "constant" else "1/√head_dim")
        + (" + causal mask" if causal else "")
        + (_mask_words(tensor_mask) if tensor_mask else "")
        + f") {v}: {heads_q} query heads"
        + (f" over {heads_kv} key/value heads (groups of {groups})" if groups > 1 else "")
        + f", head dim {qs[-1]}"
    )
    return plan
