"""Cumulative scans along the rows' last dimension, for the lowering (issue 11: "cumulative
sums" had no template).

``torch.cumsum`` / ``cumprod`` / ``cummax`` / ``cummin`` (their values) / ``logcumsumexp``
over the last dimension become a ``scan`` node (``op`` the scan) between pointwise ops: the
``scan`` family's kernel walks each row in blocks, scans each block and carries the row's
running total into the next. A reversed scan is the
idiom ``x.flip(d).cumsum(d).flip(d)``: a flip is kept symbolic (:class:`Flipped`) until a scan
reads it, and the flip of that scan's result undoes it. A boolean mask input (``cumsum(x *
mask)``) is read as 0/1.

A scan along another dimension reads its rows K apart (K the product of the dimensions after
it). Not covered, refused in words: two scans in one reference, a scan beside reductions,
inputs that broadcast, and a flip beside a scan other than around it (a flip elsewhere reads
its inputs mirrored: ``lowering_slices``).
"""

from __future__ import annotations

import torch

from workers.search.ir import NoTemplate
from workers.search.lowering_slices import Flipped, Narrow, ScanPrefix

aten = torch.ops.aten


class ScanMixin:
    """The lowerer's handling of scans and flips (``self`` is a ``_Lowerer``)."""

    SCAN_OPS = {
        aten.cumsum.default: "cumsum",
        aten.cumprod.default: "cumprod",
        aten.cummax.default: "cummax",
        aten.cummin.default: "cummin",
        aten.logcumsumexp.default: "logcumsumexp",
    }
    # Scans that give (values, indices): the indices are a part no template computes.
    WITH_INDICES = ("cummax", "cummin")

    def _scan_last(self, node: torch.fx.Node, dims) -> None:
        """Check the scan (or flip) runs along one dimension of a whole row, the same for every
        scan and flip of the graph: the last, or another of an unreshaped tensor (its elements
        K apart, K the product of the dimensions after it)."""
        ndim = len(node.args[0].meta["val"].shape)
        dims = [dims] if isinstance(dims, int) else list(dims)
        if ndim == 0 or len(dims) != 1:
            raise NoTemplate(f"{node.target} along dimensions {dims} (scans run along one)")
        if tuple(node.args[0].meta["val"].shape) != tuple(self.row_shape):
            raise NoTemplate(f"{node.target} of a value that is not a whole row")
        dim = dims[0] % ndim
        if dim != ndim - 1 and self.reshaped:
            raise NoTemplate(f"{node.target} along a middle dimension of a reshaped tensor")
        if getattr(self, "scan_dim", None) not in (None, dim):
            raise NoTemplate(f"{node.target} along dimension {dim} and along {self.scan_dim}")
        self.scan_dim = dim

    def _lower_flip(self, n: torch.fx.Node) -> None:
        shape = tuple(n.args[0].meta["val"].shape)
        dims = [n.args[1]] if isinstance(n.args[1], int) else list(n.args[1])
        if (
            shape != tuple(self.row_shape)
            and len(dims) == 1
            and shape
            and dims[0] % len(shape) == len(shape) - 1
            and shape[-1] == self.row_shape[-1]
        ):
            # a value that broadcasts along the rows (a table per column), flipped along the
            # row: read from the far end now
            self.env[n] = self._mirrored(self.arg(n.args[0]))
            return
        self._scan_last(n, n.args[1])
        value = self.env.get(n.args[0])
        # The flip of a flipped value is the value; of anything else, a flipped value.
        self.env[n] = value.id if isinstance(value, Flipped) else Flipped(self.arg(n.args[0]))

    def _lower_scan(self, n: torch.fx.Node) -> None:
        value = self.env.get(n.args[0])
        if isinstance(value, Narrow):  # a scan of the row's first columns (an exclusive cumsum)
            self._last(n, n.args[1])
            whole = value.src is not None and value.src.frac == 1 and value.start == 0
            if not whole or self.SCAN_OPS[n.target] != "cumsum":
                raise NoTemplate(f"{n.target} of a slice of the row other than its first columns")
            if any(node.kind == "scan" for node in self.nodes):
                raise NoTemplate("two cumulative scans in one reference")
            self.scan_dim = len(self.row_shape) - 1
            self.env[n] = ScanPrefix(value.src.build(0), value.frac)
            return
        self._scan_last(n, n.args[1])
        val = n.meta["val"]
        if not (val[0] if isinstance(val, tuple) else val).is_floating_point():
            raise NoTemplate(f"{n.target} of integers (its result is not floating point)")
        if any(node.kind == "scan" for node in self.nodes):
            raise NoTemplate("two cumulative scans in one reference")
        value = self.env.get(n.args[0])
        reverse = isinstance(value, Flipped)
        x = value.id if reverse else self.arg(n.args[0])
        op = self.SCAN_OPS[n.target]
        scan = self.new("scan", op=op, args=(x,), attrs={"reverse": reverse})
        value = Flipped(scan) if reverse else scan
        if op in self.WITH_INDICES:  # (values, indices): the indices are refused if read
            value = (value, f"the indices of {op} (only its values are covered)")
        self.env[n] = value

    def _scan_plan(self, plan, outs, shapes):
        """The ``scan`` family's plan: pointwise ops around one scan, every output a whole row."""
        if plan.reductions():
            raise NoTemplate("a cumulative scan beside reductions is not covered")
        exclusive = any(n.kind == "scan" and n.attrs.get("exclusive") for n in plan.nodes)
        if self.vec_pos or any(
            n.kind == "input"
            and (
                n.attrs.get("role") in ("bcast", "vec")
                or (n.attrs.get("shift") and not exclusive)
                or n.attrs.get("mirror")
            )
            for n in plan.nodes
        ):
            raise NoTemplate(
                "a cumulative scan with weights, broadcast inputs or slices is not covered"
            )
        for o, shape in zip(outs, shapes, strict=True):
            if tuple(shape) != tuple(self.row_shape) or not o.meta["val"].is_floating_point():
                raise NoTemplate(f"a scan's output of shape {list(shape)} is not a whole row")
        if any(isinstance(self.env.get(o), Flipped) for o in outs):
            raise NoTemplate("a flip ... of a scan's input without its flip back")
        (scan,) = [n for n in plan.nodes if n.kind == "scan"]
        plan.family = "scan"
        way = ", from the end of the row" if scan.attrs["reverse"] else ""
        ndim = len(self.row_shape)
        along = "the last dimension"
        if self.scan_dim != ndim - 1:
            if self.reshaped:
                raise NoTemplate("a scan along a middle dimension of a reshaped tensor")
            plan.extra["scan_dim"] = self.scan_dim - ndim
            along = f"dimension {self.scan_dim} of {ndim}"
        kind = "exclusive " if scan.attrs.get("exclusive") else ""
        plan.summary = f"{kind}{scan.op} along {along}{way}"
        if self.masks:
            plan.summary += f", {', '.join(self.masks)} a boolean mask"
        return plan
