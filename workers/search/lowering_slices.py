"""Slices and concatenations along the rows' last dimension, for the lowering.

``x.chunk(2, -1)``, ``x.split(...)``, ``x[..., a:b]`` and ``torch.cat(..., -1)`` move columns
rather than compute: rotary embeddings' ``rotate_half`` is ``cat(-x2, x1)`` of the two halves.
A slice is kept symbolic (:class:`Narrow`): its length and a way to build, for any column
shift, the expression whose element at column ``c`` is the slice's element at ``c + shift``.
Pointwise ops on slices of one length give slices; a ``cat`` whose pieces fill the row gives a
full row again, ``where(column < boundary, piece, ...)`` with each piece's inputs read at
shifted columns (``input`` nodes with ``attrs["shift"]``). Boundaries and shifts are fractions
of the row length ``N`` (a traced ``chunk(2)`` of a 16-wide row splits at 8, which is ``N/2``
at every width), written into the kernel as ``N * p // q``.

A flip along the last dimension read as a row (not by a scan) reads its inputs from the row's
far end (``attrs["mirror"]``: column ``N - 1 - (c + shift)``), so a flip, a slice of a flip or
a flip between pointwise ops gets the same elementwise kernel.

A constant pad of the last dimension (``F.pad(x, (2, 3), value=v)``) is a cat of ``v``
columns, the row and ``v`` columns again (a negative pad, a slice); a repeat along the row
(``x.repeat(1, 3)``, ``x.tile(3)``) is a cat of the row with itself. The output is then wider
than the row: the kernel runs over its columns and reads each input where the cat puts it,
nothing outside the input's row.

Not covered, refused in words: slices along other dimensions or with a step, a slice in a
reduction, a flip of a slice or of columns a cat joined, a slice combined with a full row,
pads of other dimensions or by reflection or replication, and repeats along other dimensions.
An output narrower than the row (a GLU's half, ``F.glu`` itself) is computed over its first
columns, one wider over all of its own (``plan.extra["narrow_outputs"]``).

``torch.arange(N)`` along the row is each column's own index (a ``col`` node): ``F.one_hot(t,
C)`` is ``t[..., None] == arange(C)``, so a one-hot row (and what pointwise ops make of it, a
smoothed target) is an elementwise kernel whose rows are the output's, each target read once
per row.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

import torch

from workers.search.ir import NoTemplate

aten = torch.ops.aten
_BIG = 1 << 62  # ``x[..., a:]`` traces its end as 2**63 - 1


@dataclass(frozen=True)
class Narrow:
    """A slice of the last dimension, ``frac`` of the row long: ``build(f)`` is the node whose
    element at column ``c`` is the slice's element at column ``c + f·N``."""

    frac: Fraction
    build: Callable[[Fraction], int]
    # A piece of another slice (or of a whole row): where it starts in it, and which.
    start: Fraction | None = None
    src: Narrow | None = None


@dataclass(frozen=True)
class Flipped:
    """A value reversed along the last dimension: node ``id`` read from the row's far end
    (kept symbolic so that a scan of it runs from the row's end; read as a row, its inputs are
    read mirrored, ``SlicesMixin._mirrored``)."""

    id: int


@dataclass(frozen=True)
class ScanPrefix:
    """The cumulative sum of a row's first ``frac`` (all but its last column): read only as
    the exclusive scan it makes once a zero column is put before it (KernelBench 92)."""

    x: int
    frac: Fraction


def _varies_along_row(node, how: str) -> bool:
    """Whether input ``node`` differs from column to column (a row, or an input broadcast along
    the rows that varies along them), so that reading it ``how`` moves its columns; a number
    or an input constant along the row reads the same. Others are refused in words."""
    role = node.attrs["role"]
    if role == "vec":
        raise NoTemplate(f"a weight vector read {how} is not covered")
    if role in ("scalar", "cell") or (role == "bcast" and int(node.attrs["bshape"][-1]) == 1):
        return False
    if role != "tile" and role != "bcast":
        raise NoTemplate(f"a {role} input read {how} is not covered")
    return True


