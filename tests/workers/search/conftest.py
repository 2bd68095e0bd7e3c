"""Shared helpers for the search tests: a fake evaluator that scores candidates by their params."""

from __future__ import annotations

import re

import pytest


class FakeReport(dict):
    def to_dict(self) -> dict:
        return dict(self)


def report(verdict="accepted", failed_gate=None, reason="", fitness=None, device_s=0.5):
    gates = []
    for name in ("static", "compile", "correctness", "performance", "fitness"):
        status = "passed"
        if failed_gate == name:
            status = "failed"
        elif failed_gate and gates and gates[-1]["status"] in ("failed", "skipped"):
            status = "skipped"
        gates.append(
            {
                "name": name,
                "status": status,
                "reason": reason if status == "failed" else "",
                "evidence": {"log": f"evidence for {name}"} if status == "failed" else {},
                "wall_s": 0.1,
                "device_s": device_s / 5,
            }
        )
    return FakeReport(
        verdict=verdict,
        failed_gate=failed_gate,
        reason=reason,
        gates=gates,
        cases=[],
        fingerprint={"device": "fake"},
        fitness=fitness,
        wall_s=0.5,
        device_s=device_s,
        harness_hash="fake",
    )


class FakeEvaluator:
    """Scores a template candidate from the parameters written in its header.

    ``score(params) -> speedup or None`` (None: rejected at ``fail_gate``).
    """

    def __init__(self, score, fail_gate="correctness", platform="cuda"):
        self.score = score
        self.fail_gate = fail_gate
        self.platform = platform
        self.calls = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def baseline(self, req):
        return FakeReport(status="passed", cases=[], device_s=1.0, fingerprint={})

    def evaluate(self, req):
        import json

        self.calls += 1
        m = re.search(r"Parameters: (\{.*\})", req.candidate_source)
        params = json.loads(m.group(1)) if m else {}
        s = self.score(params)
        if s is None:
            return report("rejected", self.fail_gate, f"{self.fail_gate} failed: out of resources")
        if req.platform == "interpret":
            return report(fitness=None, device_s=0.0)
        fit = {
            "speedup": s,
            "ci95": [s * 0.98, s * 1.02],
            "baseline": "eager",
            "worst_case": {"name": "c", "speedup": s},
            "regresses": False,
        }
        if s * 0.98 <= 1.0:
            return report("rejected", "fitness", "not significantly faster", fitness=fit)
        return report(fitness=fit)


@pytest.fixture
def softmax_source():
    from workers.catalog import catalog_get

    return catalog_get("softmax").problem_source()


@pytest.fixture
def fake_evaluator():
    """The FakeEvaluator class (test modules cannot import conftest under importlib mode)."""
    return FakeEvaluator


@pytest.fixture
def fake_report():
    return report
