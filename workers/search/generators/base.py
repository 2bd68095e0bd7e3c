"""The one interface every generator implements, and the plain data it exchanges.

A generator gets a :class:`GenerationContext` (the problem, the parent nodes, the failing gate's
evidence when the parent was rejected, retrieved knowledge entries) and returns
:class:`Proposal` objects: a candidate source, the edge type that produced it and the parameters
that describe it (so a later round can mutate them). Generators never evaluate anything.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from workers import constants as C

EDGE_SEED = "seed"
EDGE_MUTATION = "mutation"
EDGE_REPAIR = "repair"
EDGE_CROSSOVER = "crossover"
EDGE_ALTERNATIVE = "alternative"
EDGE_TYPES = (EDGE_SEED, EDGE_MUTATION, EDGE_REPAIR, EDGE_CROSSOVER, EDGE_ALTERNATIVE)


@dataclass
class GenerationContext:
    """Everything a generator may use to propose children (plain data only)."""

    problem_source: str
    workload: dict | None = None
    platform: str = "interpret"
    # Parent nodes as dicts (see graph.Node.to_dict): source, params, generator, status, ...
    parents: list[dict] = field(default_factory=list)
    # What the generator is asked for: seed | mutation | alternative | crossover | repair.
    mode: str = EDGE_SEED
    # For repair: the failed gate of the (single) parent, {gate, reason, evidence}.
    feedback: dict | None = None
    knowledge: list[dict] = field(default_factory=list)
    seed: int = 0
    # How many times this mode was asked for this campaign (1 = first); lets a generator
    # move past proposals it already made.
    attempt: int = 1
    # The per-case tuner's answer on the GPU host ({ok, table, cases} or {ok: False, error}),
    # None where the campaign did not tune (workers.search.tuning).
    tuned: dict | None = None


@dataclass
class Proposal:
    """One candidate a generator proposes."""

    source: str
    edge: str
    params: dict = field(default_factory=dict)
    note: str = ""


class Generator(Protocol):
    """A pluggable source of candidates."""

    name: str

    def propose(self, ctx: GenerationContext, n: int) -> list[Proposal]: ...

    def describe(self, problem_source: str, train: bool = False) -> dict:
        """{fits: bool, summary: str} for this problem (e.g. the template's operator family)."""
        ...

    def stats(self) -> dict:
        """Counters to persist in the campaign state (requests, errors, ...)."""
        ...


# Three TF32 tensor-core products (hi*hi + hi*lo + lo*hi, Triton's ``tf32x3``) are off by about
# 2^-21 of each product's size, IEEE fp32 by 2^-24: a float32 tolerance tighter than this keeps
# products in IEEE fp32 (the correctness gate is the judge either way).
SPLIT_TF32_TOLERANCE = 1e-5


def split_tf32_allowed(workload: dict | None) -> bool:
    """Whether a campaign's float32 tolerance leaves room for ``tf32x3`` products: not
    ``"exact"``, and an rtol or atol of at least :data:`SPLIT_TF32_TOLERANCE` (the default
    1e-4 does)."""
    f32 = _float32_tolerance(workload)
    return f32 is not None and max(f32.get("rtol", 0.0), f32.get("atol", 0.0)) >= (
        SPLIT_TF32_TOLERANCE
    )


def _float32_tolerance(workload: dict | None) -> dict | None:
    """The workload's float32 ``{atol, rtol}`` (the contract's default where it sets none);
    None where float32 outputs must be exact."""
    tol = (workload or {}).get("tolerance")
    if tol is None:
        return dict(C.DEFAULT_TOLERANCE["float32"])
    if tol == C.EXACT:
        return None
    f32 = tol.get("float32", C.DEFAULT_TOLERANCE["float32"])
    return None if f32 == C.EXACT else f32


# One TF32 tensor-core product per pair (Triton's ``tf32``; cuDNN's default for float32
# convolutions, and cuBLAS's where ``allow_tf32`` is set): each operand rounded to 10 mantissa
# bits, about 2^-11 of each product off. Offered only where the workload's float32 tolerance
# admits that (KernelBench judges float32 at atol = rtol = 1e-2; the default 1e-4 does not),
# and where the correctness gate runs no edge cases: its large-values case (inputs scaled up,
# outputs near zero by cancellation) put every KernelBench convolution's TF32 candidate 6-15
# off at 1e-2, 2-8% of the elements (24 of 24 rejected on an H100, session 46).
TF32_TOLERANCE = 1e-3


def tf32_allowed(workload: dict | None) -> bool:
    """Whether a campaign admits single TF32 products: its float32 atol and rtol both at least
    :data:`TF32_TOLERANCE` (never the default's 1e-4, never ``"exact"``), and its edge cases
    off (``"edge_cases": false``; the large-values case rejects them)."""
    f32 = _float32_tolerance(workload)
    return (
        f32 is not None
        and (workload or {}).get("edge_cases", True) is False
        and min(f32.get("rtol", 0.0), f32.get("atol", 0.0)) >= TF32_TOLERANCE
    )


def training(workload: dict | None) -> bool:
    """Whether a campaign's workload runs the module in training mode (``"mode": "train"``)."""
    return (workload or {}).get("mode") == C.MODE_TRAIN
