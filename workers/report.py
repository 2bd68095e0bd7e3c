"""Frozen, JSON-round-tripping results of the evaluation core."""

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
