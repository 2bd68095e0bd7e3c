"""Lower a traced ATen graph into the small expression IR the template generator writes Triton
from: inputs, constants, pointwise ops and reductions, as a :class:`Plan` naming the operator
family, or a :class:`NoTemplate` saying plainly why no template fits (e.g. a sort, or random
numbers drawn in the forward). The graph comes from :mod:`workers.search.trace`.

Families:

- ``elementwise``: pointwise ops over same-shape tensors (any activation expression), with
  columns moved along the last dimension by slices, cats, flips, constant pads and repeats, and
  each column's index (``F.one_hot``) (:mod:`workers.search.lowering_slices`);
- ``row``: pointwise ops plus reductions (softmax, log-softmax, RMSNorm, LayerNorm, residual +
  RMSNorm, sum/mean/max/prod, ...) over the last dimension, a middle one or several adjacent
  ones (strided rows), trailing ones (merged), dimensions apart (rows gathered by coordinates),
  groups of contiguous elements (GroupNorm) or the whole tensor, with per-column vectors and
  inputs that broadcast (read by coordinates where rows are not the last dimension), inputs with
  one value per row (a loss's targets, float or integer: :mod:`workers.search.lowering_per_row`);
  a per-row value folded over every row (a triplet loss) is stored per row and folded in a fixed
  order;
- ``matmul``: ``mm``/``addmm``/``linear``/``bmm`` (either operand transposed) followed by a
  pointwise epilogue (bias, activation, ``triu``/``tril``);
- ``cross_entropy``: ``log_softmax`` + ``nll_loss`` over class logits;
- ``matmul+<family>``: products with more around them than one kernel holds, as a chain of
  kernels (:mod:`workers.search.lowering_staged`);
- ``scan``: a cumulative sum or product along one dimension between pointwise ops
  (:mod:`workers.search.lowering_scan`);
- ``pool``, ``conv`` (forward and transposed convolutions) and ``attention`` have their own
  lowerings (:mod:`workers.search.lowering_pool`, :mod:`workers.search.lowering_conv`,
  :mod:`workers.search.lowering_attention`); ``conv+<family>`` is a chain a convolution leads.

In the ``elementwise`` and ``row`` families, inputs need not have the rows' shape as they come:
one that broadcasts, one read through a transpose or permute (also after pointwise ops on it:
a :class:`Deferred` value), the first rows of one along a leading dimension
(``pos[: x.shape[1]]``), and a table's rows gathered by integer indices (``F.embedding``,
``table[idx]``, ``index_select``) are read through their strides, never copied.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

import torch

from workers.search.ir import IRNode, NoTemplate, Plan
from workers.search.lowering_per_row import PerRowMixin, Vector
from workers.search.lowering_scan import Flipped, ScanMixin
from workers.search.lowering_slices import Narrow, SlicesMixin

aten = torch.ops.aten


@dataclass(frozen=True)
class Deferred:
    """A value computed, by pointwise ops, from inputs that do not have the rows' shape until a
    permute gives it to them (``(x * 2).transpose(1, 2) + y``): ``build(perm)`` writes the
    expression with every such input read through ``perm`` of the value's own dimensions."""

    shape: tuple
    build: Callable[[list], int]


@dataclass(frozen=True)
class Total:
    """A reduction over every row of a per-row value (a triplet loss's mean of per-row
    distances): the row kernels store one value per row and a one-program kernel folds them in a
    fixed order (the same result on every run), so it can only be an output."""

    op: str  # sum, mean, max, min
    arg: int  # the per-row value
    ndim: int  # the output's rank (0, or the kept dimensions' ones)
    scale: tuple | None = None  # ("mul" or "div", a number's node): applied to the fold
    # The per-row value of a second total this one is divided by (a masked mean's
    # ``(x * m).sum() / m.sum()``, a class-weighted loss's mean): both folded, then divided.
    den: int | None = None


# The convolutions the conv family writes (:mod:`workers.search.lowering_conv`).
CONVS = {aten.convolution.default}
_VIEW_OPS = {
    aten.view.default,
    aten.reshape.default,
    aten._unsafe_view.default,
    aten.unsqueeze.default,
    aten.squeeze.dim,
    aten.squeeze.dims,
    aten.squeeze.default,
    aten.clone.default,
    aten.contiguous.default,
    aten.alias.default,
    aten.detach.default,
    aten.expand.default,
    aten._to_copy.default,
    aten.lift_fresh_copy.default,
}

_REDUCE_OPS = {
    aten.sum.dim_IntList: "sum",
    aten.mean.dim: "mean",
    aten.amax.default: "max",
    aten.amin.default: "min",
    # Over the whole tensor (a loss, a global norm): one row of every element.
    aten.sum.default: "sum",
    aten.mean.default: "mean",
    aten.max.default: "max",
    aten.min.default: "min",
    aten.prod.dim_int: "prod",
    aten.prod.default: "prod",
}

_LOSSES = {
    aten.mse_loss.default: "mse",
    aten.l1_loss.default: "l1",
    aten.smooth_l1_loss.default: "smooth_l1",
    aten.huber_loss.default: "huber",
}

# p-norms over dimensions (torch.norm(x, p, dim), linalg.vector_norm, linalg.matrix_norm's
# Frobenius norm): (x, order, dims, ...)
_NORMS = (aten.linalg_vector_norm.default, aten.norm.ScalarOpt_dim)
_SAME = {aten.alias.default, aten.detach.default}  # the value as it is
_MASKED_FILLS = (aten.masked_fill.Scalar, aten.masked_fill.Tensor)
# Rows of a table picked by an integer index (an embedding lookup, ``table[idx]``).
_GATHERS = {aten.embedding.default, aten.index.Tensor, aten.index_select.default}

# Ops that draw random numbers (dropout in training mode): refused as such.
_RANDOM = {"bernoulli", "native_dropout", "rand", "randn", "rand_like", "randn_like", "uniform",
           "normal", "randint", "randint_like", "randperm", "multinomial"}  # fmt: skip
_MATMUL_OPS = {aten.mm.default, aten.addmm.default, aten.bmm.default, aten.matmul.default}
_PERMUTES = {aten.t.default, aten.transpose.int, aten.permute.default}
_COPIES = {aten.clone.default, aten.contiguous.default, aten._to_copy.default}
# What a matmul operand may go through on its way from an input (a dtype cast may not: the
# product reads the input as it is).
_OPERAND_VIEWS = _VIEW_OPS - {aten._to_copy.default, aten.lift_fresh_copy.default}

# Pointwise ATen ops we can express: name -> number of tensor-or-scalar positional args used.
_PW_SIMPLE = {
    aten.add.Tensor: "add",
    aten.add.Scalar: "add",
    aten.add_.Scalar: "add",
    aten.add_.Tensor: "add",
    aten.sub.Tensor: "sub",
    aten.sub.Scalar: "sub",
    aten.rsub.Scalar: "rsub",
    aten.rsub.Tensor: "rsub",
    aten.mul.Tensor: "mul",
    aten.mul.Scalar: "mul",
    aten.mul_.Tensor: "mul",
    aten.div.Tensor: "div",
    aten.div.Scalar: "div",
    aten.neg.default: "neg",
    aten.exp.default: "exp",
    aten.exp2.default: "exp2",
    aten.expm1.default: "expm1",
    aten.log.default: "log",
    aten.log2.default: "log2",
    aten.log1p.default: "log1p",
    aten.sqrt.default: "sqrt",
    aten.rsqrt.default: "rsqrt",
    aten.abs.default: "abs",
    aten.sigmoid.default: "sigmoid",
    aten.tanh.default: "tanh",
    aten.relu.default: "relu",
    aten.silu.default: "silu",
    aten.gelu.default: "gelu",
    aten.erf.default: "erf",
    aten.sin.default: "sin",
    aten.cos.default: "cos",
    aten.reciprocal.default: "reciprocal",
    aten.pow.Tensor_Scalar: "pow",
    aten.pow.Tensor_Tensor: "pow",
    aten.maximum.default: "maximum",
    aten.minimum.default: "minimum",
    aten.clamp.default: "clamp",
    aten.clamp_min.default: "clamp_min",
    aten.clamp_min.Tensor: "clamp_min",
    aten.clamp_min_.Tensor: "clamp_min",
    aten.clamp_max.Tensor: "clamp_max",
    aten.clamp_max_.Tensor: "clamp_max",
    aten.clamp_max.default: "clamp_max",
    aten.hardtanh.default: "hardtanh",
    aten.leaky_relu.default: "leaky_relu",
    aten.elu.default: "elu",
    aten.softplus.default: "softplus",
    aten.hardsigmoid.default: "hardsigmoid",
    aten.hardswish.default: "hardswish",
    aten.mish.default: "mish",
    aten.sign.default: "sign",
    aten.where.self: "where",
    aten.gt.Scalar: "gt",
    aten.gt.Tensor: "gt",
    aten.lt.Scalar: "lt",
    aten.lt.Tensor: "lt",
    aten.ge.Scalar: "ge",
    aten.ge.Tensor: "ge",
    aten.le.Scalar: "le",
    aten.le.Tensor: "le",
    aten.xlogy.Tensor: "xlogy",
    aten.eq.Scalar: "eq",
    aten.eq.Tensor: "eq",
    aten.ne.Scalar: "ne",
    aten.ne.Tensor: "ne",
    aten.bitwise_and.Tensor: "and",
    aten.bitwise_or.Tensor: "or",
    aten.bitwise_xor.Tensor: "xor",
    aten.bitwise_not.default: "not",
    aten.isnan.default: "isnan",
    aten.floor.default: "floor",
    aten.ceil.default: "ceil",
    aten.trunc.default: "trunc",
    aten.round.default: "round",
    aten.round.decimals: "round",
    aten.log10.default: "log10",
    aten.erfc.default: "erfc",
    aten.erfinv.default: "erfinv",
    aten.tan.default: "tan",
    aten.sinh.default: "sinh",
    aten.cosh.default: "cosh",
    aten.asinh.default: "asinh",
    aten.acosh.default: "acosh",
    aten.atanh.default: "atanh",
    aten.atan.default: "atan",
    aten.asin.default: "asin",
    aten.acos.default: "acos",
    aten.atan2.default: "atan2",
    aten.hypot.default: "hypot",
    aten.fmod.Scalar: "fmod",
    aten.fmod.Tensor: "fmod",
    aten.remainder.Scalar: "remainder",
    aten.remainder.Tensor: "remainder",
    aten.fmax.default: "fmax",
    aten.fmin.default: "fmin",
    aten.copysign.Tensor: "copysign",
    aten.copysign.Scalar: "copysign",
    aten.signbit.default: "signbit",
    aten.heaviside.default: "heaviside",
    aten.special_xlog1py.default: "xlog1py",
    aten.pow.Scalar: "pow_base",
    aten.clamp.Tensor: "clamp",
    aten.nan_to_num.default: "nan_to_num",
}
# Special functions no template writes (said in one line rather than as an unknown op).
_SPECIAL = {"lgamma", "digamma", "polygamma", "i0", "special_i0e", "special_i1", "mvlgamma"}
# Ops whose output the values' order decides: not graphs of pointwise ops, reductions and
# views (refused in one line saying so; ops whose output's shape the values decide fail the
# trace itself, trace.py says so).
_ORDERED = {"sort", "argsort", "msort", "topk", "kthvalue", "median", "nanmedian", "mode"}


