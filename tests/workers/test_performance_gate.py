"""The performance gate's measuring loop (``time_sides``) with fake sides: what a reviewer reads
off a candidate's timing (its speedup over each baseline, its interval, device and host time)
comes out right when the device drifts under both sides."""

from __future__ import annotations

import math
import types

from workers import constants as C
from workers.gates import performance


class FakeSide(performance.Side):
    """A side whose every sample is ``base_ms`` times the device's current drift factor."""

    def __init__(self, name: str, base_ms: float, clock: dict, host_ms: float = 0.02):
        super().__init__(
            name, None, [], None, C.SERVING_GRAPH, types.SimpleNamespace(enforcing=False)
        )
        self.base_ms, self.clock, self.fake_host_ms = base_ms, clock, host_ms
        self.prepared_at = None

    def _prepare(self) -> None:
        self.prepared_at = self.clock["t"]

    def _sample(self) -> float:
        self.clock["t"] += 1
        drift = 1.0 + 0.3 * math.sin(self.clock["t"] / 7.0)  # clocks wander by +-30%
        value = self.base_ms * drift
        self.device_ms.append(value)
        self.host_ms.append(self.fake_host_ms)
        return value


def test_speedup_survives_drift_that_moves_each_side_by_thirty_percent():
    clock = {"t": 0}
    sides = {
        "candidate": FakeSide("candidate", 0.010, clock),
        "compile": FakeSide("compile", 0.015, clock),
        "eager": FakeSide("eager", 0.030, clock),
    }
    timings, paired = performance.time_sides(sides, seed=0)
    assert abs(paired["compile"]["speedup"] - 1.5) < 0.03
    assert abs(paired["eager"]["speedup"] - 3.0) < 0.06
    low, high = paired["compile"]["ci95"]
    assert low <= 1.5 <= high * 1.01 and high - low < 0.1
    # Every side is prepared (warmed, captured) before the first timed round.
    assert all(s.prepared_at == 0 for s in sides.values())
    # Device and host time are reported apart; the mode says which one decided.
    cand = timings["candidate"]
    assert cand["mode"] == C.SERVING_GRAPH
    assert abs(cand["host_median_ms"] - 0.02) < 1e-9
    assert 0.007 < cand["device_median_ms"] < 0.013


def test_rounds_follow_the_slowest_side_within_bounds():
    clock = {"t": 0}
    slow = {
        "candidate": FakeSide("candidate", 50.0, clock),
        "compile": FakeSide("compile", 60.0, clock),
    }
    performance.time_sides(slow, seed=0)
    assert len(slow["candidate"].device_ms) == C.MIN_ROUNDS
    fast = {
        "candidate": FakeSide("candidate", 0.001, clock),
        "compile": FakeSide("compile", 0.002, clock),
    }
    performance.time_sides(fast, seed=0)
    assert len(fast["candidate"].device_ms) == C.MAX_ROUNDS
