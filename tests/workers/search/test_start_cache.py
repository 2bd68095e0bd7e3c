"""A GPU campaign's fixed start (baseline and tuner) is paid once per problem, workload and host
(issue 11, throughput): a second campaign on the same inputs reuses it and is charged nothing,
and says from when; anything that changes the timings (another device or torch, another
workload, a failed baseline, a day gone by) measures again."""

from __future__ import annotations

import json
import time
import types

from workers import constants as C
from workers.search import engine as engine_mod
from workers.search.engine import SearchEngine, baseline_request, campaign_new
from workers.search.start_cache import StartCache, start_key

SOURCE = """
import torch
class Model(torch.nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)
def get_inputs():
    return [torch.randn(8, 64)]
def get_init_inputs():
    return []
"""
WORKLOAD = {"cases": [{"name": "a", "weight": 1.0, "overrides": {}}]}
HOST = {
    "platform": "cuda",
    "device": "NVIDIA H200",
    "compute_capability": "9.0",
    "driver": "580.1",
    "cuda": "13.0",
    "torch": "2.11.0",
    "triton": "3.6.0",
    "python": "3.12.3",
    "harness_hash": "h1",
}


class FakeEvaluator:
    """The two things ``_start`` asks of an evaluator: its child's fingerprint, a baseline."""

    def __init__(self, fingerprint: dict, status: str = C.PASSED):
        self.fingerprint, self.status, self.baselines = fingerprint, status, 0

    def child(self, platform):
        return types.SimpleNamespace(hello={"ok": True, "fingerprint": self.fingerprint})

    def baseline(self, request):
        self.baselines += 1
        return {
            "status": self.status,
            "reason": "timed" if self.status == C.PASSED else "compile failed",
            "platform": "cuda",
            "cases": [],
            "fingerprint": dict(self.fingerprint),
            "device_s": 42.0,
            "wall_s": 50.0,
        }


def _campaign(**overrides):
    kw = {"problem_source": SOURCE, "workload": WORKLOAD, "platform": "cuda", "tune": False}
    state = campaign_new(**{**kw, **overrides})
    return SearchEngine.from_state(state), state


def _start(cache, ev, **overrides):
    engine, state = _campaign(**overrides)
    engine_mod._start(engine, ev, state, cache)
    return state


def test_the_second_campaign_on_the_same_problem_reuses_the_start_and_is_charged_nothing(
    tmp_path,
):
    cache = StartCache(tmp_path)
    ev = FakeEvaluator(HOST)
    first = _start(cache, ev)
    assert ev.baselines == 1 and first["baseline_device_s"] == 42.0
    assert first["start_reused"] is None
    assert "no kept start" in first["baseline"]["start_note"]
    second = _start(cache, ev, seed=7, max_candidates=80)  # another search, same start
    assert ev.baselines == 1, "the baseline was not timed again"
    assert second["baseline_device_s"] == 0.0
    assert second["baseline"]["status"] == C.PASSED
    reused = second["start_reused"]
    assert reused["device_s"] == 42.0 and "same host" in reused["note"]


def test_another_host_workload_or_age_measures_again(tmp_path):
    cache = StartCache(tmp_path)
    _start(cache, FakeEvaluator(HOST))
    other_torch = FakeEvaluator({**HOST, "torch": "2.13.0"})
    state = _start(cache, other_torch)
    assert other_torch.baselines == 1 and "torch differ" in state["baseline"]["start_note"]
    ev = FakeEvaluator({**HOST, "torch": "2.13.0"})
    _start(cache, ev, workload={"cases": [{"name": "b", "weight": 1.0, "overrides": {}}]})
    assert ev.baselines == 1, "another workload is another key"
    # A day later the kept start is stale.
    _, state = _campaign()
    path = tmp_path / f"{start_key(baseline_request(state), False)}.json"
    kept = json.loads(path.read_text())
    kept["saved_at"] = time.time() - 2 * 24 * 3600
    path.write_text(json.dumps(kept))
    ev = FakeEvaluator({**HOST, "torch": "2.13.0"})
    state = _start(cache, ev)
    assert ev.baselines == 1 and "h old" in state["baseline"]["start_note"]


def test_a_failed_baseline_or_a_broken_file_is_never_reused(tmp_path):
    cache = StartCache(tmp_path)
    failed = FakeEvaluator(HOST, status=C.FAILED)
    _start(cache, failed)
    ev = FakeEvaluator(HOST)
    state = _start(cache, ev)
    assert ev.baselines == 1 and state["start_reused"] is None
    path = tmp_path / f"{start_key(baseline_request(state), False)}.json"
    path.write_text("{not json")
    ev = FakeEvaluator(HOST)
    state = _start(cache, ev)
    assert ev.baselines == 1 and "unreadable" in state["baseline"]["start_note"]


def test_an_interpret_campaign_never_touches_the_cache(tmp_path):
    cache = StartCache(tmp_path / "kept")
    ev = FakeEvaluator({**HOST, "platform": "interpret"})
    _start(cache, ev, platform="interpret")
    assert not (tmp_path / "kept").exists()


def test_a_start_whose_tuner_failed_is_not_kept(tmp_path):
    """A tuner that timed out would otherwise leave every later campaign without its table."""
    cache = StartCache(tmp_path)
    _, state = _campaign()
    request = baseline_request(state)
    passed = FakeEvaluator(HOST).baseline(None)
    assert not cache.put(start_key(request, True), passed, {"ok": False, "error": "timed out"})
    assert cache.put(start_key(request, True), passed, {"ok": False, "skipped": True})
    assert cache.get(start_key(request, True), HOST)[0] is not None