class _Lowerer(SlicesMixin, ScanMixin, PerRowMixin):
    def __init__(self, gm: torch.fx.GraphModule, refs: list[str]) -> None:
        self.gm = gm
        self.refs = refs
        self.nodes: list[IRNode] = []
        self.env: dict = {}
        self.row_shape: tuple | None = None
        # The dimension every reduction runs over (None until the first one; the last if none).
        self.red_dim: int | None = None
        self.red_span = 1  # adjacent dimensions from red_dim on (x.sum(dim=(0, 1)) of 3-d: 2)
        self.red_set: tuple | None = None  # dimensions apart, gathered by coordinates
        self.full = False  # the reductions run over the whole tensor (one row of every element)
        self.flat_view = False  # a view that changed the last dimension (fine only if full)
        # Row-vector inputs (weights): their length and the dimension they vary along.
        self.vec_pos: dict[int, int] = {}
        self.reshaped = False  # a tile went through a view that changed its shape
        # Reductions over the trailing dimensions from this one on (LayerNorm over (C, H, W),
        # InstanceNorm over (H, W)): the row is those dimensions, flattened (None: one).
        self.merge_from: int | None = None
        self.masks: list[str] = []  # boolean inputs of the rows' shape
        self.outer = False  # the rows are wider than every input (x[:, None] + y[None, :])
        self.matmul_epilogue = False  # tril / triu read the output's row and column
        # A batched product's left operand's leading dimensions (its output viewed back as
        # them after the ``bmm``: ``q @ k.transpose(-2, -1)`` of 4-d heads)
        self.matmul_lead: tuple | None = None
        # Rows that are groups of contiguous elements (a group norm's): (j, g, view shape) of
        # a view rows_shape[:j] + (g, n) that the reductions run over the last dimension of.
        self.chunk_view: tuple | None = None
        self.chunk: tuple | None = None
        self.tables: set = set()  # inputs read only as a gather's table (see _find_gathers)
        self.indices: set = set()  # and their integer indices
        self.prefix_gathers: set = set()  # lookups of arange(T): a table's first rows
        # Values of 1-d inputs alone, built ({(fx node, per row): node}), and inputs read one
        # value per row where torch broadcasts them against a value per row ({input: its
        # per-row node}): see lowering_per_row.
        self.vectors: dict = {}
        self.per_row_inputs: dict[int, int] = {}
        self.row_vectors: dict[int, int] = {}  # weight input -> its rowvec (lowering_per_row)

    # -- helpers
    def new(self, kind: str, **kw) -> int:
        node = IRNode(id=len(self.nodes), kind=kind, **kw)
        self.nodes.append(node)
        return node.id

    def const(self, value) -> int:
        return self.new("const", value=float(value))

    def _cat(self, i: int) -> str:
        """Node ``i``'s category as the lowering stands (see ``_cat_of``)."""
        return _cat_of(self.nodes, i)

    def pw(self, op: str, *args: int, **attrs) -> int:
        return self.new("pw", op=op, args=tuple(args), attrs=attrs)

    def coordinate(self, op: str) -> int:
        """An element's column (``col``) or row within its matrix (``mrow``): whole numbers,
        compared exactly."""
        if self.matmul_epilogue:  # (tril / triu of a product are their own epilogue ops)
            raise NoTemplate(
                "an element's coordinates (an arange, torch.eye) in a product's epilogue are "
                "not covered"
            )
        return self.new("pw", op=op, attrs={"whole": True})

    def reduce(self, op: str, x: int) -> int:
        return self.new("reduce", op=op, args=(x,))

    def arg(self, a) -> int:
        if isinstance(a, torch.fx.Node):
            if a not in self.env:
                raise NoTemplate(f"value {a.name} is not expressible in a template")
            value = self.env[a]
            if isinstance(value, tuple):
                raise NoTemplate(f"tuple value {a.name} used as a tensor")
            if isinstance(value, str):
                raise NoTemplate(value)
            if isinstance(value, Narrow):
                raise NoTemplate(
                    f"columns of the row moved by a slice, cat, pad or repeat ({a.name}) where a "
                    "whole row is needed (a reduction); templates move columns only between "
                    "pointwise ops"
                )
            if isinstance(value, Flipped):
                # a flip read as a row (not by a scan): its inputs read from the far end
                if self.scan_dim != len(self.row_shape) - 1:
                    raise NoTemplate(
                        f"a flip ({a.name}) along other than the last dimension, outside a "
                        "cumulative scan"
                    )
                return self._mirrored(value.id)
            if isinstance(value, Deferred):
                raise NoTemplate(
                    f"a value ({a.name}) of shape {list(value.shape)} computed from inputs that "
                    f"are not of the rows' shape {list(self.row_shape)} (and no permute makes it "
                    "so)"
                )
            if isinstance(value, Total):
                raise NoTemplate(
                    f"arithmetic on a reduction over every row ({a.name}) is not covered; "
                    "templates return it as it is"
                )
            if isinstance(value, Vector):  # met by a row's elements: along the row
                return value.build(False)
            node = self.nodes[value]
            if node.kind == "input" and node.attrs.get("pending"):
                permutes = any(c.target in _PERMUTES for c in self.gm.graph.nodes)
                raise NoTemplate(
                    f"input {node.attrs['ref']} of shape {node.attrs['vshape']} neither matches "
                    f"the row shape {list(self.row_shape)} nor broadcasts to it"
                    + (
                        " (a permute reads inputs through it across pointwise ops, not "
                        "across reductions)"
                        if permutes
                        else ""
                    )
                )
            return value
        if isinstance(a, int) and not isinstance(a, bool):  # an integer input compares exactly
            return self.new("const", value=float(a), attrs={"whole": True})
        if isinstance(a, bool | float):
            return self.const(a)
        raise NoTemplate(f"unsupported argument {a!r}")

    def _last_dim(self, node: torch.fx.Node, dims) -> None:
        """Record the dimension this reduction runs over: one dimension, the same for every
        reduction of the graph (the last, or any other of an unreshaped input)."""
        shape = node.args[0].meta["val"].shape
        ndim = len(shape)
        dims = [dims] if isinstance(dims, int) else list(dims or [])
        if not dims and ndim == 1:
            dims = [0]
        whole = ndim > 1 and (not dims or sorted(d % ndim for d in dims) == list(range(ndim)))
        # Dimensions of size 1 reduce nothing (an instance norm of an unsqueezed [b, 1, 1, n]
        # reduces over (2, 3): over n alone).
        dims = [d for d in dims if int(shape[d]) != 1] or dims
        if whole or self.full:
            numel = math.prod(node.args[0].meta["val"].shape)
            if not whole or self.red_dim is not None or numel != math.prod(self.row_shape):
                raise NoTemplate(
                    "reductions over the whole tensor and over a dimension in one reference; "
                    "templates reduce over one"
                )
            self.full = True
            return
        if self.flat_view:
            shape = tuple(node.args[0].meta["val"].shape)
            if (
                self.chunk_view is not None
                and shape == self.chunk_view[2]
                and [d % ndim for d in dims] == [ndim - 1]
                and self.chunk in (None, self.chunk_view)
            ):
                self.chunk = self.chunk_view  # rows: the groups, contiguous runs of elements
                return
            raise NoTemplate(f"{node.target} reduces over a view that changes the row layout")
        if self.merge_from is not None and sorted(d % ndim for d in dims) == list(
            range(self.merge_from, ndim)
        ):
            return  # the trailing dimensions the rows are made of (see _merge_trailing)
        norm = sorted(d % max(ndim, 1) for d in dims)
        span = len(norm)
        adjacent = span > 1 and norm == list(range(norm[0], norm[0] + span))
        if span > 1 and not adjacent and ndim == len(self.row_shape) and not self.reshaped:
            # Dimensions apart (a batch norm's statistics over (0, 2, 3)): each row gathers its
            # elements by their coordinates.
            if self.red_set not in (None, tuple(norm)) or self.red_dim is not None:
                raise NoTemplate(
                    f"reductions over dims {list(self.red_set or [self.red_dim])} and {norm}; "
                    "templates reduce over one set"
                )
            self.red_set = tuple(norm)
            return
        if span != 1 and not (adjacent and norm[-1] < ndim - 1 and ndim == len(self.row_shape)):
            raise NoTemplate(
                f"{node.target} reduces over dims {dims} of a {ndim}-d tensor beside other "
                "reductions (or of a reshaped view); templates reduce over one set of dimensions"
            )
        if self.red_set is not None:
            raise NoTemplate(f"reductions over dims {list(self.red_set)} and {norm}")
        dim = norm[0]
        if dim == ndim - 1:  # the last dimension of whatever view: the rows' last
            dim = len(self.row_shape) - 1
        elif ndim != len(self.row_shape):
            raise NoTemplate(f"{node.target} reduces a middle dimension of a reshaped view")
        if self.red_dim is None:
            self.red_dim, self.red_span = dim, span
        elif (self.red_dim, self.red_span) != (dim, span):
            raise NoTemplate(
                f"reductions over dims {self.red_dim} and {dim}; templates reduce over one"
            )

    def _n(self) -> int:
        """The length of a row: the size of the reduced dimension (every element when the
        reductions run over the whole tensor)."""
        if self.full:
            return math.prod(self.row_shape)
        if self.chunk is not None:
            return self.chunk[2][-1]
        if self.merge_from is not None:
            return math.prod(self.row_shape[self.merge_from :])
        if self.red_set is not None:
            return math.prod(self.row_shape[d] for d in self.red_set)
        if self.red_dim is None:
            return self.row_shape[-1]
        return math.prod(self.row_shape[self.red_dim : self.red_dim + self.red_span])

    def _merge_trailing(self, calls: list[torch.fx.Node]) -> None:
        """Rows made of several trailing dimensions: when every reduction of the graph runs over
        the same trailing dimensions (two or more) of a tensor of the rows' shape, the rows are
        those dimensions flattened (a contiguous tensor's layout already is), and a weight of
        their shape is a vector along the row."""
        ndim = len(self.row_shape)
        spans = set()
        for n in calls:
            t, a = n.target, n.args
            if t == aten.native_layer_norm.default:
                spans.add(
                    ndim - len(a[1]) if tuple(a[0].meta["val"].shape) == self.row_shape else -1
                )
                continue
            if t in _REDUCE_OPS or t in (
                aten.var.correction,
                aten.var_mean.correction,
                aten.std.correction,
                aten.std_mean.correction,
                aten.argmax.default,
                aten.argmin.default,
                aten._softmax.default,
                aten._log_softmax.default,
                *_NORMS,
            ):
                at = 2 if t in _NORMS else 1  # a norm's order comes first
                dims = a[at] if len(a) > at else n.kwargs.get("dim")
                dims = [dims] if isinstance(dims, int) else list(dims or [])
                shape = tuple(a[0].meta["val"].shape)
                norm = sorted(d % max(len(shape), 1) for d in dims)
                trailing = bool(norm) and norm == list(range(norm[0], len(shape)))
                ok = shape == self.row_shape and trailing and len(norm) > 1
                k = len(shape) - 1
                if _flattened_from(shape, self.row_shape) is not None and norm == [k]:
                    spans.add(k)  # the last dimension of x.flatten(1), x.view(b, -1)
                    continue
                spans.add(norm[0] if ok else -1)
        if len(spans) == 1 and 0 < (k := spans.pop()) < ndim - 1:  # (the last alone: plain rows)
            self.merge_from = k

    # -- the walk
    def lower(self) -> Plan:
        graph = self.gm.graph
        calls = [n for n in graph.nodes if n.op == "call_function"]
        targets = {n.target for n in calls}  # convolutions were refused before (trace._lower)
        placeholders = [n for n in graph.nodes if n.op == "placeholder"]
        if len(placeholders) != len(self.refs):
            raise NoTemplate("inputs of the traced graph do not match the forward's arguments")
        if targets & _MATMUL_OPS:
            return self._lower_matmul(placeholders, calls)
        if aten.nll_loss_forward.default in targets:
            return self._lower_cross_entropy(placeholders, calls)
        out_node = next(n for n in graph.nodes if n.op == "output")
        outs = out_node.args[0]
        outs = list(outs) if isinstance(outs, list | tuple) else [outs]
        if not outs or not all(isinstance(o, torch.fx.Node) for o in outs):
            raise NoTemplate("the reference returns no tensor")
        shapes = [tuple(o.meta["val"].shape) for o in outs]
        # The row shape: the largest float input (outputs may be row-reduced).
        for p, ref in zip(placeholders, self.refs, strict=True):
            if not isinstance(p.meta.get("val"), torch.Tensor):
                raise NoTemplate(f"input {ref} is a Python number; templates take tensor inputs")
        self._find_gathers(calls)
        float_inputs = [
            p
            for p, ref in zip(placeholders, self.refs, strict=True)
            if p.meta["val"].is_floating_point()
            and p.meta["val"].ndim
            and p not in self.tables
            # a parameter the forward never reads says nothing of the rows (a forward argument
            # is the shape the caller gives, read or not)
            and (p.users or not ref.startswith("self"))
        ] + [n for n in calls if n.target in _GATHERS and n not in self.prefix_gathers]
        tensors = [p for p in placeholders if p.meta["val"].ndim]
        if float_inputs:
            self.row_shape = _row_shape(float_inputs, shapes, calls)
        elif aten.arange.default in targets and tensors:
            # Integer inputs against an arange along the row (``F.one_hot(t, 16)``): the rows
            # are the output's, as wide as the arange (``plan.extra["columns"]``).
            self.row_shape = max(shapes, key=math.prod)
        else:
            raise NoTemplate("the reference has no floating-point tensor input")
        try:  # inputs that broadcast against each other (an outer sum): the rows are theirs
            wide = tuple(torch.broadcast_shapes(*(p.meta["val"].shape for p in float_inputs)))
        except RuntimeError:
            wide = self.row_shape
        # Values that broadcast their operands (a cat, a pad or a repeat widens by moving
        # columns, not this way: the rows stay the inputs').
        moved = _widened(calls, self.SLICE_OPS)
        values = [n.meta.get("val") for n in calls if n.target in _PW_SIMPLE and n not in moved]
        widest = max(
            [tuple(v.shape) for v in values if isinstance(v, torch.Tensor)] + [self.row_shape],
            key=math.prod,
        )
        if math.prod(wide) > math.prod(self.row_shape) and wide in shapes:
            self.row_shape, self.outer = wide, True
        elif math.prod(widest) > math.prod(self.row_shape):
            # wider once viewed (x[:, None, :] + y[None, :, :]): the output's shape
            self.row_shape, self.outer = widest, True
        self._merge_trailing(calls)
        self._bind_inputs(placeholders)
        for n in calls:
            self._lower_call(n)
        # An output narrower than the row (a GLU returns one half gated by the other): its
        # element at column c is the slice's, so the kernel computes it over the first columns;
        # one wider (a pad, a repeat) over all of its own.
        narrow = {
            j: v for j, v in enumerate(self.env.get(o) for o in outs) if isinstance(v, Narrow)
        }
        totals = {j: v for j, v in enumerate(self.env.get(o) for o in outs) if isinstance(v, Total)}
        # A quotient of totals: its denominator's per-row values are one more output the
        # kernel writes and the wrapper folds, never returned.
        hidden = {}
        for j, v in list(totals.items()):
            if v.den is not None:
                hidden[j] = len(outs)
                totals[len(outs)] = Total(v.op, v.den, v.ndim)
                outs = [*outs, outs[j]]
        shapes = shapes + [tuple(o.meta["val"].shape) for o in outs[len(shapes) :]]
        outputs = [
            narrow[j].build(Fraction(0))
            if j in narrow
            else totals[j].arg
            if j in totals
            else self._vector_output(o)
            if self._is_vector(o)
            else self.arg(o)
            for j, o in enumerate(outs)
        ]
        plan = Plan(family="row", forward_args=[], init_source="", preamble="")
        plan.nodes = self.nodes
        plan.outputs = outputs
        if narrow:
            if any(n.kind == "reduce" for n in self.nodes):
                raise NoTemplate(
                    "an output narrower or wider than the row (a slice, cat, pad or repeat along "
                    "it) in a reference with reductions"
                )
            plan.extra["narrow_outputs"] = [
                [j, v.frac.numerator, v.frac.denominator, 0] for j, v in narrow.items()
            ]
        if getattr(self, "scan_prefix", None) is not None:
            plan.extra["scan_prefix"] = [
                self.scan_prefix.numerator,
                self.scan_prefix.denominator,
                0,
            ]
        if (
            narrow
            or "scan_prefix" in plan.extra
            or any(n.attrs.get("shift") or n.op == "col_lt" for n in self.nodes)
            or any(n.attrs.get("mirror") for n in self.nodes)
        ):
            # The traced width: a slice bound that is a number of columns is told from a
            # fraction of the row by tracing again at other widths (``trace._slice_offsets``).
            plan.extra["row_width"] = int(self.row_shape[-1])
        self._weights_per_row()
        self._settle_per_row()
        _categorise(plan)
        used = {a for node in self.nodes for a in node.args} | set(plan.outputs)
        # The dimension the rows run along (the last, or a middle one: a one-hot pick over the
        # classes of [N, C, d] logits).
        last = len(self.row_shape) - 1 if self.red_dim is None else self.red_dim
        for node in plan.inputs():
            # One value per row: a target beside a row reduction, or, in an elementwise graph,
            # an input placed along a leading dimension (``t[:, None] == arange``: a one-hot).
            bshape = node.attrs.get("bshape")
            pos = None if bshape is None else last - len(self.row_shape) + len(bshape)
            along = self.vec_pos.get(node.id, last) == last and (
                bshape is None or (pos >= 0 and int(bshape[pos]) != 1)
            )
            if (
                node.attrs.get("int_dtype")
                and node.id in used
                and node.cat != "rowscalar"
                and along
            ):
                raise NoTemplate(
                    f"non-floating input {node.attrs['ref']} of dtype {node.attrs['int_dtype']} "
                    "is covered only as one value per row (a target per row beside a row "
                    "reduction or compared with a column index), not along the row"
                )
        for node in plan.nodes:
            if node.kind == "input" and node.attrs["role"] == "bcast" and node.id not in used:
                node.attrs["role"] = "unread"  # an input used only through its views
            elif node.kind == "input" and node.attrs["role"] == "tile" and node.id not in used:
                views = [m for m in plan.nodes if m.kind == "input" and m.attrs.get("permuted")]
                if any(m.attrs["ref"] == node.attrs["ref"] for m in views):
                    node.attrs["role"] = "unread"  # read only through a permutation
        if any(n.kind == "scan" for n in plan.nodes):
            return self._scan_plan(plan, outs, shapes)
        ndim = len(self.row_shape)
        red = ndim - 1 if self.red_dim is None else self.red_dim
        if self.flat_view and not self.full and self.chunk is None:
            raise NoTemplate("a view changes the row layout; no template fits")
        if self.merge_from is not None and plan.reductions():
            # Rows of the trailing dimensions: a weight along a leading one (an affine instance
            # norm's per channel) and any broadcast input are read by each element's
            # coordinates (the row kernels' per-row offsets assume rows of the last dimension).
            self._vecs_as_bcast(used, below=self.merge_from)
            if any(n.attrs["role"] == "bcast" and n.id in used for n in plan.inputs()):
                plan.extra["by_index"] = True
        # An element's coordinate along a reduced middle dimension (the second-last one's is
        # ``mrow``, a leading one's ``coord``): its column in the strided rows. A ``col`` is
        # the coordinate along the last dimension, which those rows do not run along.
        along = [
            n
            for n in self.nodes
            if (n.op == "mrow" and red == ndim - 2) or (n.op == "coord" and n.attrs["dim"] == red)
        ]
        others = [
            n
            for n in self.nodes
            if n.op in ("col", "mrow", "coord") and n not in along and n.id in used
        ]
        # Rows along one middle dimension, read in place (the strided row kernel): an element's
        # coordinate along it is its column there (a one-hot pick over the classes of
        # [N, C, H, W] logits), and an input constant along it (a target per position, a mask
        # shared by every channel) is read once per row, through its strides.
        strided = (
            red != ndim - 1
            and plan.reductions()
            and not (self.full or self.reshaped or self.red_span > 1)
            and self.merge_from is None
            and self.red_set is None
            and self.chunk is None
        )
        per_row = [
            n
            for n in plan.inputs("bcast")
            if n.id in used
            and len(n.attrs["bshape"]) == ndim
            and int(n.attrs["bshape"][red]) == 1
            and not n.attrs.get("gather")
        ]
        # (an element's column, in rows over one middle dimension: its coordinate there)
        columns_along = strided and bool(along) and not others
        if columns_along:
            for n in along:
                n.op = "col"
                n.attrs.pop("dim", None)
            _categorise(plan)  # a row's index within its matrix (constant along it) is not
        # Broadcast inputs that vary along the reduced dimension too (a token mask [B, S, 1]
        # of a masked mean over S): expanded and moved as the others, read along the row
        # through their stride there.
        along_red = [
            n
            for n in plan.inputs("bcast")
            if n.id in used
            and len(n.attrs["bshape"]) == ndim
            and int(n.attrs["bshape"][red]) != 1
            and int(n.attrs["bshape"][-1]) == 1
            and not n.attrs.get("gather")
        ]
        moving = per_row + along_red
        if strided and moving and len(moving) == sum(n.id in used for n in plan.inputs("bcast")):
            # The rows' shape with the reduced dimension moved last: the broadcast inputs are
            # expanded to it and read per row (their column stride 0), or along it.
            plan.extra["bcast_moved"] = red - ndim
            for n in moving:
                b = list(n.attrs["bshape"])
                n.attrs["bshape_in"] = b
                n.attrs["bshape"] = b[:red] + b[red + 1 :] + [b[red]]
        for n in self.nodes:
            if n.op in ("axis", "coord") and n.id not in used:  # read only through its view
                n.kind, n.op, n.value, n.attrs, n.cat = "const", "", 0.0, {}, "const"
        placed = [n for n in self.nodes if n.op in ("axis", "coord")]
        if placed:
            raise NoTemplate(
                "an arange along a leading dimension of the rows, outside rows that run along "
                "it; templates read an arange as the column index, a row's index within its "
                "matrix, or the coordinate along a reduced middle dimension"
            )
        if self.red_set is not None:
            if self.reshaped:
                raise NoTemplate("rows gathered over dimensions apart of a reshaped tensor")
            # Every weight and broadcast input read by each element's coordinates.
            self._vecs_as_bcast(used)
            plan.extra["red_dims"] = [d - ndim for d in self.red_set]
            plan.extra["rank"] = ndim
            plan.extra["by_index"] = True
        if self.chunk is not None:
            # Weights read by each element's coordinates in the rows' shape (a group norm's
            # weight per channel): every weight vector becomes a broadcast input.
            self._vecs_as_bcast(used)
            j, g, shape, fixed = self.chunk
            plan.extra["chunk"] = [j, g, shape[-1], fixed]
        if self.full and any(i in used for i in self.vec_pos):
            # A weight along the last dimension (a hinge loss's targets against every row):
            # element i of the flattened tensor reads weight i mod its length.
            last = all(
                pos == ndim - 1 and self.nodes[i].attrs["length"] == self.row_shape[-1]
                for i, pos in self.vec_pos.items()
                if i in used
            )
            if not last or self.reshaped:
                raise NoTemplate(
                    "a weight vector in a reduction over the whole tensor varies along other "
                    "than the last dimension (or the tensor is reshaped)"
                )
            plan.extra["vec_mod"] = True
        bcast = [n for n in plan.nodes if n.kind == "input" and n.attrs.get("role") == "bcast"]
        # the row kernels read them per row (rows over a middle dimension: moved, see above)
        in_rows = (red == ndim - 1 and not self.full) or "bcast_moved" in plan.extra
        if any(n.id in used for n in bcast) and plan.reductions() and not in_rows:
            how = ", ".join(f"{n.attrs['ref']} {_read_as(n)}" for n in bcast if n.id in used)
            raise NoTemplate(
                f"an input read through its strides ({how}, rows {list(self.row_shape)}) in a "
                "reduction over other than the last dimension is not covered"
            )
        if plan.reductions() and any(n.id in used for n in plan.inputs("scalar")):
            raise NoTemplate("a number input (a 0-d tensor or a Python float) in a reduction")
        shifted = any(
            n.kind == "input" and (n.attrs.get("shift") or n.attrs.get("mirror"))
            for n in plan.nodes
        )
        coords = any(n.op in ("col", "mrow") for n in self.nodes)
        # Rows along the last dimension of the inputs as they are (not flattened, gathered or
        # reshaped): what the row kernels' per-row reads and coordinates assume.
        flat = self.full or self.merge_from is not None or self.red_set is not None
        plain_rows = not flat and red == ndim - 1 and not self.reshaped
        if coords and plan.reductions() and not (plain_rows or columns_along):
            raise NoTemplate(
                "an element's coordinates (an arange along the row, F.one_hot, tril/triu) in a "
                "reduction over other than the last dimension (or over several, or the whole "
                "tensor) are not covered"
            )
        if any(n.op == "mrow" for n in self.nodes):
            plan.extra["mrow"] = True  # the kernels take the rows' second-last size (R)
        if shifted and plan.reductions():
            raise NoTemplate(
                "columns moved by a slice, a cat or a flip in a reference with reductions are "
                "not covered"
            )
        if not plan.reductions() and (
            shifted
            or narrow
            or coords
            or any(n.id in used for n in bcast)
            or any(i in used and pos != ndim - 1 for i, pos in self.vec_pos.items())
        ):
            # Elementwise over rows with inputs that broadcast (a weight per channel of an NCHW
            # tensor is one): every weight vector becomes such an input.
            self._vecs_as_bcast(used)
            plan.extra["bcast"] = True
            spans = any(
                n.id in used and (n.attrs["role"] == "tile" or int(n.attrs["bshape"][-1]) != 1)
                for n in plan.inputs()
                if n.attrs["role"] in ("tile", "bcast")
            )
            if any(n.op == "col" for n in self.nodes) and not spans:
                # No input as wide as the rows (``F.one_hot(t, 16)`` alone): the arange's length.
                plan.extra["columns"] = int(self.row_shape[-1])
            if not float_inputs:  # integers in, a float out (a smoothed one-hot target)
                floats = {o.meta["val"].is_floating_point() for o in outs}
                if floats == {True, False}:
                    raise NoTemplate("integer and floating-point outputs from integer inputs")
                if floats == {True}:
                    plan.extra["float_out"] = True
        if self.outer and plan.reductions():
            if not plain_rows:
                raise NoTemplate(
                    "a reduction over rows wider than every input (an outer broadcast) along "
                    "another than the last dimension is not covered"
                )
            plan.extra["outer"] = True  # the rows' shape is the inputs' broadcast shape
        gathered = any(n.attrs.get("gather") and n.id in used for n in plan.inputs())
        if gathered and plan.reductions() and (plan.extra.get("by_index") or red != ndim - 1):
            raise NoTemplate(
                "gathered rows (an embedding) in a reduction over other than the last dimension "
                "are not covered"
            )
        if plan.reductions() and plain_rows:
            # A weight along another dimension than the rows' (one per row, one per batch):
            # read per row as an input that broadcasts, like a mask shared by every head.
            self._vecs_as_bcast(used, below=ndim - 1)
        for node_id, pos in self.vec_pos.items():
            length = self.nodes[node_id].attrs.pop("length")
            if plan.extra.get("vec_mod"):
                continue  # checked above: along the last dimension of the flattened rows
            if node_id not in used and plan.reductions():
                # a weight read only through its copies (one per row, or viewed): its own node
                # loads nothing (its length need not be the row's)
                self.nodes[node_id].attrs["role"] = "unread"
                continue
            if node_id in used and (pos != red or length != self._n()):
                raise NoTemplate(
                    f"a weight of length {length} varies along dimension {pos}; the rows run "
                    f"along dimension {red} (size {self._n()})"
                )
        if red != ndim - 1 and self.reshaped and not self.full:
            raise NoTemplate("rows along a middle dimension of a reshaped tensor")
        plan.extra["output_kinds"] = []
        if totals:
            plan.extra["totals"] = {
                str(j): [v.op, v.ndim, *(v.scale or ())] for j, v in totals.items()
            }
        if hidden:  # {quotient's output: its denominator's}
            plan.extra["total_dens"] = {str(j): h for j, h in hidden.items()}
        for j, (o, shape) in enumerate(zip(plan.outputs, shapes, strict=True)):
            node = plan.nodes[o]
            if j in totals:
                if self.chunk is not None or not outs[j].meta["val"].is_floating_point():
                    raise NoTemplate("a reduction over every row of groups or of integers")
                plan.extra["output_kinds"].append("total")  # per row, then folded
            elif j in narrow and shape[:-1] == self.row_shape[:-1]:
                plan.extra["output_kinds"].append("tile")  # its first columns
            elif node.cat == "tile" and shape == self.row_shape:
                plan.extra["output_kinds"].append("tile")
            elif self.chunk is not None:
                raise NoTemplate(f"output of shape {list(shape)} per group is not covered")
            elif node.cat == "rowscalar" and math.prod(shape) * self._n() == math.prod(
                self.row_shape
            ):
                plan.extra["output_kinds"].append("rowscalar")
            else:
                raise NoTemplate(f"output of shape {list(shape)} is not a row or row-reduction")
        plan.extra["output_shapes_keep_last"] = [len(s) == len(self.row_shape) for s in shapes]
        # Indices written as torch.int64; one cast to a floating dtype is an ordinary output
        index_ops = ("argmax", "argmin")
        plan.extra["index_outputs"] = [
            j
            for j, o in enumerate(plan.outputs)
            if plan.nodes[o].op in index_ops and not outs[j].meta["val"].is_floating_point()
        ]
        for j in plan.extra["index_outputs"]:
            if outs[j].meta["val"].dtype != torch.int64:
                raise NoTemplate(
                    f"argmax / argmin indices returned as {outs[j].meta['val'].dtype}; "
                    "templates write them as torch.int64"
                )
        if self.full:  # one row of every element (the inputs are read as flat arrays)
            plan.extra["full"] = True
        elif self.merge_from is not None:  # rows of the trailing dimensions, flattened
            plan.extra["red_from"] = self.merge_from - ndim
        elif red != ndim - 1:  # rows along a middle dimension: as a negative index
            plan.extra["red_dim"] = red - ndim
            if self.red_span > 1:  # adjacent dimensions, read as one (their layout is)
                plan.extra["red_span"] = self.red_span
        if not self.full and self.merge_from is None and not plan.extra.get("red_dims"):
            views = self._output_views(plan, shapes, red)
            if views:
                plan.extra["output_views"] = views
        # (With broadcast inputs, a weight's own node is left unused beside its view.)
        has_vec = bool(plan.inputs("vec")) and not plan.extra.get("bcast")
        if (
            not plan.reductions()
            and not has_vec
            and all(k == "tile" for k in plan.extra["output_kinds"])
        ):
            plan.family = "elementwise"
            ops = sorted(
                {
                    n.op
                    for n in plan.nodes
                    if n.kind == "pw" and n.op not in ("col_lt", "col", "mrow")
                }
            )
            tiles = {n.attrs["ref"] for n in plan.inputs("tile")}
            plan.summary = f"elementwise over {len(tiles)} input(s): {', '.join(ops)}"
            if plan.extra.get("bcast"):
                seen = {n.attrs["ref"]: _read_as(n) for n in plan.inputs("bcast")}
                plan.summary += "".join(f", {r} {b}" for r, b in seen.items())
            if any(n.attrs.get("shift") or n.op == "col_lt" for n in plan.nodes):
                plan.summary += (
                    ", columns moved by slices, cats, pads or repeats along the last dimension"
                )
            if any(n.attrs.get("mirror") for n in plan.nodes):
                plan.summary += ", rows read from their far end (a flip)"
            if plan.extra.get("mrow"):
                plan.summary += _BAND
            elif any(n.op == "col" for n in plan.nodes):
                plan.summary += ", each column's index (an arange along the row, a one-hot)"
            if self.outer:
                plan.summary += f", rows {list(self.row_shape)} wider than every input"
        else:
            ops = [n.op for n in plan.reductions()]
            where = "the last dimension" if red == ndim - 1 else f"dimension {red} of {ndim}"
            if self.red_span > 1:
                where = f"dimensions {red}..{red + self.red_span - 1} of {ndim}"
            if self.merge_from is not None:
                where = f"the last {ndim - self.merge_from} dimensions (flattened)"
            where = "the whole tensor" if self.full else where
            if self.red_set is not None:
                where = f"dimensions {list(self.red_set)} of {ndim} (gathered)"
            if self.chunk is not None:
                j, g, shape, fixed = self.chunk
                where = (
                    f"groups of {shape[-1]} contiguous elements ({g} groups along dimension {j})"
                    if fixed == "count"
                    else f"groups of {shape[-1]} contiguous elements (as traced, {g} of them)"
                )
            plan.summary = (
                f"row-wise over {where}: reductions [{', '.join(ops)}], "
                f"{len(plan.inputs('tile'))} row input(s), "
                f"{sum(n.id in used for n in plan.inputs('vec'))} vector(s)"
            )
            for j, v in totals.items():
                if j in hidden.values():
                    continue  # said with its quotient
                plan.summary += f", then the {v.op} of a per-row value over every row"
                if v.den is not None:
                    plan.summary += f" over the {v.op} of another"
            if plan.inputs("bcast"):
                plan.summary += ", " + ", ".join(
                    f"{n.attrs['ref']} {_read_as(n)}" for n in plan.inputs("bcast")
                )
            if plan.extra.get("mrow"):
                plan.summary += _BAND
        return plan

    def _vecs_as_bcast(self, used: set, below: int | None = None) -> None:
        """Every weight vector read (placed along a dimension before ``below``, where given)
        becomes an input that broadcasts along the rows' shape."""
        for node_id, pos in list(self.vec_pos.items()):
            node = self.nodes[node_id]
            if below is not None and pos >= below:
                continue
            del self.vec_pos[node_id]
            if node_id not in used:  # a weight's own node, read only through its view
                node.attrs["role"] = "unread"
                continue
            shape_b = [1] * len(self.row_shape)
            shape_b[pos] = node.attrs.pop("length")
            node.attrs.update(role="bcast", bshape=shape_b, from_vec=True)

    def _place_vec(self, src: int, shape: tuple, n: torch.fx.Node) -> int:
        """A view of a weight vector: all ones but one dimension, of the rows' rank (or 1-d).
        The view is its own input node, placed along that dimension."""
        length = self.nodes[src].attrs["length"]
        ndim = len(self.row_shape)
        if len(shape) == 1 and shape[0] == length:
            return src
        big = [i for i, v in enumerate(shape) if v != 1]
        if len(shape) > ndim or len(big) != 1 or shape[big[0]] != length:
            raise NoTemplate(f"{n.target} puts a weight of length {length} in shape {list(shape)}")
        placed = self.new("input", attrs=dict(self.nodes[src].attrs))
        self.vec_pos[placed] = big[0] + ndim - len(shape)  # broadcasting aligns on the right
        return self._mark_per_row(placed)

    def _bind_inputs(self, placeholders) -> None:
        for p, ref in zip(placeholders, self.refs, strict=True):
            val = p.meta["val"]
            shape = tuple(val.shape)
            if not p.users and not val.is_floating_point():
                # A buffer the forward never reads (BatchNorm's num_batches_tracked in eval).
                self.env[p] = self.new("input", attrs={"ref": ref, "role": "unread"})
                continue
            if p in self.tables or p in self.indices:
                # A table read only by gathers (each makes its own node), or their indices.
                role = "unread" if p in self.tables else "index"
                self.env[p] = self.new("input", attrs={"ref": ref, "role": role})
                continue
            if val.dtype == torch.bool:
                self.masks.append(ref)  # read as 0/1; a condition compares it (_condition)
            merged = self.merge_from is not None and _strip_ones(shape) == tuple(
                self.row_shape[self.merge_from :]
            )
            if shape == self.row_shape:
                role = "tile"
            elif merged:  # a weight over the rows' trailing dimensions: a vector along the row
                role = "vec"
            elif len(shape) == 1 and shape[0] in self.row_shape and len(self.row_shape) > 1:
                role = "vec"
            elif (not shape and ref.startswith("self")) or (
                shape and math.prod(shape) == 1 and len(shape) <= len(self.row_shape)
            ):
                # One value: a 0-d parameter or buffer (``nn.Parameter(torch.tensor(2.0))``),
                # or a tensor of one element (a bias of shape (1,)). Read by the kernel from its
                # memory: ``float()`` of it would cost a device sync per call (and break a CUDA
                # graph's capture), and as a broadcast input it was refused in reductions.
                role = "cell"
            elif not shape:
                # A number (a Python float argument, traced as a 0-d tensor): one value the
                # elementwise kernels take as an argument.
                role = "scalar"
            elif _broadcasts(shape, self.row_shape):
                # A table per token applied to every head, a mask shared by every head: an
                # input of 1s where the rows have sizes (elementwise graphs take it, see below).
                role = "bcast"
            else:
                # Perhaps once viewed (``cos[:, None, :]``): refused where used as it is.
                role = "bcast"
            attrs = {"ref": ref, "role": role}
            if role == "bcast":
                attrs["vshape"] = list(shape)
                attrs["vdims"] = [i if v != 1 else None for i, v in enumerate(shape)]
                attrs["pending"] = not _broadcasts(shape, self.row_shape)
            if ref in self.masks:
                attrs["mask"] = True
            elif not val.is_floating_point():  # read only one value per row (checked at the end)
                attrs["int_dtype"] = str(val.dtype)
            if role == "vec":
                attrs["length"] = math.prod(shape)
            if role == "bcast" and not attrs["pending"]:
                attrs["bshape"] = [1] * (len(self.row_shape) - len(shape)) + list(shape)
            self.env[p] = self._mark_per_row(self.new("input", attrs=attrs))
            if role == "vec":  # a 1-d weight broadcasts along the last dimension until viewed
                self.vec_pos[self.env[p]] = len(self.row_shape) - 1

    def _lower_call(self, n: torch.fx.Node) -> None:
        t = n.target
        a = n.args
        kw = n.kwargs
        if t in (aten.select.int, *_VIEW_OPS) and _shape_only(n):
            # Read only for its shape (``zeros_like(x.select(-1, 0).unsqueeze(-1))``).
            self.env[n] = f"{n.name} is read only for its shape"
            return
        if t is operator.getitem:
            src = self.env.get(a[0])
            if not isinstance(src, tuple):
                raise NoTemplate(f"unsupported getitem on {a[0]}")
            self.env[n] = src[a[1]]  # a str: a part no template computes, refused if used
            return
        if t == aten.slice.Tensor and self._prefix(n):
            return
        if t in self.SLICE_OPS:
            self._lower_slice(n)
            return
        if t in self.OTHER_PADS:
            raise NoTemplate(
                f"a {self.OTHER_PADS[t]} pad ({t}) is not covered; templates pad with a constant"
            )
        if t in self.SCAN_OPS:
            self._lower_scan(n)
            return
        if t == aten.flip.default:
            self._lower_flip(n)
            return
        if t == aten.permute.default and _order_kept(a[0].meta["val"].shape, a[1]):
            t = aten.view.default  # it moves only dimensions of size 1: the same layout
        elif t in _PERMUTES:
            self.env[n] = self._permute(n)
            return
        if t in _VIEW_OPS:
            if self._narrow_view(n):
                return
            if isinstance(self.env.get(a[0]), Deferred) and t in _COPIES | _SAME:
                if tuple(n.meta["val"].shape) != self.env[a[0]].shape:
                    raise NoTemplate(f"{t} reshapes a value computed before its permute")
                self.env[n] = self.env[a[0]]  # a copy of a value not yet built
                return
            held = self.env.get(a[0])
            if isinstance(held, int) and self.nodes[held].attrs.get("role") == "cell":
                self.env[n] = held  # one value, however viewed
                return
            if isinstance(held, int) and self.nodes[held].attrs.get("vshape") is not None:
                self.env[n] = self._view_bcast(held, n)
                return
            src = self.arg(a[0])
            shape = tuple(n.meta["val"].shape)
            cat = _cat_of(self.nodes, src)
            if src in self.vec_pos:  # a weight placed along one dimension: w.view(1, -1, 1, 1)
                self.env[n] = self._place_vec(src, shape, n)
                return
            rows = tuple(self.row_shape or ())
            big = [d for d, k in enumerate(shape) if k != 1]
            if (
                self.nodes[src].op in ("col", "axis")
                and len(shape) == len(rows)
                and len(big) == 1
                and big[0] < len(rows) - 2
                and shape[big[0]] == rows[big[0]]
            ):
                # ``arange(C).view(1, C, 1, 1)``: each element's coordinate along dimension d
                self.env[n] = self.new("pw", op="coord", attrs={"whole": True, "dim": big[0]})
                return
            if _coords_only(self.nodes, src) and _strip_ones(shape) == _strip_ones(
                tuple(a[0].meta["val"].shape)
            ):
                # Index arithmetic cast or given leading 1s (ALiBi's ``(j - i).float()`` of two
                # aranges): the same values at the same coordinates, computed in the kernel.
                self.env[n] = src
                return
            if self.nodes[src].op == "col" and shape and math.prod(shape) == shape[-1]:
                self.env[n] = src  # the column index viewed or cast: each column's own still
                return
            if (
                self.nodes[src].op == "col"
                and len(shape) >= 2
                and len(rows) >= 2
                and shape[-1] == 1
                and math.prod(shape) == shape[-2] == rows[-2]
            ):
                # ``arange(T)[:, None]``: along the rows' second-last dimension, each element's
                # row within its matrix (a causal mask's ``i >= j``)
                self.env[n] = self.coordinate("mrow")
                return
            if (
                self.nodes[src].op == "mrow"
                and len(rows) >= 2
                and shape[-1:] == (1,)
                and math.prod(shape) == rows[-2]
            ):
                self.env[n] = src  # already the row within the matrix (an arange of Tq < Tk)
                return
            if cat == "tile" and (
                self.merge_from is not None
                and _flattened_from(shape, self.row_shape) == self.merge_from
            ):
                ok = True  # the rows' trailing dimensions flattened: the same layout
            elif cat == "tile" and self.matmul_lead and _batch_view(shape, self.matmul_lead, rows):
                # a batched product's output as its operands' leading dimensions, merged or
                # split, or with 1s inserted or dropped (einsum's ``bhqd,bhkd->bhqk`` views the
                # bmm as [b, h, q, 1, k] and moves the 1 before its last view)
                ok = True
            elif cat == "tile":
                ok = bool(shape) and math.prod(shape) == math.prod(self.row_shape)
                # Only 1s inserted or dropped (``b.unsqueeze(-1)`` on its way to a batched
                # dot): the same elements in the same order, not a change of the row layout.
                ones = _ones_apart(shape, self.row_shape)
                if ok and shape[-1] != self.row_shape[-1] and self.red_dim is None and not ones:
                    # Fine only if every reduction runs over the whole tensor, or over the last
                    # dimension of this view when it splits the rows' dimensions into groups of
                    # contiguous elements (checked there and at the end): the elements are read
                    # as one flat array.
                    self.flat_view = True
                    self.chunk_view = self.chunk_view or _groups_of(shape, self.row_shape)
                ok = ok and (shape[-1] == self.row_shape[-1] or self.flat_view or ones)
                self.reshaped = self.reshaped or shape != self.row_shape
            elif cat == "rowscalar":
                ok = math.prod(shape) * self._n() == math.prod(self.row_shape)
                # expanded back over the rows (F.normalize's norm.expand_as(x)): a broadcast
                ok = ok or (t == aten.expand.default and shape == tuple(self.row_shape))
            else:
                ok = True
            if not ok:
                raise NoTemplate(f"{t} changes the row layout (to {list(shape)}); no template fits")
            self.env[n] = src
            return
        if t in _REDUCE_OPS:
            dims = a[1] if len(a) > 1 else kw.get("dim")
            if _over_ones(a[0].meta["val"].shape, dims):
                # Over dimensions of size 1 (a max over the one column a sum left): each
                # element is its own result, the same values in the same order.
                self.env[n] = self.arg(a[0])
                return
            if self._is_total(n, dims):
                op = _REDUCE_OPS[t]
                if op == "prod":
                    raise NoTemplate("a product over every row of a per-row value")
                x = self._vector_as(a[0], True) if self._is_vector(a[0]) else self.arg(a[0])
                self.env[n] = Total(op, x, len(n.meta["val"].shape))
                return
            if self._whole_of_rows(n, dims):
                # KL divergence's sum over everything after a log-softmax of each row: each
                # row's own reduction, then the fold over every row.
                op = _REDUCE_OPS[t]
                row = self.reduce(op, self.arg(a[0]))
                self.env[n] = Total(op, row, len(n.meta["val"].shape))
                return
            self._last_dim(n, dims)
            self.env[n] = self.reduce(_REDUCE_OPS[t], self.arg(a[0]))
            return
        if t in _NORMS:
            self.env[n] = self._vector_norm(n)  # torch.norm(x, p, dim), linalg.vector_norm
            return
        if t in _LOSSES:
            self.env[n] = self._loss(n)
            return
        if t in _GATHERS and n in self.prefix_gathers:
            table, _ = self._gather_args(n)
            if not self._prefix(n, table, 0, 0, 1):
                raise NoTemplate(
                    f"the first rows of {table.name} (a lookup of arange) where the rows do not "
                    "run along them"
                )
            return
        if t in _GATHERS:
            self.env[n] = self._gather(n)
            return
        if t in (aten.binary_cross_entropy_with_logits.default, aten.binary_cross_entropy.default):
            self.env[n] = self._binary_cross_entropy(n)
            return
        if t in (aten.max.dim, aten.min.dim):  # torch.max(x, dim): values, indices
            if _over_ones(a[0].meta["val"].shape, a[1]):  # each element its own max
                self.env[n] = (self.arg(a[0]), f"{n.name}'s indices over one element")
                return
            self._last_dim(n, a[1])
            op = "max" if t == aten.max.dim else "min"
            x = self.arg(a[0])
            self.env[n] = (self.reduce(op, x), self.reduce(f"arg{op}", x))
            return
        if t in (aten.argmax.default, aten.argmin.default):  # dim None: the flat index
            self._last_dim(n, a[1] if len(a) > 1 else kw.get("dim"))
            self.env[n] = self.reduce(t.__name__.split(".")[0], self.arg(a[0]))
            return
        if t in (aten.std.correction, aten.std_mean.correction):  # sqrt of the variance below
            var, mean = self._variance(n, t)
            std = self.pw("sqrt", var)
            self.env[n] = (std, mean) if t == aten.std_mean.correction else std
            return
        if t == aten.log_sigmoid_forward.default:  # min(x, 0) - log1p(exp(-|x|)), and a buffer
            x = self.arg(a[0])
            soft = self.pw("log1p", self.pw("exp", self.pw("neg", self.pw("abs", x))))
            out = self.pw("sub", self.pw("minimum", x, self.const(0.0)), soft)
            self.env[n] = (out, "the log-sigmoid's buffer")
            return
        if t in (aten.var.correction, aten.var_mean.correction):
            var, mean = self._variance(n, t)
            self.env[n] = (var, mean) if t == aten.var_mean.correction else var
            return
        if t in (aten._softmax.default, aten._log_softmax.default):
            self._last_dim(n, a[1])
            x = self.arg(a[0])
            m = self.reduce("max", x)
            shifted = self.pw("sub", x, m)
            s = self.reduce("sum", self.pw("exp", shifted))
            if t == aten._softmax.default:
                self.env[n] = self.pw("div", self.pw("exp", shifted), s)
            else:
                self.env[n] = self.pw("sub", shifted, self.pw("log", s))
            return
        if t == aten.arange.default:
            if n.users and all(u in self.prefix_gathers for u in n.users):
                self.env[n] = self.const(0.0)  # only a lookup's rows 0..T-1 (_prefix)
                return
            self.env[n] = self._column_index(n)
            return
        if t == aten.scalar_tensor.default:  # a number made a 0-d tensor (an eps)
            self.env[n] = self.const(a[0])
            return
        if t in _FILLED:  # lerp's weight as a tensor; ones or zeros added to the rows
            size = tuple(a[1] if t == aten.new_full.default else a[0])
            fill = _FILLED[t]
            if fill is None:
                fill = a[2] if t == aten.new_full.default else a[1]
            rows = tuple(self.row_shape or ())
            dtype = n.meta["val"].dtype
            fits = math.prod(size) == 1 or size == rows or _broadcasts(size, rows)
            if not fits or not (dtype.is_floating_point or dtype == torch.bool):
                raise NoTemplate(
                    f"a tensor made in the forward ({t}, shape {list(size)}, {dtype}) that is "
                    f"not a number over the rows' shape {list(rows)}"
                )
            # A boolean one (a mask's start: ``ones(T, T, dtype=bool)``) is 1 or 0.
            self.env[n] = self.const(float(bool(fill)) if dtype == torch.bool else fill)
            return
        if t == aten.empty_like.default:  # memory nothing reads until a fill writes it
            self.env[n] = f"uninitialized memory ({n.name}) read before anything writes it"
            return
        if t in (
            aten.zeros_like.default,
            aten.ones_like.default,
            aten.full_like.default,
            aten.fill.Scalar,
        ):
            like = a[0]
            if t == aten.fill.Scalar and getattr(like, "target", None) == aten.empty_like.default:
                like = like.args[0]  # an empty_like written whole: only its shape is read
            if (kw.get("dtype") or like.meta["val"].dtype) != like.meta["val"].dtype:
                raise NoTemplate(f"{t} of another dtype than its input's")
            value = {aten.zeros_like.default: 0.0, aten.ones_like.default: 1.0}.get(t)
            const = self.const(a[1] if value is None else value)
            src = self.env.get(like) if isinstance(like, torch.fx.Node) else None
            if isinstance(src, Narrow):  # zeros as wide as a slice (a cat's padding column)
                self.env[n] = Narrow(src.frac, lambda f, c=const: c)
                return
            shape, rows = tuple(like.meta["val"].shape), tuple(self.row_shape or ())
            if rows and shape and shape[:-1] == rows[:-1] and shape[-1] == 1 < rows[-1]:
                # One column of each row (``x[..., :1]``, ``x.select(-1, 0).unsqueeze(-1)``).
                self.env[n] = Narrow(Fraction(1, rows[-1]), lambda f, c=const: c)
                return
            fits = bool(rows) and (shape == rows or _broadcasts(shape, rows))
            if not isinstance(self.env.get(like), str) or not fits:
                self.arg(like)  # of the rows' shape (or of a value the rows broadcast)
            self.env[n] = const
            return
        if t in (aten.tril.default, aten.triu.default):
            if not self.matmul_epilogue:
                self.env[n] = self._band(n)
                return
            diagonal = int(a[1] if len(a) > 1 else kw.get("diagonal", 0))
            self.env[n] = self.pw(t.__name__.split(".")[0], self.arg(a[0]), diagonal=diagonal)
            return
        if t == aten.logsumexp.default:
            if _over_ones(a[0].meta["val"].shape, a[1] if len(a) > 1 else kw.get("dim")):
                self.env[n] = self.arg(a[0])  # log(exp(x)) of one element: x, infinities too
                return
            self._last_dim(n, a[1] if len(a) > 1 else kw.get("dim"))
            self.env[n] = self._logsumexp(self.arg(a[0]))
            return
        if t == aten.native_layer_norm.default:
            x, shape, w, b, eps = a
            if len(shape) != 1 and self.merge_from != len(self.row_shape) - len(shape):
                raise NoTemplate(
                    "layer_norm over several dimensions of a tensor other than the rows' "
                    "(or beside reductions over other dimensions)"
                )
            # Its reductions run over the normalised dimensions: recorded as any reduction's,
            # so one over another dimension beside it is refused here (a chain cuts between
            # them), not computed over that dimension.
            rank = x.meta["val"].dim()
            self._last_dim(n, list(range(rank - len(shape), rank)))
            x = self.arg(x)
            mean = self.reduce("mean", x)
            d = self.pw("sub", x, mean)
            var = self.reduce("mean", self.pw("mul", d, d))
            rstd = self.pw("rsqrt", self.pw("add", var, self.const(eps)))
            y = self.pw("mul", d, rstd)
            if w is not None:
                y = self.pw("mul", y, self.arg(w))
            if b is not None:
                y = self.pw("add", y, self.arg(b))
            self.env[n] = (y, mean, rstd)
            return
        if t in _MASKED_FILLS or t in _PW_SIMPLE:
            # Pointwise ops on 1-d inputs alone wait to be met (lowering_per_row); one that
            # computes a value per row reads such operands one value per row.
            if not self._vector_value(n, self._lower_pointwise):
                with self._swapped(self._per_row_operands(n)):
                    self._lower_pointwise(n)
            return
        refuse_unwritable([n])
        name = getattr(t, "__name__", str(t))
        raise NoTemplate(f"the reference uses {name}, which no template expresses")

    def _lower_pointwise(self, n: torch.fx.Node) -> None:
        """A pointwise op: ``masked_fill``, ``where`` or one of ``_PW_SIMPLE``."""
        t, a = n.target, n.args
        if t in _MASKED_FILLS:
            cond = self._condition(a[1])
            self.env[n] = self.pw("where", cond, self.arg(a[2]), self.arg(a[0]))
            return
        if t == aten.where.self:
            self.env[n] = self.pw("where", self._condition(a[0]), self.arg(a[1]), self.arg(a[2]))
            return
        if (scaled := self._scaled_total(n, _PW_SIMPLE[t])) is not None:
            self.env[n] = scaled
            return
        if any(self._deferred(x) for x in a):
            self.env[n] = self._defer_pointwise(_PW_SIMPLE[t], n)
        elif any(isinstance(self.env.get(x), Narrow) for x in a if isinstance(x, torch.fx.Node)):
            self.env[n] = self._narrow_pointwise(_PW_SIMPLE[t], n, self._pointwise)
        else:
            self.env[n] = self._pointwise(_PW_SIMPLE[t], n)

    def _loss(self, n: torch.fx.Node) -> int:
        """An elementwise loss of two tensors, then its reduction (``mean`` and ``sum`` over the
        whole tensor, as PyTorch reduces them): MSE, L1, smooth L1 and Huber."""
        a, kw = n.args, n.kwargs
        name = _LOSSES[n.target]
        reduction = a[2] if len(a) > 2 else kw.get("reduction", 1)
        d = self.pw("sub", self.arg(a[0]), self.arg(a[1]))
        ad = self.pw("abs", d)
        half_sq = self.pw("mul", self.pw("mul", d, d), self.const(0.5))
        if name == "mse":
            loss = self.pw("mul", d, d)
        elif name == "l1":
            loss = ad
        else:  # smooth L1 (beta) and Huber (delta): quadratic near 0, linear beyond
            knot = float(a[3] if len(a) > 3 else kw.get("beta", kw.get("delta", 1.0)))
            if knot <= 0.0:
                loss = ad
            else:
                near = self.pw("lt", ad, self.const(knot))
                linear = self.pw("sub", ad, self.const(0.5 * knot))
                if name == "smooth_l1":
                    inner = self.pw("div", half_sq, self.const(knot))
                else:
                    inner, linear = half_sq, self.pw("mul", linear, self.const(knot))
                loss = self.pw("where", near, inner, linear)
        if reduction == 0:
            return loss
        self._last_dim(n, None)  # over the whole tensor
        return self.reduce("mean" if reduction == 1 else "sum", loss)

    def _find_gathers(self, calls) -> None:
        """The tables (2-d float inputs) and indices (integer inputs) of the graph's gathers:
        ``F.embedding(idx, table)``, ``table[idx]``, ``table.index_select(0, idx)``, each an
        input of the forward used only that way."""
        self.tables, self.indices, self.prefix_gathers = set(), set(), set()
        for n in calls:
            if n.target not in _GATHERS:
                continue
            table, idx = self._gather_args(n)
            if _counts_from_zero(idx) and table.op == "placeholder":
                # ``pos(arange(T))``: a table's first T rows, read as ``pos[:T]`` (a GPT's
                # position embedding; _prefix), not gathered
                self.prefix_gathers.add(n)
                continue
            for x, what in ((table, "table"), (idx, "index")):
                if x.op != "placeholder":
                    raise NoTemplate(f"a gather whose {what} is computed ({x.name}), not an input")
            if table.meta["val"].dim() != 2 or not table.meta["val"].is_floating_point():
                raise NoTemplate("a gather from other than a 2-d floating-point table")
            if idx.meta["val"].is_floating_point() or idx.meta["val"].dtype == torch.bool:
                raise NoTemplate("a gather by other than integer indices")
            self.tables.add(table)
            self.indices.add(idx)
        for x in self.tables | self.indices:
            if any(u.target not in _GATHERS for u in x.users):
                raise NoTemplate(f"input {x.name} is gathered from (or by) and also read as is")

    @staticmethod
    def _gather_args(n: torch.fx.Node):
        a = n.args
        if n.target == aten.embedding.default:
            return a[0], a[1]
        if n.target == aten.index_select.default:
            if a[1] not in (0, -2):
                raise NoTemplate("index_select along other than the first dimension of a table")
            return a[0], a[2]
        indices = list(a[1])
        if len(indices) != 1 or not isinstance(indices[0], torch.fx.Node):
            raise NoTemplate("indexing by other than one integer tensor along the first dimension")
        return a[0], indices[0]

    def _gather(self, n: torch.fx.Node) -> int:
        """Rows of a table picked by integer indices (an embedding lookup): an input read, in
        each row of the rows' shape, at the row its index names; the kernel clamps an index to
        the table (torch raises on one outside it: the kernel cannot, but reads nothing
        outside the table either). ``table[idx]`` and ``index_select`` count from the end for a
        negative index, as torch does; an embedding does not."""
        table, idx = self._gather_args(n)
        shape = tuple(n.meta["val"].shape)
        if shape != tuple(self.row_shape):
            raise NoTemplate(
                f"gathered rows of shape {list(shape)} that are not the rows' shape "
                f"{list(self.row_shape)}"
            )
        ref = self.nodes[self.env[table]].attrs["ref"]
        attrs = {
            "ref": ref,
            "role": "bcast",
            "bshape": [1] * (len(shape) - 1) + [shape[-1]],
            "gather": self.nodes[self.env[idx]].attrs["ref"],
            "wrap": n.target != aten.embedding.default,
        }
        return self.new("input", attrs=attrs)

    def _binary_cross_entropy(self, n: torch.fx.Node) -> int:
        """Binary cross-entropy as torch computes it: on logits ``(1 - y) x + w_p softplus(-x)``
        with softplus(-x) = max(-x, 0) + log1p(exp(-|x|)) and w_p = 1 + (pos_weight - 1) y;
        on probabilities ``-(y max(log x, -100) + (1 - y) max(log(1 - x), -100))``; times the
        weight where given, then reduced over the whole tensor (mean or sum) or not."""
        a, kw = n.args, n.kwargs
        logits = n.target == aten.binary_cross_entropy_with_logits.default
        names = ["weight", "pos_weight", "reduction"] if logits else ["weight", "reduction"]
        opt = {k: (a[2 + i] if len(a) > 2 + i else kw.get(k)) for i, k in enumerate(names)}
        x, y = self.arg(a[0]), self.arg(a[1])
        one = self.const(1.0)
        not_y = self.pw("sub", one, y)
        if logits:
            soft = self.pw(
                "add",
                self.pw("maximum", self.pw("neg", x), self.const(0.0)),
                self.pw("log1p", self.pw("exp", self.pw("neg", self.pw("abs", x)))),
            )
            if opt["pos_weight"] is not None:
                pos = self.pw("sub", self.arg(opt["pos_weight"]), one)
                soft = self.pw("mul", self.pw("add", self.pw("mul", pos, y), one), soft)
            loss = self.pw("add", self.pw("mul", not_y, x), soft)
        else:
            floor = self.const(-100.0)
            log_x = self.pw("maximum", self.pw("log", x), floor)
            log_1mx = self.pw("maximum", self.pw("log", self.pw("sub", one, x)), floor)
            both = self.pw("add", self.pw("mul", y, log_x), self.pw("mul", not_y, log_1mx))
            loss = self.pw("neg", both)
        if opt["weight"] is not None:
            loss = self.pw("mul", loss, self.arg(opt["weight"]))
        reduction = 1 if opt["reduction"] is None else opt["reduction"]
        if reduction == 0:
            return loss
        self._last_dim(n, None)  # over the whole tensor
        return self.reduce("mean" if reduction == 1 else "sum", loss)

    def _variance(self, n: torch.fx.Node, t) -> tuple[int, int]:
        """(variance, mean) over the node's dimensions, with its correction (1 unless given)."""
        a, kw = n.args, n.kwargs
        self._last_dim(n, a[1] if len(a) > 1 else kw.get("dim"))
        correction = kw.get("correction", 1)
        x = self.arg(a[0])
        mean = self.reduce("mean", x)
        d = self.pw("sub", x, mean)
        ss = self.reduce("sum", self.pw("mul", d, d))
        return self.pw("div_n", ss, self.const(correction or 0)), mean

    def _output_views(self, plan: Plan, shapes: list, red: int) -> dict:
        """{output: the row dimension each of its dimensions is} for a per-row value whose
        rank is neither the rows' (keepdim) nor theirs less the reduced ones: a reduction
        over dimensions of size 1 after one with keepdim (KernelBench L2 42: a logsumexp over
        the channels with keepdim, then a sum over the two 1s left) passes its values through
        and drops those dimensions. The kept dimensions are matched in order by size."""
        ndim = len(self.row_shape)
        span = self.red_span if red != ndim - 1 else 1
        views = {}
        for j, shape in enumerate(shapes):
            if plan.extra["output_kinds"][j] != "rowscalar" or len(shape) in (ndim, ndim - span):
                continue
            free = [k for k in range(ndim) if not red <= k < red + span]
            dims = []
            for size in shape:
                k = next((k for k in free if int(self.row_shape[k]) == int(size)), None)
                if k is None:
                    raise NoTemplate(f"output of shape {list(shape)} is not a row reduction's")
                free = free[free.index(k) + 1 :]
                dims.append(k)
            views[str(j)] = dims
        return views

    def _is_total(self, n: torch.fx.Node, dims) -> bool:
        """Whether this reduction folds a per-row value (one per row) over every row: a 1-d
        input's values are per row where they cannot lie along the row (not of its length)."""
        src = self.env.get(n.args[0])
        shape = tuple(n.args[0].meta["val"].shape)
        if self._is_vector(n.args[0]):
            rows = tuple(self.row_shape)
            if shape != rows[:-1] or shape[-1] == rows[-1] or not self._per_row_ready():
                return False
        elif not isinstance(src, int) or _cat_of(self.nodes, src) != "rowscalar" or self.full:
            return False
        dims = [dims] if isinstance(dims, int) else list(dims or [])
        ndim = len(shape)
        if (
            ndim == len(self.row_shape)
            and len(dims) == 1
            and dims[0] % max(ndim, 1) == self.red_dim
            and self.red_dim is not None
            and self.red_dim < ndim - 1
            and shape[-1] == 1
            and _broadcasts(shape, self.row_shape)
        ):
            # A value one per last-dimension row ([B, S, 1], a token mask) summed over the
            # middle dimension the rows already run along (a masked mean's
            # ``(x * m).sum(1) / m.sum(1)``): its elements vary along those rows, each row's
            # own reduction of it (as broadcast), not a fold over rows.
            return False
        every = not dims or sorted(d % max(ndim, 1) for d in dims) == list(range(ndim))
        if not every or math.prod(shape) * self._n() != math.prod(self.row_shape):
            raise NoTemplate(
                f"{n.target} reduces a per-row value over part of the rows; templates fold it "
                "over every row only"
            )
        return True

    def _scaled_total(self, n: torch.fx.Node, op: str) -> Total | None:
        """A reduction over every row times or over a number (KL divergence's ``batchmean``: the
        sum over everything by the batch size): the fold applies it to its result, as torch
        does (a sum of no rows over a batch of 0 is NaN). A number computed from the sizes
        becomes one the wrapper computes at run time, as any other constant does."""
        if op == "div" and len(n.args) == 2 and all(isinstance(a, torch.fx.Node) for a in n.args):
            num, den = (self.env.get(a) for a in n.args)
            if isinstance(num, Total) and isinstance(den, Total):
                if (
                    num.op != den.op
                    or num.op not in ("sum", "mean")
                    or num.ndim != den.ndim
                    or num.scale is not None
                    or den.scale is not None
                    or num.den is not None
                    or den.den is not None
                ):
                    raise NoTemplate(
                        f"a quotient of reductions over every row other than two plain sums "
                        f"or means ({n.name})"
                    )
                return Total(num.op, num.arg, num.ndim, den=den.arg)
        if op == "neg" and len(n.args) == 1:  # -x.mean(): times -1
            op, args = "mul", (n.args[0], -1.0)
        elif op not in ("mul", "div") or len(n.args) != 2:
            return None
        else:
            args = n.args
        x, k = args
        if op == "mul" and not isinstance(x, torch.fx.Node):
            x, k = k, x  # a number times the total
        total = self.env.get(x) if isinstance(x, torch.fx.Node) else None
        if not isinstance(total, Total) or isinstance(k, bool) or not isinstance(k, int | float):
            return None
        if total.scale is not None:
            # Two numbers in a row are one (``-(x.sum() / 2)``) where the first is written
            # into the code, not read from the sizes at run time.
            was, node = total.scale[0], self.nodes[total.scale[1]]
            if node.kind != "const":
                raise NoTemplate(f"arithmetic on a scaled reduction over every row ({x.name})")
            same = (was == "mul") == (op == "mul")
            k = node.value * float(k) if same else node.value / float(k)
            op = was
        return Total(total.op, total.arg, total.ndim, (op, self.const(float(k))), total.den)

    def _whole_of_rows(self, n: torch.fx.Node, dims) -> bool:
        """Whether this reduction runs over every element of a row-shaped value once the rows
        already reduce over their own dimension: the same as each row's reduction folded over
        the rows (a mean of equal-length rows' means is the mean)."""
        shape = tuple(n.args[0].meta["val"].shape)
        dims = [dims] if isinstance(dims, int) else list(dims or [])
        every = not dims or sorted(d % max(len(shape), 1) for d in dims) == list(range(len(shape)))
        plain = not (self.full or self.flat_view or self.reshaped)
        return (
            every
            and len(shape) > 1
            and shape == tuple(self.row_shape)
            and plain
            and self.red_dim is not None
            and self.red_set is None
            and self.merge_from is None
            and _REDUCE_OPS[n.target] in ("sum", "mean", "max", "min")
        )

    def _logsumexp(self, x: int) -> int:
        """log(sum(exp(x))) as torch computes it: shifted by the row's maximum, taken as 0 where
        that is infinite (a row of -inf gives -inf, one holding +inf gives +inf)."""
        m = self.reduce("max", x)
        finite = self.pw("lt", self.pw("abs", m), self.const(float("inf")))
        m = self.pw("where", finite, m, self.const(0.0))
        s = self.reduce("sum", self.pw("exp", self.pw("sub", x, m)))
        return self.pw("add", self.pw("log", s), m)

    def _band(self, n: torch.fx.Node) -> int:
        """``tril`` / ``triu`` of a value over the rows' last two dimensions (a causal mask made
        from sizes alone, ``triu(ones(T, T, dtype=bool), 1)``, or a value masked by it): the
        element's column (``col``) less its row within the matrix (``mrow``: the flat row
        number modulo the rows' second-last size), against the diagonal. The value must have
        the rows' last two sizes itself, so that its (i, j) are the rows'."""
        t, a = n.target, n.args
        diagonal = int(a[1] if len(a) > 1 else n.kwargs.get("diagonal", 0))
        shape, rows = tuple(a[0].meta["val"].shape), tuple(self.row_shape or ())
        if len(shape) < 2 or len(rows) < 2 or shape[-2:] != rows[-2:]:
            raise NoTemplate(
                f"{t} of a value of shape {list(shape)} whose last two dimensions are not the "
                f"rows' {list(rows[-2:])} (outside a matmul's epilogue and a move)"
            )
        x = self.arg(a[0])
        keep = self.pw(
            "ge" if t == aten.triu.default else "le",
            self.pw("sub", self.coordinate("col"), self.coordinate("mrow")),
            self.const(float(diagonal)),
        )
        if n.meta["val"].dtype == torch.bool and self.nodes[x].kind == "const":
            return keep if self.nodes[x].value else self.const(0.0)  # the mask itself
        return self.pw("where", keep, x, self.const(0.0))

    def _condition(self, a) -> int:
        """A ``where`` / ``masked_fill`` condition: a boolean input is read as 0/1, so it
        becomes a comparison; a comparison in the graph already is one."""
        cond = self.arg(a)
        node = self.nodes[cond]
        if node.kind == "input" and node.attrs.get("mask"):
            return self.pw("gt", cond, self.const(0.5))
        return cond

    def _view_bcast(self, src: int, n: torch.fx.Node) -> int:
        """A view of an input that broadcasts (or will, once viewed): ``cos[:, None, :]`` of a
        table per token, ``mask[:, None, None, :]`` of a mask shared by every head. Views that
        only insert or drop 1s, and expands of 1s, keep its elements where they are; the new
        input node records which of its dimensions each of the view's is (``vdims``)."""
        node = self.nodes[src]
        ref, old, vdims = node.attrs["ref"], tuple(node.attrs["vshape"]), node.attrs["vdims"]
        # vdims placed against the rows carry a 1 (None) for each leading dimension the view
        # lacks: the view's own are the last len(old) (``pos[:T][None]``)
        vdims = list(vdims)[len(vdims) - len(old) :]
        new = tuple(n.meta["val"].shape)
        if n.target == aten.expand.default:
            lead = len(new) - len(old)
            new, new_vdims = (1,) * lead + old, [None] * lead + list(vdims)
        elif [v for v in new if v != 1] == [v for v in old if v != 1]:
            kept = iter(d for d, v in zip(vdims, old, strict=True) if v != 1)
            new_vdims = [next(kept) if v != 1 else None for v in new]
        else:
            raise NoTemplate(
                f"{n.target} reshapes input {ref} (from {list(old)} to {list(new)}) beyond "
                "inserting or dropping 1s; no template fits"
            )
        attrs = {**node.attrs, "vshape": list(new), "vdims": new_vdims, "viewed": True}
        return self._view_input(attrs, new)

    def _view_input(self, attrs: dict, new) -> int:
        """A new input node for a view of an input, of shape ``new`` (``attrs["vdims"]`` of its
        rank): placed against the rows where it broadcasts to them, else pending (refused if
        used before another view makes it so)."""
        attrs = {k: v for k, v in attrs.items() if k not in ("bshape", "pending", "per_row")}
        new, rank = tuple(new), len(self.row_shape)
        if len(new) <= rank and (_broadcasts(new, self.row_shape) or new == self.row_shape):
            attrs.update(pending=False, bshape=[1] * (rank - len(new)) + list(new))
            attrs["vdims"] = [None] * (rank - len(new)) + list(attrs["vdims"])
        else:
            attrs.update(pending=True)
        return self._mark_per_row(self.new("input", attrs=attrs))

    def _permute(self, n: torch.fx.Node) -> int | Deferred:
        """A transpose or permute of an input (``x.transpose(1, 2) + y``, ``x * w.t()``,
        ``softmax(x.transpose(-1, -2))``): the input is read through the permuted view's strides,
        as an input that broadcasts is (its dimensions permuted in ``vdims``), so no copy is
        made. Of a value computed from such inputs (``(x * 2).transpose(1, 2)``): the same
        expression over the inputs read through the permutation (a :class:`Deferred` until its
        shape is the rows')."""
        src, t = n.args[0], n.target
        nd = len(src.meta["val"].shape)
        if t == aten.t.default:
            perm = list(range(nd))[::-1]
        elif t == aten.transpose.int:
            perm = list(range(nd))
            i, j = n.args[1] % max(nd, 1), n.args[2] % max(nd, 1)
            perm[i], perm[j] = perm[j], perm[i]
        else:
            perm = [d % max(nd, 1) for d in n.args[1]]
        held = self._deferred(src)
        if held is None:
            held = self.env.get(src)
            node = self.nodes[held] if isinstance(held, int) else None
            viewed = tuple(src.meta["val"].shape) != tuple(self.row_shape)  # a reshaped tile
            if node is None or node.kind != "input" or node.attrs["role"] != "tile" or viewed:
                raise NoTemplate(
                    f"{t} of {src.name}, which is neither an input nor pointwise ops on inputs "
                    "(a reshape that splits or merges dimensions, a reduction); templates read "
                    "inputs through a permutation of their own dimensions"
                )
            return self._permute_input(held, perm, tuple(src.meta["val"].shape))
        shape = tuple(held.shape[p] for p in perm)
        moved = Deferred(shape, lambda r, h=held, p=perm: h.build([p[i] for i in r]))
        if shape == tuple(self.row_shape) or _broadcasts(shape, self.row_shape):
            return moved.build(list(range(nd)))
        return moved

    def _prefix(self, n: torch.fx.Node, src=None, dim=None, start=None, step=None) -> bool:
        """``pos[: x.shape[1]]``: the first rows of an input along one of its own dimensions
        (other than the last), as long as the rows' dimension it meets. Read through its
        strides at the rows' coordinates, which stay below that length, it reads the prefix:
        the wrapper narrows it to the rows' size there (``prefix``: the input's dimensions).
        ``n`` a slice, or (``src``, ``dim``, ``start``, ``step`` given) another op that takes
        the same rows (an embedding of ``arange(T)``)."""
        if src is None:
            a = n.args
            src = a[0]
            dim = a[1] if len(a) > 1 else 0
            start, step = (a[2] if len(a) > 2 else 0), (a[4] if len(a) > 4 else 1)
        held = self.env.get(src)
        node = self.nodes[held] if isinstance(held, int) else None
        if node is None or node.kind != "input" or node.attrs.get("vshape") is None:
            return False
        ndim = len(src.meta["val"].shape)
        dim = dim % max(ndim, 1)
        own = node.attrs["vdims"][len(node.attrs["vdims"]) - ndim :][dim]
        if dim == ndim - 1 or start not in (0, None) or step != 1 or own is None:
            return False
        new = list(n.meta["val"].shape)
        attrs = dict(node.attrs)
        attrs.update(vshape=new, prefix=sorted({*node.attrs.get("prefix", []), own}), viewed=True)
        attrs["vdims"] = attrs["vdims"][len(attrs["vdims"]) - ndim :]
        self.env[n] = self._view_input(attrs, new)
        return True

    def _deferred(self, x) -> Deferred | None:
        """``x`` as a :class:`Deferred` when it is one, or an input not yet of the rows' shape
        (read through a permutation once built); else None."""
        held = self.env.get(x) if isinstance(x, torch.fx.Node) else None
        if isinstance(held, Deferred):
            return held
        if isinstance(held, int) and self.nodes[held].kind == "input":
            node = self.nodes[held]
            if node.attrs.get("pending") and node.attrs.get("vshape") is not None:
                shape = tuple(node.attrs["vshape"])
                return Deferred(shape, lambda r, i=held, s=shape: self._permute_input(i, r, s))
        return None

    def _defer_pointwise(self, op: str, n: torch.fx.Node) -> Deferred:
        """A pointwise op on values not yet of the rows' shape: built, once a permute gives it
        that shape, from its operands built through the same permutation."""
        shape = tuple(n.meta["val"].shape)
        operands = [x for x in n.args if isinstance(x, torch.fx.Node)]
        held = {x: self._deferred(x) for x in operands}
        for x in operands:
            if held[x] is None or held[x].shape != shape:
                raise NoTemplate(
                    f"{n.target} mixes a value of shape {list(x.meta['val'].shape)} with one "
                    f"that is not of the rows' shape {list(self.row_shape)} before a permute "
                    "makes it so; not covered"
                )

        def build(perm, n=n, op=op, held=held):
            saved = {x: self.env[x] for x in held}
            for x, d in held.items():
                self.env[x] = d.build(perm)
            try:
                return self._pointwise(op, n)
            finally:
                self.env.update(saved)

        return Deferred(shape, build)

    def _permute_input(self, src: int, perm: list, old: tuple) -> int:
        """Input node ``src`` (of shape ``old``) read through permutation ``perm``."""
        node = self.nodes[src]
        nd = len(old)
        if node.attrs.get("vshape") is not None:
            vshape, vdims = list(node.attrs["vshape"]), list(node.attrs["vdims"])
            vdims = vdims[len(vdims) - len(vshape) :]  # as the view's own rank
        else:  # a tile: the input as it is
            vshape, vdims = list(old), [i if v != 1 else None for i, v in enumerate(old)]
        if len(vshape) != nd or len(perm) != nd:
            raise NoTemplate(f"a permute of input {node.attrs['ref']} after a view is not covered")
        new = [vshape[p] for p in perm]
        attrs = dict(node.attrs)
        attrs.update(
            role="bcast", vshape=new, vdims=[vdims[p] for p in perm], viewed=True, permuted=True
        )
        return self._view_input(attrs, new)

    def _vector_norm(self, n: torch.fx.Node) -> int:
        """A p-norm over one dimension as a reduction: sqrt(sum x^2), sum |x|, max |x|, min |x|
        or (sum |x|^p)^(1/p)."""
        a, kw = n.args, n.kwargs
        order = a[1] if len(a) > 1 else kw.get("ord", kw.get("p", 2))
        order = 2 if order is None else order
        dims = a[2] if len(a) > 2 else kw.get("dim")
        if (a[4] if len(a) > 4 else kw.get("dtype")) is not None:
            raise NoTemplate("a vector norm with a dtype argument is not covered")
        self._last_dim(n, dims)
        order = float(order)
        x = self.arg(a[0])
        if order == 2.0:
            return self.pw("sqrt", self.reduce("sum", self.pw("mul", x, x)))
        if order == 0.0:
            raise NoTemplate("the 0-norm (a count of non-zeros) is not covered")
        ax = self.pw("abs", x)
        if order == 1.0:
            return self.reduce("sum", ax)
        if order in (float("inf"), float("-inf")):
            return self.reduce("max" if order > 0 else "min", ax)
        powered = self.reduce("sum", self.pw("pow", ax, self.const(order)))
        return self.pw("pow", powered, self.const(1.0 / order))

    def _pointwise(self, op: str, n: torch.fx.Node) -> int:
        a, kw = n.args, n.kwargs
        if op in ("add", "sub") and (kw.get("alpha", 1) != 1 or (len(a) > 2 and a[2] != 1)):
            alpha = kw.get("alpha", a[2] if len(a) > 2 else 1)
            return self.pw(op, self.arg(a[0]), self.pw("mul", self.arg(a[1]), self.const(alpha)))
        if op == "rsub":
            return self.pw("sub", self.arg(a[1]), self.arg(a[0]))
        if op == "div" and kw.get("rounding_mode"):
            raise NoTemplate("division with a rounding mode is not supported")
        if op == "gelu":
            approx = kw.get("approximate", a[1] if len(a) > 1 else "none")
            return self.pw("gelu_tanh" if approx == "tanh" else "gelu", self.arg(a[0]))
        if op in ("clamp", "hardtanh"):
            lo = a[1] if len(a) > 1 else kw.get("min", -1.0 if op == "hardtanh" else None)
            hi = a[2] if len(a) > 2 else kw.get("max", 1.0 if op == "hardtanh" else None)
            x = self.arg(a[0])
            if lo is not None:
                x = self.pw("maximum", x, self.arg(lo))
            if hi is not None:
                x = self.pw("minimum", x, self.arg(hi))
            return x
        if op == "clamp_min":
            return self.pw("maximum", self.arg(a[0]), self.arg(a[1]))
        if op == "clamp_max":
            return self.pw("minimum", self.arg(a[0]), self.arg(a[1]))
        if op == "leaky_relu":
            slope = a[1] if len(a) > 1 else kw.get("negative_slope", 0.01)
            return self.pw("leaky_relu", self.arg(a[0]), self.const(slope))
        if op == "elu":
            alpha, scale, in_scale = (list(a[1:]) + [1.0, 1.0, 1.0])[:3]
            return self.pw(
                "elu", self.arg(a[0]), self.const(alpha), self.const(scale), self.const(in_scale)
            )
        if op == "softplus":
            beta, threshold = (list(a[1:]) + [1.0, 20.0])[:2]
            return self.pw("softplus", self.arg(a[0]), self.const(beta), self.const(threshold))
        if op in ("and", "or", "xor", "not") and n.meta["val"].dtype != torch.bool:
            raise NoTemplate(f"bitwise {op} of integers (templates compute in floating point)")
        if op == "round" and kw.get("decimals", a[1] if len(a) > 1 else 0):
            decimals = int(kw.get("decimals", a[1] if len(a) > 1 else 0))
            how = "round_mul" if decimals >= 0 else "round_div"
            return self.pw(how, self.arg(a[0]), self.const(10.0 ** abs(decimals)))
        if op == "round":
            return self.pw("round", self.arg(a[0]))
        if op == "pow_base" and (not isinstance(a[0], int | float) or a[0] < 0):
            raise NoTemplate("a negative number (or a tensor) raised to a tensor's power")
        if op == "nan_to_num":
            return self._nan_to_num(n)
        args = [self.arg(x) for x in a]
        return self.pw(op, *args)

    def _nan_to_num(self, n: torch.fx.Node) -> int:
        """``nan_to_num``: NaN, +inf and -inf replaced; the infinities by the largest finite
        values of the dtype where no bound is given, which the wrapper reads off an input of
        that dtype at run time (one candidate serves float32 and bfloat16 cases)."""
        a, kw = n.args, n.kwargs
        names = ("nan", "posinf", "neginf")
        given = [kw.get(k, a[i + 1] if len(a) > i + 1 else None) for i, k in enumerate(names)]
        dtype = n.meta["val"].dtype
        same = [
            p
            for p in self.gm.graph.nodes
            if p.op == "placeholder"
            and isinstance(p.meta.get("val"), torch.Tensor)
            and p.meta["val"].dtype == dtype
            and p in self.env
            and isinstance(self.env[p], int)
        ]

        def largest(sign: float) -> int:
            if not same:  # a dtype no input has: its bound as the trace knows it
                return self.const(sign * torch.finfo(dtype).max)
            ref = self.nodes[self.env[same[0]]].attrs["ref"]
            big = self.new(
                "input", attrs={"ref": f"torch.finfo({ref}.dtype).max", "role": "scalar"}
            )
            return big if sign > 0 else self.pw("neg", big)

        x = self.arg(a[0])
        nan = self.const(0.0 if given[0] is None else given[0])
        pos = largest(1.0) if given[1] is None else self.const(given[1])
        neg = largest(-1.0) if given[2] is None else self.const(given[2])
        inf = self.const(float("inf"))
        out = self.pw("where", self.pw("eq", x, self.pw("neg", inf)), neg, x)
        out = self.pw("where", self.pw("eq", x, inf), pos, out)
        return self.pw("where", self.pw("isnan", x), nan, out)

    # -- matmul family
    def _lower_matmul(self, placeholders, calls) -> Plan:
        mms = [n for n in calls if n.target in _MATMUL_OPS]
        if len(mms) != 1:
            raise NoTemplate(f"{len(mms)} matrix products in the reference; templates fuse one")
        mm = mms[0]
        if mm.target == aten.matmul.default:
            raise NoTemplate(f"{mm.target} left undecomposed by the trace; no template fits")
        ph_ref = dict(zip(placeholders, self.refs, strict=True))

        def operand(node):
            """Follow views back to a placeholder: (its reference, whether the product reads it
            transposed, its shape). The views only re-label the input's memory unless a copy
            follows a permutation (refused), so the operand's strides say how it is read."""
            val, copied = node.meta["val"], False
            while node.op == "call_function":  # from the product back to the input
                if node.target in _PERMUTES:
                    if copied:
                        raise NoTemplate("a copy of a permuted matmul operand; no template fits")
                elif node.target not in _OPERAND_VIEWS:
                    raise NoTemplate(f"matmul operand computed by {node.target}; no template fits")
                copied = copied or node.target in _COPIES
                node = node.args[0]
            if node not in ph_ref:
                raise NoTemplate("matmul operand is not an input or parameter")
            if val.is_contiguous():
                transposed = False
            elif val.dim() >= 2 and val.mT.is_contiguous():
                transposed = True
            else:
                raise NoTemplate(f"a matmul operand with strides {list(val.stride())}")
            return ph_ref[node], transposed, tuple(node.meta["val"].shape)

        bias = None
        if mm.target == aten.addmm.default:
            bias_node, a_node, b_node = mm.args[:3]
            if mm.kwargs.get("beta", 1) != 1 or mm.kwargs.get("alpha", 1) != 1:
                raise NoTemplate("addmm with alpha/beta is not covered")
        else:
            a_node, b_node = mm.args[:2]
        a_ref, a_t, a_shape = operand(a_node)
        b_ref, b_t, b_shape = operand(b_node)
        batch: dict = {}
        k = int(a_node.meta["val"].shape[-1])
        if mm.target != aten.bmm.default and not a_t and int(a_shape[-1]) != k:
            # Rows whose last dimensions merge into K (heads written side by side, ``y.transpose(
            # 1, 2).contiguous().view(B, T, C)`` into ``c_proj``): they are merged again.
            merged = [j for j in range(2, len(a_shape) + 1) if math.prod(a_shape[-j:]) == k]
            if not merged:
                raise NoTemplate(f"a matmul's left operand {list(a_shape)} read as rows of {k}")
            batch["a_merge"] = merged[0]
        if mm.target == aten.bmm.default:
            batch = self._matmul_batch(a_node, a_shape, a_t, b_node, b_shape, b_t)
            if batch["batch_a"] == "batched":
                self.matmul_lead = tuple(int(d) for d in a_shape[:-2])
        elif a_t and len(a_shape) != 2:
            raise NoTemplate("a transposed left operand of more than two dimensions")
        n_out = mm.meta["val"].shape[-1]
        self.row_shape = (int(mm.meta["val"].shape[-2]), int(n_out))
        self.matmul_epilogue = True
        acc = self.new("input", attrs={"ref": "acc", "role": "tile"})
        self.env[mm] = acc
        if mm.target == aten.addmm.default:
            bshape = tuple(bias_node.meta["val"].shape)
            if bias_node not in ph_ref or bshape not in ((n_out,), (1, n_out)):
                raise NoTemplate("addmm bias is not a per-column vector input")
            bias = self.new("input", attrs={"ref": ph_ref[bias_node], "role": "vec"})
            self.env[mm] = self.pw("add", acc, bias)
        # The epilogue: everything after the product, and the ops before it in the reference
        # that do not feed its operands (``sigmoid(g) * (a @ b)``).
        after = calls[calls.index(mm) + 1 :]
        feeding = {mm}
        for n in reversed(calls[: calls.index(mm)]):
            if any(u in feeding for u in n.users):
                feeding.add(n)
        before = [n for n in calls[: calls.index(mm)] if n not in feeding]
        out_node = next(n for n in self.gm.graph.nodes if n.op == "output")
        outs = out_node.args[0]
        outs = list(outs) if isinstance(outs, list | tuple) else [outs]
        # An input of the product's own shape (as the product or as its output's view: a
        # residual, the gate of a SwiGLU written by the stage before) is read at each output
        # element, by the output's offsets.
        tile_shapes = {tuple(mm.meta["val"].shape)}
        tile_shapes |= {tuple(o.meta["val"].shape) for o in outs if isinstance(o, torch.fx.Node)}
        numel = mm.meta["val"].numel()
        for p in placeholders:
            val = p.meta["val"]
            if (
                val.is_floating_point()
                and val.dim() >= 2
                and tuple(val.shape) in tile_shapes
                and val.numel() == numel
                and any(u in after or u in before for u in p.users)
            ):
                self.env[p] = self.new("input", attrs={"ref": ph_ref[p], "role": "tile"})
            elif p.meta["val"].is_floating_point() and tuple(p.meta["val"].shape) == (n_out,):
                if p not in (bias_node if bias else None,):
                    attrs = {"ref": ph_ref[p], "role": "vec", "length": int(n_out)}
                    self.env.setdefault(p, self.new("input", attrs=attrs))
                    # along the columns; viewed as [1, n] (a norm's statistics per feature)
                    self.vec_pos[self.env[p]] = 1
            elif p.meta["val"].is_floating_point() and p.meta["val"].numel() == 1:
                # One value (a 0-d parameter, a bias of shape (1,)), read from its memory; a
                # 0-d forward argument is a Python number (not bound: refused as before).
                if p.meta["val"].dim() or ph_ref[p].startswith("self"):
                    self.env.setdefault(
                        p, self.new("input", attrs={"ref": ph_ref[p], "role": "cell"})
                    )
        for n in before:
            try:
                self._lower_call(n)
            except NoTemplate as exc:
                self.env[n] = str(exc)  # said where the epilogue reads it
        for n in after:
            self._lower_call(n)
        if any(pos != 1 for pos in self.vec_pos.values()):
            raise NoTemplate("a weight of the epilogue placed along the product's rows")
        if len(outs) != 1:
            raise NoTemplate("matmul with several outputs is not covered")
        out_shape = tuple(outs[0].meta["val"].shape) if isinstance(outs[0], torch.fx.Node) else ()
        ones: list[int] = []
        if self.matmul_lead and out_shape != self.matmul_lead + self.row_shape:
            # The wrapper writes a batched product's output as [*batch, M, N], and returns it
            # with 1s inserted where the trace has them (einsum's [b, h, q, 1, k], which a
            # kernel after it, a permute that moves data, reads as traced); a view that merges
            # or splits dimensions is not that.
            ones = _inserted_ones(out_shape, self.matmul_lead + self.row_shape)
            if not ones:
                raise NoTemplate(f"a batched product's output returned as {list(out_shape)}")
        plan = Plan(family="matmul", forward_args=[], init_source="", preamble="")
        plan.nodes = self.nodes
        plan.outputs = [self.arg(outs[0])]
        _categorise(plan)
        if any(n.kind in ("reduce", "scan") for n in plan.nodes):
            raise NoTemplate("matmul epilogue with a reduction or a scan is not covered")
        plan.extra.update(a=a_ref, b=b_ref, a_transposed=a_t, b_transposed=b_t, k_dim=k, **batch)
        if ones:
            plan.extra["out_ones"] = ones
        ops = sorted({n.op for n in plan.nodes if n.kind == "pw"})
        kind = "batched matmul" if batch.get("batch_a") else "matmul"
        plan.summary = (
            f"{kind} {a_ref}{'.T' if a_t else ''} @ {b_ref}{'.T' if b_t else ''} "
            f"with epilogue [{', '.join(ops)}]"
        )
        return plan

    @staticmethod
    def _matmul_batch(a_node, a_shape, a_t, b_node, b_shape, b_t) -> dict:
        """How a ``bmm``'s operands come from the inputs: the left one's leading dimensions
        are the batch (``torch.bmm``) or folded into its rows (an einsum ``bijl,lk->bijk``
        traced as one product of batch 1); the right one is batched alike or one matrix shared
        by every batch. A batched operand may be read transposed (its last two dimensions
        swapped: attention's scores ``q @ k.transpose(-2, -1)``)."""
        (ba, m, k), (bb, _, _) = a_node.meta["val"].shape, b_node.meta["val"].shape
        # A transposed operand (``q @ k.transpose(-2, -1)``) is read through its strides like
        # any other: its rows are its last dimension.
        if len(a_shape) >= 3 and ba == math.prod(a_shape[:-2]) and m == a_shape[-1 if a_t else -2]:
            a_mode = "batched"
        elif ba == 1 and not a_t:
            a_mode = "rows"
        else:
            raise NoTemplate(f"a batched matmul's left operand viewed as {[ba, m, k]}")
        if bb == 1 and len(b_shape) == 2:
            b_mode = "shared"
        elif a_mode == "batched" and bb == ba and len(b_shape) >= 3:
            b_mode = "batched"
        else:
            raise NoTemplate(f"a batched matmul's right operand of shape {list(b_shape)}")
        return {"batch_a": a_mode, "batch_b": b_mode}

    # -- cross-entropy family
    def _lower_cross_entropy(self, placeholders, calls) -> Plan:
        ph_ref = dict(zip(placeholders, self.refs, strict=True))
        core = [n for n in calls if n.target is not operator.getitem]
        if [n.target for n in core[:2]] != [
            aten._log_softmax.default,
            aten.nll_loss_forward.default,
        ]:
            raise NoTemplate("nll_loss with extra ops (weights, casts) is not covered")
        lsm, nll = core[:2]
        smoothing = _label_smoothing(core[2:], lsm, nll) if core[2:] else 0.0
        x, dim = lsm.args[0], lsm.args[1]
        if x not in ph_ref or x.meta["val"].ndim != 2 or dim % 2 != 1:
            raise NoTemplate("cross-entropy template covers 2-d logits [tokens, classes] only")
        _, target, weight, reduction, ignore_index = nll.args
        if weight is not None or target not in ph_ref:
            raise NoTemplate("class-weighted nll_loss is not covered")
        plan = Plan(family="cross_entropy", forward_args=[], init_source="", preamble="")
        plan.extra.update(
            logits=ph_ref[x],
            target=ph_ref[target],
            reduction={0: "none", 1: "mean", 2: "sum"}[int(reduction)],
            ignore_index=int(ignore_index),
            label_smoothing=smoothing,
        )
        smoothed = f", label_smoothing={smoothing:g}" if smoothing else ""
        plan.summary = (
            f"cross-entropy of {ph_ref[x]} against {ph_ref[target]} "
            f"(reduction={plan.extra['reduction']}, ignore_index={ignore_index}{smoothed})"
        )
        return plan


