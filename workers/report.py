"""Frozen, JSON-round-tripping results of the evaluation core.

A report crosses process and queue boundaries as plain JSON (``to_dict``); a reader that needs
its parts parses them back once (``from_dict``): a :class:`Case` per workload or edge case, a
:class:`Timing` per side timed on it. ``Case.from_dict(d).to_dict() == d`` for every case the
evaluator writes, so parsing and writing again changes nothing a reader can see.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields


def _plain(obj):
    return json.loads(json.dumps(obj, default=str))


class _JsonMixin:
    def to_dict(self) -> dict:
        return _plain(asdict(self))

    def to_json(self, **kwargs) -> str:
        return json.dumps(self.to_dict(), **kwargs)

    @classmethod
    def from_dict(cls, data: dict):
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


@dataclass(frozen=True)
class EvaluationReport(_JsonMixin):
    verdict: str
    failed_gate: str | None
    reason: str
    gates: list = field(default_factory=list)
    cases: list = field(default_factory=list)
    fingerprint: dict = field(default_factory=dict)
    fitness: dict | None = None
    wall_s: float = 0.0
    device_s: float = 0.0
    harness_hash: str = ""
    platform: str = ""
    flags: list = field(default_factory=list)

    @property
    def accepted(self) -> bool:
        return self.verdict == "accepted"

    def gate(self, name: str) -> dict | None:
        return next((g for g in self.gates if g["name"] == name), None)

    def case(self, name: str) -> dict | None:
        return next((c for c in self.cases if c["name"] == name), None)

    def case_results(self) -> tuple[Case, ...]:
        """The cases, typed (``cases`` is their plain JSON form)."""
        return tuple(Case.from_dict(c) for c in self.cases)


@dataclass(frozen=True)
class BaselineReport(_JsonMixin):
    status: str
    reason: str
    platform: str
    cases: list = field(default_factory=list)
    fingerprint: dict = field(default_factory=dict)
    ceilings: dict | None = None
    method: str | None = None
    wall_s: float = 0.0
    device_s: float = 0.0
    harness_hash: str = ""

    def times(self) -> dict:
        """``{case name: {baseline name: timing}}``, the ``baseline_times`` of a request."""
        return {c["name"]: c.get("timings") or {} for c in self.cases}


def _tuple(values) -> tuple | None:
    return None if values is None else tuple(values)


def _with_optional(out: dict, obj, names: tuple[str, ...]) -> dict:
    for name in names:
        value = getattr(obj, name)
        if value is not None:
            out[name] = list(value) if isinstance(value, tuple) else value
    return out


@dataclass(frozen=True)
class Timing:
    """One side (the candidate, or a baseline such as ``eager``) timed on one case, in
    milliseconds. ``median_ms`` is what fitness compares (device time per call; plus host
    overhead in eager serving), with the 95% bootstrap interval of the median and the raw
    samples; the rest says how it was taken (serving mode, the device and host parts, calls
    per graph replay, input sets rotated). Fields left None are left out of ``to_dict``."""

    median_ms: float | None
    p10_ms: float | None = None
    p90_ms: float | None = None
    ci95_ms: tuple[float, float] | None = None
    samples: int = 0
    samples_ms: tuple[float, ...] = ()
    mode: str | None = None
    device_median_ms: float | None = None
    host_median_ms: float | None = None
    graph_calls: int | None = None
    input_sets: int | None = None
    capture_error: str | None = None
    wall_s: float | None = None

    _OPTIONAL = (
        "mode",
        "device_median_ms",
        "host_median_ms",
        "graph_calls",
        "input_sets",
        "capture_error",
        "wall_s",
    )

    @classmethod
    def from_dict(cls, data: dict) -> Timing:
        return cls(
            median_ms=data.get("median_ms"),
            p10_ms=data.get("p10_ms"),
            p90_ms=data.get("p90_ms"),
            ci95_ms=_tuple(data.get("ci95_ms")),
            samples=int(data.get("samples") or 0),
            samples_ms=tuple(data.get("samples_ms") or ()),
            **{name: data.get(name) for name in cls._OPTIONAL},
        )

    def to_dict(self) -> dict:
        out = {
            "median_ms": self.median_ms,
            "p10_ms": self.p10_ms,
            "p90_ms": self.p90_ms,
            "ci95_ms": None if self.ci95_ms is None else list(self.ci95_ms),
            "samples": self.samples,
            "samples_ms": list(self.samples_ms),
        }
        return _with_optional(out, self, self._OPTIONAL)


@dataclass(frozen=True)
class Case:
    """One case of an evaluation: a workload case (weighted, timed on a device) or an edge case
    (correctness only), with what the correctness gate found and, when timed, the candidate's
    timing and each baseline's from the same paired rounds."""

    name: str
    kind: str
    weight: float
    status: str  # passed | failed | skipped
    skip_reason: str | None = None
    rule: str | None = None
    reason: str | None = None
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    dtype: str | None = None
    overrides: dict = field(default_factory=dict)
    timing: Timing | None = None
    baselines: dict[str, Timing] = field(default_factory=dict)
    # Written only when set:
    scaled_for_interpreter: bool | None = None
    transform: str | None = None
    derived_from: str | None = None
    floor_ms: float | None = None  # bytes over measured bandwidth, FLOPs over measured rate
    paired: dict | None = None  # {baseline: paired speedup with its interval}
    bytes: int | None = None
    flops: float | None = None
    trials: int | None = None
    evidence: dict | None = None
    wall_s: float | None = None

    # Fields a case record carries only where they are set (the evaluator writes the same).
    OPTIONAL = (
        "scaled_for_interpreter",
        "transform",
        "derived_from",
        "floor_ms",
        "paired",
        "bytes",
        "flops",
        "trials",
        "evidence",
        "wall_s",
    )

    @property
    def timed(self) -> bool:
        return self.timing is not None

    @classmethod
    def from_dict(cls, data: dict) -> Case:
        timing = data.get("timing")
        return cls(
            name=data.get("name", ""),
            kind=data.get("kind", "workload"),
            weight=float(data.get("weight") or 0.0),
            status=data.get("status", "skipped"),
            skip_reason=data.get("skip_reason"),
            rule=data.get("rule"),
            reason=data.get("reason"),
            max_abs_err=data.get("max_abs_err"),
            max_rel_err=data.get("max_rel_err"),
            dtype=data.get("dtype"),
            overrides=dict(data.get("overrides") or {}),
            timing=Timing.from_dict(timing) if timing else None,
            baselines={
                name: Timing.from_dict(t) for name, t in (data.get("baselines") or {}).items()
            },
            **{name: data.get(name) for name in cls.OPTIONAL},
        )

    def to_dict(self) -> dict:
        out = {
            "name": self.name,
            "kind": self.kind,
            "weight": self.weight,
            "status": self.status,
            "skip_reason": self.skip_reason,
            "rule": self.rule,
            "reason": self.reason,
            "max_abs_err": self.max_abs_err,
            "max_rel_err": self.max_rel_err,
            "dtype": self.dtype,
            "overrides": dict(self.overrides),
            "timing": None if self.timing is None else self.timing.to_dict(),
            "baselines": {name: t.to_dict() for name, t in self.baselines.items()},
        }
        return _with_optional(out, self, self.OPTIONAL)
