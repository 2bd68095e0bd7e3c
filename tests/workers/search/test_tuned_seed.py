"""A GPU campaign starts from the per-case tuner's table (issue 11: "start where compile ends").

The tuner itself needs a GPU (its numbers are in docs/benchmarks.md); here: the campaign asks
for it once beside the baseline, keeps the answer only once checked (it comes from behind the
sandbox, over a queue in the portal), and the generator puts the table first among its seeds,
searching as before where the tuner cannot run or fails."""

from __future__ import annotations

import json

import pytest

from workers.catalog import catalog_get
from workers.search import tuning
from workers.search.cli import add_arguments
from workers.search.engine import STEP_BASELINE, SearchEngine, campaign_new
from workers.search.generators import template as T
from workers.search.generators.base import EDGE_SEED, GenerationContext
from workers.search.tune_child import handle
from workers.search.tuning import checked, run_tuner, tune_request

WORKLOAD = {
    "cases": [
        {"name": "small", "overrides": {"num_tokens": 4, "hidden_size": 256}, "weight": 1},
    ]
}
TABLE = {"4,256,float32": [1, 2, 256, 2, 1, 0, 1, 1]}


ANSWER = {
    "ok": True,
    "table": TABLE,
    "cases": [{"name": "small", "key": "4,256,float32", "speedup": 1.21}],
    "wall_s": 80.0,
}


def _ctx(platform="cuda", tuned=ANSWER, problem="rms_norm"):
    return GenerationContext(
        problem_source=catalog_get(problem).problem_source(),
        workload=WORKLOAD,
        platform=platform,
        mode=EDGE_SEED,
        tuned=tuned,
    )


def _state(platform="cuda", **kw):
    return campaign_new(
        problem_source=catalog_get("rms_norm").problem_source(),
        workload=WORKLOAD,
        platform=platform,
        max_candidates=8,
        **kw,
    )


def test_the_first_seed_is_the_campaigns_tuned_table():
    gen = T.TemplateGenerator()
    first = gen.propose(_ctx(), 4)[0]
    assert first.params["table"] == TABLE
    assert "tuned per case on this GPU: small 1.210x" in first.note
    assert '"4,256,float32": [1, 2, 256, 2, 1, 0, 1, 1]' in first.source
    assert gen.stats()["tuned"] == 1


def test_a_failed_answer_is_not_used_and_its_error_is_shown():
    gen = T.TemplateGenerator()
    proposals = gen.propose(_ctx(tuned={"ok": False, "error": "CUDA out of memory"}), 4)
    assert proposals and all(not p.params.get("table") for p in proposals)
    assert gen.stats()["tune_failed"] == 1 and "out of memory" in gen.stats()["tune_error"]


def test_no_tuned_seed_off_a_gpu_campaign_or_for_another_family():
    for ctx in (_ctx(platform="interpret"), _ctx(tuned=None), _ctx(problem="gelu")):
        assert all(not p.params.get("table") for p in T.TemplateGenerator().propose(ctx, 4))


def test_an_answer_that_crossed_a_queue_is_checked():
    """It comes from a process that loaded the user's problem: only small integer lists."""
    assert checked(ANSWER)["ok"] is True
    for bad in (
        {**ANSWER, "table": {"4,256,float32": ["__import__('os')"]}},
        {**ANSWER, "table": {"4,256,float32": [True, 1]}},
        {**ANSWER, "cases": [{"name": "small", "speedup": "fast"}]},
        ["not", "a", "dict"],
    ):
        assert checked(bad) == {"ok": False, "error": "the tuner's answer is malformed"}
    assert checked({"ok": False, "error": "x" * 900})["error"] == "x" * 300


def test_a_cuda_campaign_asks_for_tuning_once_unless_turned_off():
    state = _state()
    assert tune_request(state) == {
        "problem_source": state["config"]["problem_source"],
        "workload": WORKLOAD,
    }
    assert tune_request(_state(platform="interpret")) is None
    assert tune_request(_state(tune=False)) is None
    state["tuned"] = {"ok": False, "error": "x"}
    assert tune_request(state) is None  # answered: not asked again


def test_the_engine_keeps_the_answer_with_the_baseline_and_seeds_round_one_from_it():
    state = _state()
    engine = SearchEngine.from_state(state)
    assert engine.step(state).action == STEP_BASELINE
    baseline = {"status": "passed", "cases": [], "fingerprint": {}, "device_s": 3.0}
    engine.record_baseline(state, baseline, tuned=ANSWER)
    assert state["tuned"]["table"] == TABLE
    assert state["baseline_device_s"] == pytest.approx(83.0)  # the tuner's GPU time counts
    assert len(json.dumps(state["tuned"])) < 1_000  # the state stays small
    step = engine.step(state)
    first = engine.graph(state).nodes[step.node_ids[0]]
    assert first.params["table"] == TABLE and first.note.startswith("seed tuned per case")


def test_the_tuner_runs_behind_the_boundary_with_the_gpu_or_says_why_not(monkeypatch):
    calls = []

    def run_confined(module, request, **kwargs):
        calls.append((module, request, kwargs))
        return ANSWER

    monkeypatch.setattr("workers.confined.run_confined", run_confined)
    monkeypatch.setattr(tuning, "has_gpu", lambda: False)
    assert run_tuner({"problem_source": "x", "workload": WORKLOAD})["skipped"] is True
    assert calls == []
    monkeypatch.setattr(tuning, "has_gpu", lambda: True)
    assert run_tuner({"problem_source": "x", "workload": WORKLOAD})["table"] == TABLE
    module, request, kwargs = calls[0]
    assert module == "workers.search.tune_child" and kwargs["gpu"] is True
    assert request == {"problem_source": "x", "workload": WORKLOAD, "cute": False}


def test_the_cli_tunes_on_cuda_unless_told_not_to():
    import argparse

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert parser.parse_args(["--catalog", "softmax"]).tune is True
    assert parser.parse_args(["--catalog", "softmax", "--no-tune"]).tune is False


def test_the_tuner_child_skips_a_problem_that_is_not_a_row_kernel():
    answer = handle({"problem_source": catalog_get("gelu").problem_source(), "workload": {}})
    assert answer["ok"] is False and answer["skipped"] is True
    assert "row kernels" in answer["error"]


def test_the_tuner_child_refuses_a_request_without_a_workload():
    assert handle({"problem_source": "x = 1"})["ok"] is False


def test_the_tuners_compile_workers_find_the_code_from_a_scratch_folder(tmp_path, monkeypatch):
    """Behind the sandbox the tuner runs in a scratch folder with a relative PYTHONPATH; its
    compile workers must still import this package (they could not, and the sweep then compiled
    every configuration one by one for minutes). A worker that fails says why, at once."""
    import argparse
    import json

    from workers.search.tune import _compile_all

    entry = catalog_get("rms_norm")
    spec = tmp_path / "workload.json"
    spec.write_text(json.dumps(WORKLOAD))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", ".")
    args = argparse.Namespace(
        problem=str(entry.problem_path), workload=str(spec), out=str(tmp_path), jobs=2
    )
    with pytest.raises(RuntimeError, match="compile worker") as err:
        _compile_all(args, {"no such case": [[1, 1, 256, 1, 1, 0, 0]]})
    assert "No module named" not in str(err.value)
    assert "KeyError" in str(err.value)  # the worker ran this package's code and said what failed