# What F.cross_entropy(..., label_smoothing=e) adds after the log-softmax and the nll_loss, for
# each reduction: the mean over classes of -log p, zero on ignored rows, reduced as the loss is,
# scaled by e / C, added to (1 - e) times the nll loss.
_SMOOTHING_OPS = {
    aten.sum.dim_IntList, aten.neg.default, aten.eq.Scalar, aten.masked_fill.Scalar,
    aten.masked_fill_.Scalar, aten.bitwise_not.default, aten.sum.default, aten.div.Tensor,
    aten.mul.Scalar, aten.add.Tensor,
}  # fmt: skip


def _label_smoothing(tail: list, lsm: torch.fx.Node, nll: torch.fx.Node) -> float:
    """The ``e`` of ``F.cross_entropy(..., label_smoothing=e)`` from the ops after the loss,
    or NoTemplate saying what else is there. The loss is ``(1 - e)·nll + (e / C)·smooth`` (the
    last op); the two factors must agree on ``e`` for the ``C`` classes of the logits."""
    others = sorted({str(n.target) for n in tail if n.target not in _SMOOTHING_OPS})
    if others:
        raise NoTemplate(f"nll_loss with extra ops ({', '.join(others)}) is not covered")
    last = tail[-1]
    sums = [n for n in tail if n.target == aten.sum.dim_IntList]
    scaled = [n for n in tail if n.target == aten.mul.Scalar]
    if (
        last.target != aten.add.Tensor
        or len(sums) != 1
        or sums[0].args[0] is not lsm
        or len(scaled) != 2
        or set(last.args) != set(scaled)
    ):
        raise NoTemplate("nll_loss with extra ops other than label smoothing is not covered")
    on_nll = [n for n in scaled if _reads_loss(n.args[0], nll)]
    if len(on_nll) != 1:
        raise NoTemplate("nll_loss with extra ops other than label smoothing is not covered")
    keep = float(on_nll[0].args[1])
    (other,) = [n for n in scaled if n is not on_nll[0]]
    classes = int(lsm.meta["val"].shape[-1])
    eps = 1.0 - keep
    if not 0.0 < eps <= 1.0 or abs(float(other.args[1]) * classes - eps) > 1e-6:
        raise NoTemplate("nll_loss with extra ops other than label smoothing is not covered")
    return eps


