"""Inputs with one value per row, for the lowering (issue 11, generality: a target per row
that met a row reduction's value was refused).

A 1-d input is bound as a weight along the row (``x * w``), but torch broadcasts it against
what it meets, and against a value per row of a reduction over the last dimension
(``(a * a).sum(-1) * t``, a cosine embedding loss's ``where(y == 1, 1 - cos, ...)``) it is one
value per row. So where it lies is settled where it meets another value, not where it is
bound:

- pointwise ops on 1-d inputs alone (``y == 1``) are kept symbolic (:class:`Vector`) and
  built where they are used: along the row where they meet a row's elements, one value per row
  where they meet a value per row (each, where a square input's vector meets both);
- at such a meeting, an input of the per-row shape (a ``[batch, heads]`` table against rows of
  ``[batch, heads, n]``) is read one value per row as well;
- an input placed along a leading dimension (``t[:, None]``, a ``[rows, 1]`` input) is constant
  along the row: with reductions over the last dimension it is a value per row too (``cat``
  ``rowscalar``), which the row kernels load once per row, in their per-row stage.

An integer input (int64 targets) is read only this way: loaded as it is, and compared as torch
compares it (exactly, against a whole number the reference wrote as one).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from workers.search.ir import NoTemplate


def _non_ones(shape: tuple) -> tuple:
    return tuple(s for s in shape if int(s) != 1)


@dataclass(frozen=True)
class Vector:
    """A value computed, by pointwise ops, from 1-d inputs and numbers alone: ``build(per_row)``
    writes it along the row (as a weight is read) or one value per row."""

    build: Callable[[bool], int]


class PerRowMixin:
    """The lowerer's handling of inputs with one value per row (``self`` is a ``_Lowerer``)."""

    def _per_row_ready(self) -> bool:
        """Whether the reductions so far run over the rows' last dimension alone, so that a value
        per row has the rows' shape without the last dimension."""
        return self.red_dim in (None, len(self.row_shape) - 1) and not (
            self.full
            or self.flat_view
            or self.merge_from is not None
            or self.red_set is not None
            or self.matmul_epilogue
        )

    def _kept_rows(self) -> tuple | None:
        """Where the rows run along other dimensions than the last (a batch norm's statistics
        over (0, 2, 3), a reduction over dim 0 of ``[batch, features]``), the shape of one value
        per row: the kept dimensions' sizes (their flat index is the kernels' row number); else
        None."""
        if self.reshaped or self.flat_view or self.full or self.matmul_epilogue:
            return None
        if self.merge_from is not None or self.chunk is not None:
            return None
        rows = tuple(self.row_shape)
        if self.red_set is not None:
            return tuple(s for d, s in enumerate(rows) if d not in self.red_set)
        if self.red_dim is not None and self.red_dim != len(rows) - 1:
            return rows[: self.red_dim] + rows[self.red_dim + self.red_span :]
        return None

    def _row_vector(self, held: int) -> int:
        """Weight input ``held`` read one value per row of kept-dimension rows: its element at
        the row's number (a running mean of one value per channel, a feature's scale where the
        rows are the features), a ``rowvec`` input."""
        if held not in self.row_vectors:
            attrs = {k: v for k, v in self.nodes[held].attrs.items() if k != "length"}
            attrs["role"] = "rowvec"
            self.row_vectors[held] = self.new("input", attrs=attrs)
        return self.row_vectors[held]

    def _weights_per_row(self) -> None:
        """In kept-dimension rows of one dimension, each weight placed along it is one value per
        row: read so (once per row), not refused as a weight varying along the row would be."""
        kept = self._kept_rows()
        if kept is None or sum(int(s) != 1 for s in kept) > 1:
            return
        reduced = set(self.red_set or range(self.red_dim, self.red_dim + self.red_span))
        for node_id, pos in list(self.vec_pos.items()):
            node = self.nodes[node_id]
            if pos in reduced or node.attrs.get("length") != math.prod(kept):
                continue
            del self.vec_pos[node_id]
            node.attrs.pop("length")
            node.attrs.pop("per_row", None)
            node.attrs["role"] = "rowvec"

    def _mark_per_row(self, node_id: int) -> int:
        """Mark input ``node_id`` a value per row where it is constant along the rows' last
        dimension (placed along a leading one); ``_settle_per_row`` unmarks it where the rows
        turn out otherwise."""
        node, ndim = self.nodes[node_id], len(self.row_shape)
        pos = self.vec_pos.get(node_id)
        bshape = node.attrs.get("bshape")
        along_lead = pos is not None and pos < ndim - 1
        constant = bshape is not None and int(bshape[-1]) == 1 and not node.attrs.get("gather")
        if ndim > 1 and self.merge_from is None and not self.matmul_epilogue:
            if along_lead or constant:
                node.attrs["per_row"] = True
        return node_id

    def _is_vector(self, x) -> bool:
        """Whether fx value ``x`` is a 1-d input bound as a weight, or a :class:`Vector`."""
        held = self.env.get(x) if isinstance(x, torch.fx.Node) else None
        if isinstance(held, Vector):
            return True
        last = len(self.row_shape) - 1
        return isinstance(held, int) and self.vec_pos.get(held) == last and x.meta["val"].dim() == 1

    def _vector_value(self, n: torch.fx.Node, lower: Callable) -> bool:
        """Keep pointwise op ``n`` symbolic where it computes from 1-d inputs alone (True if
        so): ``lower(n)`` writes it once its operands are built."""
        operands = [x for x in n.args if isinstance(x, torch.fx.Node)]
        val = n.meta.get("val")
        if not operands or not isinstance(val, torch.Tensor) or val.dim() != 1:
            return False
        if not all(self._is_vector(x) for x in operands):
            return False

        def build(per_row: bool, n=n) -> int:
            key = (n, per_row)
            if key not in self.vectors:
                held = self.env[n]
                with self._swapped({x: self._vector_as(x, per_row) for x in operands}):
                    lower(n)
                self.vectors[key], self.env[n] = self.env[n], held
            return self.vectors[key]

        self.env[n] = Vector(build)
        return True

    def _vector_as(self, x, per_row: bool) -> int:
        """Fx value ``x`` (see ``_is_vector``) built along the row or one value per row."""
        held = self.env[x]
        if isinstance(held, Vector):
            return held.build(per_row)
        if not per_row:
            return held
        if self._kept_rows() is not None:
            return self._row_vector(held)
        if held not in self.per_row_inputs:  # the weight's input again, along a leading dim
            placed = self.new("input", attrs=dict(self.nodes[held].attrs))
            self.vec_pos[placed] = len(self.row_shape) - 2
            self.per_row_inputs[held] = self._mark_per_row(placed)
        return self.per_row_inputs[held]

    def _per_row_operands(self, n: torch.fx.Node) -> dict:
        """{operand: node} for the operands of pointwise op ``n`` that are one value per row
        here although bound otherwise: where ``n`` computes a value per row (its shape is the
        rows' without the last dimension, and an operand is a value per row already), torch
        aligns the others with that shape, not with the rows'."""
        val, rows = n.meta.get("val"), tuple(self.row_shape)
        kept = self._kept_rows()
        if kept is not None:  # rows of kept dimensions: a value of their shape is per row
            shape = isinstance(val, torch.Tensor) and tuple(val.shape)
            if not shape or _non_ones(shape) != _non_ones(kept):
                return {}
        else:
            per_row_shape = isinstance(val, torch.Tensor) and tuple(val.shape) == rows[:-1]
            if len(rows) < 2 or not per_row_shape or not self._per_row_ready():
                return {}
        held = {x: self.env.get(x) for x in n.args if isinstance(x, torch.fx.Node)}
        if not any(isinstance(v, int) and self._cat(v) == "rowscalar" for v in held.values()):
            return {}
        placed = {}
        for x, v in held.items():
            if kept is not None:
                if self._is_vector(x) and x.meta["val"].numel() == math.prod(kept):
                    placed[x] = self._vector_as(x, per_row=True)
                continue
            if self._is_vector(x):
                placed[x] = self._vector_as(x, per_row=True)
            elif isinstance(v, int) and (table := self._table_per_row(v, x)) is not None:
                placed[x] = table
        return placed

    def _table_per_row(self, held: int, x: torch.fx.Node) -> int | None:
        """Input node ``held`` (fx value ``x``, of the per-row shape or broadcasting to it)
        read one value per row: its dimensions aligned with the rows' leading ones; None for
        a value that is not such an input."""
        node = self.nodes[held]
        if node.kind != "input" or node.attrs.get("vshape") is None or node.attrs.get("gather"):
            return None
        if held in self.per_row_inputs:
            return self.per_row_inputs[held]
        shape = tuple(x.meta["val"].shape)
        lead = len(self.row_shape) - 1 - len(shape)
        vdims = node.attrs["vdims"][len(node.attrs["vdims"]) - len(shape) :] if shape else []
        new = (1,) * lead + shape + (1,)
        attrs = {**node.attrs, "vshape": list(new), "vdims": [None] * lead + vdims + [None]}
        self.per_row_inputs[held] = self._view_input({**attrs, "viewed": True}, new)
        return self.per_row_inputs[held]

    def _vector_output(self, o: torch.fx.Node) -> int:
        """An output computed from 1-d inputs alone (an epilogue of a target per row): one
        value per row where it has the per-row shape, else along the row (refused below)."""
        rows = tuple(self.row_shape)
        kept = self._kept_rows()
        if kept is not None:
            shape = tuple(o.meta["val"].shape)
            return self._vector_as(o, shape == kept or _non_ones(shape) == _non_ones(kept))
        per_row = len(rows) > 1 and tuple(o.meta["val"].shape) == rows[:-1]
        return self._vector_as(o, per_row and self._per_row_ready())

    def _settle_per_row(self) -> None:
        """Unmark the inputs marked a value per row unless the rows are rows of the last
        dimension of an unreshaped tensor with reductions over it (an elementwise graph reads
        them as any input that broadcasts); one that is a value per row only as torch
        broadcasts it against one is refused there."""
        keep = (
            any(n.kind == "reduce" for n in self.nodes)
            and self._per_row_ready()
            and self.chunk is None
            and not (self.reshaped or self.outer)
        )
        if keep:
            return
        met = set(self.per_row_inputs.values())
        for node in self.nodes:
            if node.attrs.pop("per_row", False) and node.id in met:
                raise NoTemplate(
                    f"input {node.attrs['ref']} is one value per row here (torch broadcasts it "
                    "against a value per row), which the row kernels read only beside reductions "
                    "over the last dimension of an unreshaped tensor"
                )

    @contextlib.contextmanager
    def _swapped(self, values: dict):
        """Fx values read as the nodes ``values`` gives them for the duration."""
        saved = {x: self.env[x] for x in values}
        self.env.update(values)
        try:
            yield
        finally:
            self.env.update(saved)