class SlicesMixin:
    """The lowerer's handling of slices (``self`` is a ``_Lowerer``)."""

    SLICE_OPS = {
        aten.split.Tensor,
        aten.split_with_sizes.default,
        aten.slice.Tensor,
        aten.narrow.default,
        aten.cat.default,
        aten.glu.default,
        aten.constant_pad_nd.default,
        aten.repeat.default,
    }
    # Pads that read the row at other columns than a cat can say (refused in words).
    OTHER_PADS = {
        aten.reflection_pad1d.default: "reflect",
        aten.reflection_pad2d.default: "reflect",
        aten.reflection_pad3d.default: "reflect",
        aten.replication_pad1d.default: "replicate",
        aten.replication_pad2d.default: "replicate",
        aten.replication_pad3d.default: "replicate",
    }

    def _width(self) -> int:
        return int(self.row_shape[-1])

    def _last(self, node: torch.fx.Node, dim) -> None:
        # A cat's output has its inputs' rank; a split's is a list, so read its input's.
        shaped = node if node.target == aten.cat.default else node.args[0]
        ndim = len(shaped.meta["val"].shape)
        if dim % ndim != ndim - 1:
            raise NoTemplate(f"{node.target} along dimension {dim} (templates slice the last)")

    def _as_narrow(self, a) -> Narrow:
        """A full row (a tile of the rows' width) or a slice, as a slice."""
        value = self.env.get(a) if isinstance(a, torch.fx.Node) else None
        if isinstance(value, Narrow):
            return value
        if isinstance(value, Flipped):  # a slice (or a cat) of a flip: the flip read as a row
            value = self.arg(a)
        if not isinstance(value, int) or a.meta["val"].shape[-1] != self._width():
            raise NoTemplate("a slice of a value that is not a row of the rows' width")
        return Narrow(Fraction(1), lambda f, v=value: self._shifted(v, f))

    def _shifted(self, i: int, f: Fraction) -> int:
        """Node ``i`` read ``f·N`` columns to the right (a copy of its expression whose row
        inputs are loaded at shifted columns)."""
        if f == 0:
            return i
        node = self.nodes[i]
        if node.kind == "const":
            return i
        if node.kind == "reduce":
            raise NoTemplate("a slice of a row-reduced value is not covered")
        if node.kind == "input":
            if not _varies_along_row(node, "at shifted columns"):
                return i
            total = Fraction(*node.attrs.get("shift", (0, 1))) + f
            attrs = {**node.attrs, "shift": [total.numerator, total.denominator]}
            return self.new("input", attrs=attrs)
        if node.op == "col_lt":
            bound = Fraction(*node.attrs["frac"]) - f
            return self.new("pw", op="col_lt", attrs={"frac": [bound.numerator, bound.denominator]})
        args = tuple(self._shifted(a, f) for a in node.args)
        return self.new("pw", op=node.op, args=args, attrs=dict(node.attrs))

    def _mirrored(self, i: int) -> int:
        """Node ``i`` read from the row's far end (a flip along the last dimension, outside a
        scan): a copy of its expression whose row inputs are loaded at column ``N - 1 - c``
        (``attrs["mirror"]``; a shift already there is negated, so a slice of a flip and a
        flip of a flip compose)."""
        node = self.nodes[i]
        if node.kind == "const":
            return i
        if node.kind == "reduce":
            return i  # one value a row: the same read from either end
        if node.kind == "scan":
            raise NoTemplate("a flip of a cumulative scan's result other than its flip back")
        if node.kind == "input":
            if not _varies_along_row(node, "from the row's far end"):
                return i
            attrs = {**node.attrs, "mirror": not node.attrs.get("mirror")}
            shift = -Fraction(*node.attrs.get("shift", (0, 1)))
            attrs.pop("shift", None)
            if shift:
                attrs["shift"] = [shift.numerator, shift.denominator]
            return self.new("input", attrs=attrs)
        if node.op == "col_lt":
            raise NoTemplate("a flip of columns joined by a cat is not covered")
        args = tuple(self._mirrored(a) for a in node.args)
        return self.new("pw", op=node.op, args=args, attrs=dict(node.attrs))

    def _col_lt(self, bound: Fraction) -> int:
        return self.new("pw", op="col_lt", attrs={"frac": [bound.numerator, bound.denominator]})

    def _lower_slice(self, n: torch.fx.Node) -> None:
        t, a = n.target, n.args
        width = self._width()
        if t in (aten.split.Tensor, aten.split_with_sizes.default):
            dim = a[2] if len(a) > 2 else n.kwargs.get("dim", 0)
            self._last(n, dim)
            src = self._as_narrow(a[0])
            lengths = [int(v.shape[-1]) for v in n.meta["val"]]
            pieces, start = [], 0
            for length in lengths:
                pieces.append(self._piece(src, Fraction(start, width), Fraction(length, width)))
                start += length
            self.env[n] = tuple(pieces)
            return
        if t == aten.glu.default:  # first half gated by the sigmoid of the second
            self._last(n, a[1] if len(a) > 1 else n.kwargs.get("dim", -1))
            src = self._as_narrow(a[0])
            half = src.frac / 2
            value, gate = self._piece(src, Fraction(0), half), self._piece(src, half, half)
            self.env[n] = Narrow(
                half,
                lambda f: self.pw("mul", value.build(f), self.pw("sigmoid", gate.build(f))),
            )
            return
        if t in (aten.slice.Tensor, aten.narrow.default):
            dim = a[1] if len(a) > 1 else 0
            self._last(n, dim)
            src = self._as_narrow(a[0])
            size = int(a[0].meta["val"].shape[-1])
            if t == aten.narrow.default:
                start, stop, step = int(a[2]), int(a[2]) + int(a[3]), 1
            else:
                start = a[2] if len(a) > 2 and a[2] is not None else 0
                stop = a[3] if len(a) > 3 and a[3] is not None else _BIG
                step = a[4] if len(a) > 4 else 1
            if step != 1:
                raise NoTemplate("a slice with a step is not covered")
            start = max(0, min(size, start + size if start < 0 else start))
            stop = max(0, min(size, stop + size if stop < 0 else stop))
            if (start, stop) == (0, size):
                self.env[n] = self.env[a[0]]
                return
            self.env[n] = self._piece(
                src, Fraction(start, width), Fraction(max(0, stop - start), width)
            )
            return
        if t == aten.constant_pad_nd.default:
            self.env[n] = self._pad(n)
            return
        if t == aten.repeat.default:
            self.env[n] = self._repeat(n)
            return
        # cat along the last dimension
        dim = a[1] if len(a) > 1 else n.kwargs.get("dim", 0)
        self._last(n, dim)
        values = [self.env.get(x) if isinstance(x, torch.fx.Node) else None for x in a[0]]
        if any(isinstance(v, ScanPrefix) for v in values):
            self.env[n] = self._exclusive_scan(a[0], values)
            return
        self.env[n] = self._concat([self._as_narrow(x) for x in a[0]])

    def _pad(self, n: torch.fx.Node):
        """``F.pad(x, (left, right), value=v)``: ``left`` columns of ``v``, the row, ``right``
        columns of ``v`` (a negative pad drops columns from that end: a slice)."""
        pad = [int(v) for v in n.args[1]]
        value = n.args[2] if len(n.args) > 2 else n.kwargs.get("value", 0.0)
        if any(pad[2:]):
            raise NoTemplate(
                f"a pad of other than the last dimension (F.pad with {pad}); templates pad the "
                "last dimension"
            )
        left, right = (pad + [0, 0])[:2]
        width, size = self._width(), int(n.args[0].meta["val"].shape[-1])
        src = self._as_narrow(n.args[0])
        lo = max(0, -left)
        hi = max(lo, size - max(0, -right))
        if (lo, hi) != (0, size):
            src = self._piece(src, Fraction(lo, width), Fraction(hi - lo, width))
        fill = self.const(0.0 if value is None else value)
        ends = [Narrow(Fraction(max(0, k), width), lambda f, c=fill: c) for k in (left, right)]
        return self._concat([p for p in (ends[0], src, ends[1]) if p.frac or p is src])

    def _repeat(self, n: torch.fx.Node):
        """``x.repeat(1, k)`` (``x.tile(k)``): the row ``k`` times side by side."""
        reps = [int(v) for v in n.args[1]]
        ndim = len(n.args[0].meta["val"].shape)
        if len(reps) != ndim or any(r != 1 for r in reps[:-1]) or reps[-1] < 1:
            raise NoTemplate(
                f"a repeat by {reps} of a {ndim}-d tensor; templates repeat only the last "
                "dimension, at least once (x.repeat(1, k))"
            )
        return self._concat([self._as_narrow(n.args[0])] * reps[-1])

    def _column_index(self, n: torch.fx.Node) -> int:
        """``torch.arange(N)`` as long as the rows (``F.one_hot`` compares each target with
        one): each column's own index, compared exactly with an integer; one as long as the
        rows' second-last dimension, each element's row within its matrix."""
        length, width = int(n.args[0]), self._width()
        rows = tuple(self.row_shape or ())
        if length != width and len(rows) >= 2 and length == rows[-2]:
            # As long as the rows' second-last dimension (a KV cache's queries, fewer than its
            # keys): each element's row within its matrix, once viewed as ``[:, None]``
            return self.coordinate("mrow")
        if length != width and length in rows[:-2]:
            # As long as a leading dimension of the rows (the classes of [N, C, H, W] logits):
            # placed by its view (``coord``), read where the rows run along that dimension.
            axis = self.coordinate("axis")
            self.nodes[axis].attrs["length"] = length
            return axis
        if length != width:
            raise NoTemplate(
                f"an arange of {length} values against rows of {width} columns; templates read "
                "an arange only as the rows' column index"
            )
        return self.coordinate("col")

    def _exclusive_scan(self, nodes: list, values: list) -> int:
        """``cat([zeros(..., 1), cumsum(x[..., :-1])], -1)``: the exclusive cumulative sum of
        ``x`` (each column the sum of those before it): one scan of ``x`` read one column back
        (zero before the row). Not the inclusive sum less the column: that is inf - inf where
        a column is infinite."""
        zero = nodes[0] if len(nodes) == 2 else None
        if (
            zero is None
            or zero.target != aten.zeros_like.default
            or not isinstance(values[1], ScanPrefix)
        ):
            raise NoTemplate("a cumsum of a slice of the row other than an exclusive cumsum")
        prefix = values[1]
        if prefix.frac + Fraction(1, self._width()) != 1:
            raise NoTemplate("a cumsum of a slice of the row other than all but its last column")
        # The prefix's length is checked at other widths to be N - 1 (trace._slice_offsets).
        self.scan_prefix = prefix.frac
        back = self._shifted(prefix.x, Fraction(-1, self._width()))
        return self.new(
            "scan", op="cumsum", args=(back,), attrs={"reverse": False, "exclusive": True}
        )

    def _concat(self, parts: list[Narrow]):
        """Slices side by side: a full row (a node) when they fill it, else a wider slice."""
        starts, total = [], Fraction(0)
        for p in parts:
            starts.append(total)
            total += p.frac

        def build(f: Fraction) -> int:
            # Column c is part i's element c + f - start_i where start_i <= c + f < end_i.
            out = parts[-1].build(f - starts[-1])
            for p, s in zip(reversed(parts[:-1]), reversed(starts[:-1]), strict=True):
                out = self.pw("where", self._col_lt(s + p.frac - f), p.build(f - s), out)
            return out

        return build(Fraction(0)) if total == 1 else Narrow(total, build)

    @staticmethod
    def _piece(src: Narrow, start: Fraction, length: Fraction) -> Narrow:
        return Narrow(length, lambda f: src.build(start + f), start, src)

    def _narrow_pointwise(self, op: str, n: torch.fx.Node, lower) -> Narrow:
        """A pointwise op with slices among its operands: a slice of the same length, built per
        shift by ``lower`` (the lowerer's pointwise lowering) with each slice's shifted node."""
        narrows = {
            x: self.env[x]
            for x in n.args
            if isinstance(x, torch.fx.Node) and isinstance(self.env.get(x), Narrow)
        }
        if len({v.frac for v in narrows.values()}) != 1:
            raise NoTemplate("slices of different lengths combined")
        for x in n.args:
            if isinstance(x, torch.fx.Node) and x not in narrows:
                shape = tuple(x.meta["val"].shape)
                if shape and shape[-1] != 1:
                    raise NoTemplate("a slice of the row combined with a full row")
        (frac,) = {v.frac for v in narrows.values()}

        def build(f: Fraction) -> int:
            saved = dict(narrows)
            for x, v in narrows.items():
                self.env[x] = v.build(f)
            try:
                return lower(op, n)
            finally:
                self.env.update(saved)

        return Narrow(frac, build)

    def _narrow_view(self, n: torch.fx.Node) -> bool:
        """A view of a slice that keeps the last dimension: the same slice (True if handled)."""
        src = n.args[0]
        value = self.env.get(src) if isinstance(src, torch.fx.Node) else None
        if not isinstance(value, Narrow):
            return False
        if n.meta["val"].shape[-1] != src.meta["val"].shape[-1]:
            raise NoTemplate(f"{n.target} reshapes a slice of the row")
        self.env[n] = value
        return True