def _reads_loss(node, nll: torch.fx.Node) -> bool:
    """Whether ``node`` is the nll_loss's value (its first output)."""
    return (
        isinstance(node, torch.fx.Node)
        and node.target is operator.getitem
        and node.args[0] is nll
        and node.args[1] == 0
    )


def _broadcasts(shape: tuple, row_shape: tuple) -> bool:
    """Whether ``shape`` broadcasts to ``row_shape`` (aligned on the right, each size 1 or the
    rows' size) without being it."""
    if not shape or len(shape) > len(row_shape) or tuple(shape) == tuple(row_shape):
        return False
    tail = row_shape[len(row_shape) - len(shape) :]
    return all(a == 1 or a == b for a, b in zip(shape, tail, strict=True))


def _read_as(node: IRNode) -> str:
    """How the summary says an input is read: broadcast, through a permutation, or gathered."""
    if node.attrs.get("gather"):
        return f"rows gathered by {node.attrs['gather']}"
    if node.attrs.get("permuted"):
        order = [d for d in node.attrs["vdims"] if d is not None]
        return f"read permuted ({', '.join(map(str, order))})"
    if node.cat == "rowscalar":
        return f"{node.attrs['bshape']} broadcast (one value per row)"
    return f"{node.attrs['bshape']} broadcast"


