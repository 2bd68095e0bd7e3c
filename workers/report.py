"""Frozen, JSON-round-tripping results of the evaluation core.

A report crosses process and queue boundaries as plain JSON (``to_dict``) and is read back
once (``from_dict``). An :class:`EvaluationReport` holds a :class:`GateResult` per gate and
a :class:`Case` per workload or edge case, with a :class:`Timing` per side timed on it; a
:class:`BaselineReport` holds a :class:`BaselineCase` per workload case, with a :class:`Timing`
per baseline. The evaluator builds them from what its sandbox child answers, and ``from_dict``
checks what it reads (a child that ran untrusted code, a worker over the queue), refusing a
malformed one with :class:`MalformedReport`. ``X.from_dict(d).to_dict() == d`` for every gate,
case and timing the evaluator writes, so parsing and writing again changes nothing a reader
can see. What a gate found (its ``evidence``) stays a plain dict: each gate writes its own.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields

from workers import constants as C


def _plain(obj):
    return json.loads(json.dumps(obj, default=str))


class MalformedReport(ValueError):
    """What came back (from a sandbox child, a worker or the database) is not a report's shape;
    the message names the first field that is wrong, by its path (``cases[2].timing.samples``)."""


_NUMBER = (int, float)


def _need(data: dict, key: str, kinds, where: str, *, required=False, nullable=True, default=None):
    """``data[key]`` when it is one of ``kinds``: ``required`` keys must be there, and only
    ``nullable`` ones may be null; an absent key that is not required reads as ``default``."""
    if key not in data:
        if required:
            raise MalformedReport(f"the report is malformed: {where}.{key}: missing")
        return default
    value = data[key]
    if value is None and nullable:
        return None
    # bool is an int to Python, never a number or a count in a report
    if isinstance(value, kinds) and not (isinstance(value, bool) and bool not in kinds):
        return value
    names = " or ".join(k.__name__ for k in (kinds if isinstance(kinds, tuple) else (kinds,)))
    got = type(value).__name__
    raise MalformedReport(f"the report is malformed: {where}.{key}: expected {names}, got {got}")


def _one_of(data: dict, key: str, allowed: tuple[str, ...], where: str) -> str:
    value = _need(data, key, str, where, required=True, nullable=False)
    if value not in allowed:
        raise MalformedReport(
            f"the report is malformed: {where}.{key}: {value[:40]!r} is not one of "
            f"{', '.join(allowed)}"
        )
    return value


def _numbers(values, where: str) -> tuple:
    if not all(isinstance(v, _NUMBER) and not isinstance(v, bool) for v in values):
        raise MalformedReport(f"the report is malformed: {where}: expected numbers")
    return tuple(values)


def _record(data, where: str) -> dict:
    if not isinstance(data, dict):
        got = type(data).__name__
        raise MalformedReport(f"the report is malformed: {where}: expected an object, got {got}")
    return data


class _JsonMixin:
    def to_json(self, **kwargs) -> str:
        return json.dumps(self.to_dict(), **kwargs)


@dataclass(frozen=True)
class EvaluationReport(_JsonMixin):
    """One candidate's evaluation: the verdict, each gate's result (:class:`GateResult`), each
    case's result (:class:`Case`), and what the run cost. ``to_dict`` is the JSON that crosses
    Celery and is stored on the node; ``from_dict`` reads it back, refusing a malformed gate or
    case."""

    verdict: str
    failed_gate: str | None
    reason: str
    gates: list[GateResult] = field(default_factory=list)
    cases: list[Case] = field(default_factory=list)
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

    def gate(self, name: str) -> GateResult | None:
        return next((g for g in self.gates if g.name == name), None)

    def case(self, name: str) -> Case | None:
        return next((c for c in self.cases if c.name == name), None)

    def to_dict(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["gates"] = [gate.to_dict() for gate in self.gates]
        out["cases"] = [case.to_dict() for case in self.cases]
        return _plain(out)

    @classmethod
    def from_dict(cls, data: dict) -> EvaluationReport:
        data = _record(data, "report")
        gates = _need(data, "gates", list, "report", default=[])
        cases = _need(data, "cases", list, "report", default=[])
        names = {f.name for f in fields(cls)} - {"gates", "cases"}
        return cls(
            **{k: v for k, v in data.items() if k in names},
            gates=[GateResult.from_dict(g, where=f"gates[{i}]") for i, g in enumerate(gates or [])],
            cases=[Case.from_dict(c, where=f"cases[{i}]") for i, c in enumerate(cases or [])],
        )


@dataclass(frozen=True)
class BaselineReport(_JsonMixin):
    """The reference (and incumbent) timed alone per workload case (:class:`BaselineCase`), once
    per campaign; ``from_dict`` refuses a malformed case."""

    status: str
    reason: str
    platform: str
    cases: list[BaselineCase] = field(default_factory=list)
    fingerprint: dict = field(default_factory=dict)
    ceilings: dict | None = None
    method: str | None = None
    wall_s: float = 0.0
    device_s: float = 0.0
    harness_hash: str = ""
    # Set when the campaign reused a start kept on the same GPU host (workers.search.
    # start_cache): when it was kept, what it cost then, and why it still applies.
    reused: dict | None = None
    start_note: str | None = None  # measured here: why no kept start applied

    def times(self) -> dict:
        """``{case name: {baseline name: timing}}``, the plain ``baseline_times`` a request
        carries (JSON, since it crosses the queue and goes to the sandbox child)."""
        return {c.name: {n: t.to_dict() for n, t in c.timings.items()} for c in self.cases}

    def to_dict(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["cases"] = [case.to_dict() for case in self.cases]
        for name in ("reused", "start_note"):
            if out[name] is None:
                del out[name]
        return _plain(out)

    @classmethod
    def from_dict(cls, data: dict) -> BaselineReport:
        data = _record(data, "baseline")
        cases = _need(data, "cases", list, "baseline", default=[])
        names = {f.name for f in fields(cls)} - {"cases"}
        return cls(
            **{k: v for k, v in data.items() if k in names},
            cases=[
                BaselineCase.from_dict(c, where=f"baseline.cases[{i}]")
                for i, c in enumerate(cases or [])
            ],
        )


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
    peer: str | None = None  # the ``best`` baseline: which peer it was on this case

    _OPTIONAL = (
        "mode",
        "device_median_ms",
        "host_median_ms",
        "graph_calls",
        "input_sets",
        "capture_error",
        "wall_s",
        "peer",
    )

    # What each optional field must be when it is set.
    _KINDS = {
        "peer": str,
        "mode": str,
        "device_median_ms": _NUMBER,
        "host_median_ms": _NUMBER,
        "graph_calls": int,
        "input_sets": int,
        "capture_error": str,
        "wall_s": _NUMBER,
    }

    @classmethod
    def from_dict(cls, data: dict, *, where: str = "timing") -> Timing:
        """A timing as written by ``to_dict``; :class:`MalformedReport` (naming the field) when
        a field has the wrong type. Only ``median_ms`` must be present (it may be null)."""
        data = _record(data, where)
        ci95 = _need(data, "ci95_ms", list, where)
        if ci95 is not None and len(ci95) != 2:
            raise MalformedReport(f"the report is malformed: {where}.ci95_ms: expected 2 numbers")
        if data.get("peer") is not None and data["peer"] not in C.PEERS:
            raise MalformedReport(
                f"the report is malformed: {where}.peer: expected one of {', '.join(C.PEERS)}"
            )
        return cls(
            median_ms=_need(data, "median_ms", _NUMBER, where, required=True),
            p10_ms=_need(data, "p10_ms", _NUMBER, where),
            p90_ms=_need(data, "p90_ms", _NUMBER, where),
            ci95_ms=None if ci95 is None else _numbers(ci95, f"{where}.ci95_ms"),
            samples=_need(data, "samples", int, where, nullable=False, default=0),
            samples_ms=_numbers(
                _need(data, "samples_ms", list, where) or (), f"{where}.samples_ms"
            ),
            **{name: _need(data, name, cls._KINDS[name], where) for name in cls._OPTIONAL},
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
    scaled_for_interpreter: dict | None = None  # {"orig": overrides, "used": overrides}
    transform: str | None = None
    derived_from: str | None = None
    floor_ms: float | None = None  # bytes over measured bandwidth, FLOPs over measured rate
    paired: dict | None = None  # {baseline: paired speedup with its interval}
    bytes: int | None = None
    flops: float | None = None
    trials: int | None = None
    evidence: dict | None = None
    wall_s: float | None = None
    # {peer: {"passes", "max_abs_err", "reason"}}: each peer's output against the contract
    peer_checks: dict | None = None

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
        "peer_checks",
    )

    @property
    def timed(self) -> bool:
        return self.timing is not None

    # What each optional field must be when it is set.
    _KINDS = {
        "scaled_for_interpreter": dict,
        "transform": str,
        "derived_from": str,
        "floor_ms": _NUMBER,
        "paired": dict,
        "bytes": _NUMBER,
        "flops": _NUMBER,
        "trials": int,
        "evidence": dict,
        "wall_s": _NUMBER,
        "peer_checks": dict,
    }

    @classmethod
    def from_dict(cls, data: dict, *, where: str = "case") -> Case:
        """A case as the evaluator writes it (``to_dict``), checked, since it comes back from a
        sandbox child that ran untrusted code, or from a worker over the queue:
        :class:`MalformedReport` names the first field of the wrong type or value. The name,
        kind, weight and status must be there; any other field may be absent; keys a case does
        not have are left out."""
        data = _record(data, where)
        timing = _need(data, "timing", dict, where)
        baselines = _need(data, "baselines", dict, where) or {}
        return cls(
            name=_need(data, "name", str, where, required=True, nullable=False),
            kind=_one_of(data, "kind", (C.CASE_WORKLOAD, C.CASE_EDGE), where),
            weight=float(_need(data, "weight", _NUMBER, where, required=True, nullable=False)),
            status=_one_of(data, "status", (C.PASSED, C.FAILED, C.SKIPPED), where),
            skip_reason=_need(data, "skip_reason", str, where),
            rule=_need(data, "rule", str, where),
            reason=_need(data, "reason", str, where),
            max_abs_err=_need(data, "max_abs_err", _NUMBER, where),
            max_rel_err=_need(data, "max_rel_err", _NUMBER, where),
            dtype=_need(data, "dtype", str, where),
            overrides=dict(_need(data, "overrides", dict, where) or {}),
            timing=None if timing is None else Timing.from_dict(timing, where=f"{where}.timing"),
            baselines={
                name: Timing.from_dict(t, where=f"{where}.baselines.{name}")
                for name, t in baselines.items()
            },
            **{name: _need(data, name, cls._KINDS[name], where) for name in cls.OPTIONAL},
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


@dataclass(frozen=True)
class GateResult:
    """One gate's verdict (passed, failed or skipped), the rule that decided a failure, what it
    found (``evidence``: each gate writes its own, so a plain dict) and what it cost."""

    name: str
    status: str  # passed | failed | skipped
    reason: str
    rule: str | None = None
    evidence: dict = field(default_factory=dict)
    wall_s: float = 0.0
    device_s: float = 0.0

    @property
    def passed(self) -> bool:
        return self.status == C.PASSED

    @classmethod
    def from_dict(cls, data: dict, *, where: str = "gate") -> GateResult:
        """A gate as the evaluator writes it (``to_dict``); :class:`MalformedReport` names the
        first field of the wrong type or value. The name and status must be there; any other
        field may be absent (no rule, no evidence, no time)."""
        data = _record(data, where)
        return cls(
            name=_need(data, "name", str, where, required=True, nullable=False),
            status=_one_of(data, "status", (C.PASSED, C.FAILED, C.SKIPPED), where),
            reason=_need(data, "reason", str, where, nullable=False, default=""),
            rule=_need(data, "rule", str, where),
            evidence=dict(_need(data, "evidence", dict, where) or {}),
            wall_s=float(_need(data, "wall_s", _NUMBER, where, nullable=False, default=0.0)),
            device_s=float(_need(data, "device_s", _NUMBER, where, nullable=False, default=0.0)),
        )

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "status": self.status,
            "reason": self.reason,
            "rule": self.rule,
            "evidence": dict(self.evidence or {}),
            "wall_s": self.wall_s,
            "device_s": self.device_s,
        }


@dataclass(frozen=True)
class BaselineCase:
    """One workload case of a baseline: each baseline's :class:`Timing` (``eager``,
    ``compile``, and ``max-autotune`` or ``incumbent`` when asked), and what the physical floor
    was made of. On a platform with no device it names the case and times nothing."""

    name: str
    weight: float
    overrides: dict = field(default_factory=dict)
    dtype: str | None = None
    timings: dict[str, Timing] = field(default_factory=dict)
    # Written only when set:
    bytes: int | None = None
    flops: float | None = None
    floor_ms: float | None = None  # bytes over measured bandwidth, FLOPs over measured rate
    wall_s: float | None = None
    scaled_for_interpreter: dict | None = None  # {"orig": overrides, "used": overrides}
    peer_checks: dict | None = None  # as Case.peer_checks

    OPTIONAL = ("bytes", "flops", "floor_ms", "wall_s", "scaled_for_interpreter", "peer_checks")

    # What each optional field must be when it is set.
    _KINDS = {
        "bytes": _NUMBER,
        "flops": _NUMBER,
        "floor_ms": _NUMBER,
        "wall_s": _NUMBER,
        "scaled_for_interpreter": dict,
        "peer_checks": dict,
    }

    @classmethod
    def from_dict(cls, data: dict, *, where: str = "baseline case") -> BaselineCase:
        """A baseline case as the evaluator writes it (``to_dict``); :class:`MalformedReport`
        names the first field of the wrong type. The name and weight must be there."""
        data = _record(data, where)
        timings = _need(data, "timings", dict, where) or {}
        return cls(
            name=_need(data, "name", str, where, required=True, nullable=False),
            weight=float(_need(data, "weight", _NUMBER, where, required=True, nullable=False)),
            overrides=dict(_need(data, "overrides", dict, where) or {}),
            dtype=_need(data, "dtype", str, where),
            timings={
                name: Timing.from_dict(t, where=f"{where}.timings.{name}")
                for name, t in timings.items()
            },
            **{name: _need(data, name, cls._KINDS[name], where) for name in cls.OPTIONAL},
        )

    def to_dict(self) -> dict:
        out = {
            "name": self.name,
            "weight": self.weight,
            "overrides": dict(self.overrides),
            "dtype": self.dtype,
            "timings": {name: t.to_dict() for name, t in self.timings.items()},
        }
        return _with_optional(out, self, self.OPTIONAL)
