"""The performance gate's statistics with a fake timer: what pairing, steady state and the
fresh-process agreement decide, without a GPU."""

import itertools
import random

import pytest

from workers import constants as C
from workers.gates import timing as T
from workers.gates.fitness import fitness
from workers.remeasure import compare


class FakeGPU:
    """Sides whose true times are fixed, on a device whose speed changes from round to round
    (clocks, a neighbour's load): each round's factor hits every side measured in it."""

    def __init__(self, true_ms: dict[str, float], seed: int = 0):
        self.true_ms = true_ms
        self.rng = random.Random(seed)
        self.calls: list[str] = []
        self.factor = 1.0
        self.in_round = 0

    def measure(self, name: str):
        def sample() -> float:
            if self.in_round % len(self.true_ms) == 0:
                self.factor = self.rng.uniform(0.6, 1.8)  # a new round, a new device speed
            self.in_round += 1
            self.calls.append(name)
            return self.true_ms[name] * self.factor

        return sample


def test_rounds_rotate_the_order_so_no_side_always_goes_first():
    gpu = FakeGPU({"candidate": 1.0, "eager": 2.0, "compile": 1.5})
    T.paired_rounds({n: gpu.measure(n) for n in gpu.true_ms}, rounds=3)
    assert gpu.calls == [
        "candidate", "eager", "compile",
        "eager", "compile", "candidate",
        "compile", "candidate", "eager",
    ]  # fmt: skip


def test_pairing_cancels_drift_that_unpaired_medians_cannot():
    gpu = FakeGPU({"candidate": 1.0, "compile": 1.5}, seed=3)
    samples = T.paired_rounds({n: gpu.measure(n) for n in gpu.true_ms}, rounds=30)
    paired = T.paired_speedup(samples["compile"], samples["candidate"])
    assert paired["speedup"] == pytest.approx(1.5)
    assert paired["ci95"][1] - paired["ci95"][0] < 1e-9
    assert paired["rounds"] == 30
    # The same samples, each side summarised alone, give a wide and shifted answer.
    cand, base = samples["candidate"], samples["compile"]
    case = {
        "name": "c",
        "timing": {"median_ms": sorted(cand)[15], "samples_ms": cand},
        "baselines": {"compile": {"median_ms": sorted(base)[15], "samples_ms": base}},
    }
    unpaired = fitness([case], {"c": 1.0}, "compile")["fitness"]
    assert unpaired["ci95"][1] - unpaired["ci95"][0] > 0.2
    with_pairs = fitness([{**case, "paired": {"compile": paired}}], {"c": 1.0}, "compile")
    assert with_pairs["fitness"]["speedup"] == pytest.approx(1.5)
    assert with_pairs["status"] == C.PASSED


def test_paired_speedup_needs_rounds_on_both_sides():
    with pytest.raises(ValueError, match="same number"):
        T.paired_speedup([1.0, 2.0], [1.0])


def test_steady_state_waits_for_clocks_to_settle():
    cold = itertools.chain(
        [10.0] * 5, [7.0] * 5, [5.2] * 5, (5.0 + 0.01 * (i % 3) for i in range(99))
    )
    settled = T.steady_state(lambda: next(cold), window=5, tolerance=0.02)
    # 10 -> 7 -> 5.2 -> 5.01 (still 3.7% off) -> 5.01: settled in the fifth window.
    assert settled["settled"] and settled["windows"] == 5
    assert settled["medians"][:3] == [10.0, 7.0, 5.2]


def test_steady_state_says_when_it_never_settles():
    swing = itertools.cycle([1.0] * 5 + [2.0] * 5)
    result = T.steady_state(lambda: next(swing), window=5, tolerance=0.02, max_windows=6)
    assert result == {"settled": False, "windows": 6, "medians": [1.0, 2.0] * 3}


def test_a_narrow_interval_is_widened_to_the_between_process_floor():
    assert T.widened([1.499, 1.501], 0.01) == pytest.approx([1.485, 1.515], rel=1e-3)
    assert T.widened([1.2, 1.8], 0.01) == [1.2, 1.8]  # already wider: kept


def _run(verdict, failed, speedup, case_speedups, worst="a"):
    return {
        "verdict": verdict,
        "failed": failed,
        "speedup": speedup,
        "ci95": [speedup * 0.995, speedup * 1.005],
        "worst_case": worst,
        "cases": {
            name: {"median_ms": 0.01 / s, "speedup": s, "ci95": [s * 0.995, s * 1.005]}
            for name, s in case_speedups.items()
        },
    }


def test_fresh_processes_that_agree():
    runs = [_run("accepted", None, 1.5, {"a": 1.5, "b": 1.4}) for _ in range(5)]
    runs[2]["cases"]["a"]["speedup"] = 1.51
    result = compare(runs)
    assert result["same_verdict"] and result["case_agreement"] == 1.0
    assert result["weighted"]["rate"] == 1.0
    assert result["cases"]["a"]["speedup_spread"] == pytest.approx(0.01 / 1.5, rel=1e-3)


def test_fresh_processes_that_disagree_are_named():
    runs = [
        _run("rejected", "fitness:regression", 1.48, {"a": 1.6, "b": 0.57}, worst="b"),
        _run("rejected", "fitness:regression", 1.65, {"a": 1.7, "b": 0.95}, worst="b"),
        _run("rejected", "fitness:regression", 0.82, {"a": 0.28, "b": 1.2}, worst="a"),
    ]
    result = compare(runs)
    assert not result["same_verdict"]
    assert result["case_agreement"] == 0.0
    assert result["weighted"]["inside"] == [False, False]


def test_settled_says_when_rounds_can_stop():
    """Rounds stop when more would not change a verdict: intervals already narrower than a fresh
    process's spread, or a judged baseline beating the candidate beyond the tolerance. A loss to
    a baseline that does not judge (eager) never stops them."""
    quiet = {"candidate": [1.0, 1.001, 0.999] * 5, "compile": [1.5, 1.5015, 1.4985] * 5}
    assert T.settled(quiet) == "precise"
    rng = random.Random(0)
    noisy = {
        "candidate": [rng.uniform(0.8, 1.2) for _ in range(15)],
        "compile": [rng.uniform(0.8, 1.2) for _ in range(15)],
    }
    assert T.settled(noisy) is None
    losing = {
        "candidate": [rng.uniform(1.9, 2.1) for _ in range(15)],
        "eager": [rng.uniform(0.9, 1.1) for _ in range(15)],
        "compile": [rng.uniform(1.9, 2.1) * 3 for _ in range(15)],
    }
    assert T.settled(losing, judged=("compile",), stop_below=0.98) is None
    assert T.settled(losing, judged=("eager",), stop_below=0.98) == "clear loss"


def test_rounds_end_when_asked_after_the_minimum_then_in_steps():
    gpu = FakeGPU({"candidate": 1.0, "compile": 1.5})
    asked = []

    def until(samples):
        asked.append(len(samples["candidate"]))
        return "precise" if len(asked) == 3 else None

    samples = T.paired_rounds(
        {n: gpu.measure(n) for n in gpu.true_ms}, 60, until=until, min_rounds=15, step=5
    )
    assert asked == [15, 20, 25] and len(samples["compile"]) == 25