def _row_shape(float_inputs, out_shapes, calls) -> tuple:
    """The rows' shape: the largest float input's. Among inputs of that size, the one an output
    has, else the one the graph computes in (``(x.transpose(1, 2) * y).sum(-1)``: the product's);
    where none is either but an output is a permutation of it
    (``x.permute(0, 2, 1).contiguous()``), the output's: the kernel writes the output contiguous
    and reads the inputs through their strides."""
    shapes = [tuple(p.meta["val"].shape) for p in float_inputs]
    size = max(math.prod(s) for s in shapes)
    largest = [s for s in shapes if math.prod(s) == size]
    computed = [
        tuple(n.meta["val"].shape)
        for n in calls
        if n.target not in _VIEW_OPS | _PERMUTES and isinstance(n.meta.get("val"), torch.Tensor)
    ]
    for among in (out_shapes, computed):
        for s in largest:
            if s in among:
                return s
    for o in out_shapes:
        if o and sorted(o) == sorted(largest[0]) and o != largest[0]:
            return tuple(o)
    return largest[0]


def _widened(calls, moving) -> set:
    """The values computed from a cat, a pad or a repeat (one of ``moving``): wider than the
    rows because columns moved, not because operands broadcast."""
    out: set = set()
    for n in calls:
        if n.target in moving or any(a in out for a in n.all_input_nodes):
            out.add(n)
    return out


