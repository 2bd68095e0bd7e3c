"""The expression IR the lowering writes and the template families read: a :class:`Plan` of
:class:`IRNode` values, or :class:`NoTemplate` saying why none fits (no torch needed)."""

from __future__ import annotations

from dataclasses import dataclass, field


class NoTemplate(Exception):
    """No template fits this problem; the message says why in words a user can act on."""


@dataclass
class IRNode:
    """One value of the lowered graph.

    kind: ``input`` (attrs: ref, role), ``const`` (value), ``pw`` (op, args), ``reduce``
    (op in sum/max/min/mean, args=(x,)). ``cat`` is filled by :func:`_categorise`: ``tile``
    (varies along the row), ``rowscalar`` (one value per row: also an input marked ``per_row``)
    or ``const``. An integer input has ``int_dtype``; a number the reference wrote as an integer,
    ``whole`` (see :mod:`workers.search.lowering_per_row`).
    """

    id: int
    kind: str
    op: str = ""
    args: tuple = ()
    value: float | None = None
    attrs: dict = field(default_factory=dict)
    cat: str = "tile"


@dataclass
class Plan:
    """What the template generator needs to write a candidate for one problem."""

    family: str
    forward_args: list[str]
    init_source: str
    preamble: str
    nodes: list[IRNode] = field(default_factory=list)
    outputs: list[int] = field(default_factory=list)
    extra: dict = field(default_factory=dict)
    summary: str = ""
    # Kernels run one after the other (a product, then what follows it): each stage's plan, the
    # last one's output the candidate's (:mod:`workers.search.lowering_staged`).
    stages: list[Plan] = field(default_factory=list)

    def inputs(self, role: str | None = None) -> list[IRNode]:
        return [
            n for n in self.nodes if n.kind == "input" and (role is None or n.attrs["role"] == role)
        ]

    def reductions(self) -> list[IRNode]:
        return [n for n in self.nodes if n.kind == "reduce"]


def wider_than_row(p: int, q: int, off: int) -> bool:
    """Whether an output of ``N·p/q + off`` columns (``plan.extra["narrow_outputs"]``) is wider
    than the row of ``N`` (a pad, a repeat or a cat of more than the row) rather than a slice of
    it: a slice's width is clamped to the row, a wider output's is not."""
    return p > q or (p == q and off > 0)