def _flattened_from(shape, row_shape) -> int | None:
    """k when ``shape`` is ``row_shape`` with its dimensions from k on (two or more) flattened
    into one (``x.flatten(1)``, ``x.view(b, -1)``); else None."""
    shape, row_shape = tuple(shape), tuple(row_shape)
    k = len(shape) - 1
    if k < 0 or k > len(row_shape) - 2 or shape[:k] != row_shape[:k]:
        return None
    return k if shape[k] == math.prod(row_shape[k:]) else None


def _order_kept(shape, dims) -> bool:
    """Whether permuting ``shape`` by ``dims`` keeps its dimensions larger than 1 in order."""
    moved = [d % len(shape) for d in dims if shape[d % len(shape)] != 1]
    return moved == sorted(moved)


def _counts_from_zero(idx) -> bool:
    """Whether ``idx`` is ``torch.arange(T)``: 0, 1, ..., T - 1."""
    if not isinstance(idx, torch.fx.Node) or idx.target != aten.arange.default:
        return False
    return len(idx.args) == 1 and not idx.meta["val"].is_floating_point()


def _groups_of(shape: tuple, row_shape: tuple) -> tuple | None:
    """(j, g, shape, fixed) when ``shape`` is ``row_shape[:j] + (g, n)``: the rows' elements in
    groups of ``n`` contiguous ones; else None. ``fixed`` says which of the two stays when the
    sizes change: "count" where ``g`` divides ``row_shape[j]`` (a group norm's
    ``x.reshape(batch, groups, -1)``: so many groups of a channel dimension), "size" where the
    groups are runs of ``n`` dividing the trailing dimensions (group-wise quantisation's
    ``x.view(-1, 128)``: so many elements a group, however many rows). A guess the correctness
    gate checks at the workload's other sizes."""
    shape, row_shape = tuple(shape), tuple(row_shape)
    j = len(shape) - 2
    if j < 0 or j >= len(row_shape) or shape[:j] != row_shape[:j]:
        return None
    g, n = shape[j], shape[j + 1]
    if g < 1 or n < 1 or g * n != math.prod(row_shape[j:]):
        return None
    if row_shape[j] % g == 0:
        return (j, g, shape, "count")
    if math.prod(row_shape[j + 1 :]) % n == 0 or n % math.prod(row_shape[j + 1 :]) == 0:
        return (j, g, shape, "size")
    return None


def _coords_only(nodes: list[IRNode], i: int) -> bool:
    """Whether value ``i`` is computed from element coordinates and constants alone (an
    ``arange`` along the row or the rows, and arithmetic on it): no input is read."""
    n = nodes[i]
    if n.kind == "const":
        return True
    if n.kind != "pw":
        return False
    if n.op in ("col", "col_lt", "mrow", "coord"):
        return True
    return bool(n.args) and all(_coords_only(nodes, a) for a in n.args if isinstance(a, int))


def _cat_of(nodes: list[IRNode], i: int) -> str:
    n = nodes[i]
    if n.kind == "const":
        return "const"
    if n.kind == "input":
        return "rowscalar" if n.attrs.get("per_row") else "tile"
    if n.kind == "reduce":
        return "rowscalar"
    if n.op in ("col_lt", "col"):
        return "tile"
    if n.op == "mrow":  # the row's index within its matrix: one per row
        return "rowscalar"
    cats = {_cat_of(nodes, a) for a in n.args}
    if "tile" in cats:
        return "tile"
    if "rowscalar" in cats:
        return "rowscalar"
    return "const"


def _categorise(plan: Plan) -> None:
    for n in plan.nodes:
        if n.kind == "const":
            n.cat = "const"
        elif n.kind == "input":  # one value per row where constant along rows of the last dim
            per_row = n.attrs.get("per_row") or n.attrs.get("role") == "rowvec"
            n.cat = "rowscalar" if per_row else "tile"
        elif n.kind == "reduce":
            if plan.nodes[n.args[0]].cat != "tile":
                raise NoTemplate("a reduction of a per-row value is not covered")
            n.cat = "rowscalar"
        elif n.kind == "scan":  # varies along the row, as its input does
            n.cat = "tile"
        elif n.op in ("col_lt", "col"):  # a column's index (against a boundary): varies along it
            n.cat = "tile"
        elif n.op in ("mrow", "coord", "axis"):  # a coordinate of the row: one per row
            n.cat = "rowscalar"
        else:
            cats = {plan.nodes[a].cat for a in n.args}
            n.cat = "tile" if "tile" in cats else "rowscalar" if "rowscalar" in cats else "const"


def _batch_view(shape: tuple, lead: tuple, rows: tuple) -> bool:
    """Whether ``shape`` views a batched product's output (``lead`` + ``rows``, contiguous) with
    each element keeping its row and column: the batch dimensions merged or split, or 1s
    inserted or dropped anywhere while the columns (more than one) stay the last dimension
    other than 1s."""
    if shape[-2:] == rows and math.prod(shape[:-2]) == math.prod(lead):
        return True
    return rows[-1] != 1 and _ones_apart(shape, lead + rows)


def _inserted_ones(shape: tuple, full: tuple) -> list[int]:
    """The positions in ``shape`` of the 1s inserted into ``full`` to make it (in increasing
    order, so unsqueezing ``full`` at each in turn gives ``shape``); [] where ``shape`` is not
    ``full`` with 1s inserted."""
    ones, j = [], 0
    for i, d in enumerate(shape):
        if j < len(full) and d == full[j]:
            j += 1
        elif d == 1:
            ones.append(i)
        else:
            return []
    return ones if j == len(full) else []


def _ones_apart(shape: tuple, other: tuple) -> bool:
    """Whether the two shapes differ only by 1s inserted or dropped (the same elements in the
    same order, for a contiguous view)."""
    return [d for d in shape if d != 1] == [d for d in other if d != 1]


def _strip_ones(shape: tuple) -> tuple:
    """``shape`` without its leading 1s (how a weight broadcasts against the rows)."""
    i = 0
    while i < len(shape) and shape[i] == 1:
        i += 1
    return tuple(shape[i:])


def _columns(p: int, q: int, off: int) -> str:
    """``N * p / q + off`` columns, in words for a plan's summary."""
    part = "N" if (p, q) == (1, 1) else f"{p}·N" if q == 1 and p else f"{p}/{q} of N" if p else ""
    if not off:
        return part
    return f"{part} {'+' if off > 0 else '-'} {abs(off)}" if part else str(off)


_LIKE = (aten.zeros_like.default, aten.ones_like.default, aten.full_like.default)
_BAND = ", a band of each matrix (tril/triu, eye, a diagonal) from the elements' coordinates"
# Tensors made in the forward from a size and one value (None: the value is an argument).
_FILLED = {
    aten.new_full.default: None,
    aten.full.default: None,
    aten.ones.default: 1.0,
    aten.zeros.default: 0.0,
}


def refuse_unwritable(calls: list[torch.fx.Node]) -> None:
    """NoTemplate naming the first of ``calls`` that no kernel can be written for (whatever
    graph it is in): a special function, a convolution the conv family does not write, a sort
    or a selection, random numbers."""
    refuse_convolutions(calls)
    for n in calls:
        name = getattr(n.target, "__name__", str(n.target))
        if name.split(".")[0] in _SPECIAL:
            raise NoTemplate(f"the reference uses {name}, a special function no template writes")
        if name.split(".")[0] in _ORDERED:
            raise NoTemplate(
                f"the reference uses {name}: the values' order decides its output (sorting or "
                "selection), not a graph of pointwise ops, reductions and views; no template fits"
            )
        if name.split(".")[0].rstrip("_") in _RANDOM:
            raise NoTemplate(
                f"the reference uses {name}: random numbers (dropout in training mode, a tensor "
                "drawn in the forward), which no kernel reproduces and no gate can check"
            )


def refuse_convolutions(calls: list[torch.fx.Node]) -> None:
    """NoTemplate naming the first convolution among ``calls`` that the conv family does not
    write (:mod:`workers.search.lowering_conv`), if any."""
    for n in calls:
        name = getattr(n.target, "__name__", str(n.target))
        if "conv" in name and n.target not in CONVS:
            raise NoTemplate(f"the reference uses {name} (a convolution); no template fits")


def _over_ones(shape, dims) -> bool:
    """Whether a reduction over ``dims`` of ``shape`` runs over dimensions of size 1 only."""
    dims = [dims] if isinstance(dims, int) else list(dims or [])
    return bool(dims) and all(int(shape[d]) == 1 for d in dims)


def _shape_only(n: torch.fx.Node) -> bool:
    """Whether ``n`` is used only for its shape: by ``zeros_like`` and kin, through views."""
    if not n.users:
        return False
    return all(u.target in _LIKE or (u.target in _VIEW_OPS and _shape_only(u)) for u in n.users)
