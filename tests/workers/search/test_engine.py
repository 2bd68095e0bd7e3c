"""The engine: budget, saturation, target, outcomes, the funnel, resumable JSON state, repair."""

from __future__ import annotations

import json

from workers.search.engine import (
    FUNNEL_STAGES,
    STEP_BASELINE,
    STEP_EVALUATE,
    STEP_FINISHED,
    STEP_WAIT,
    SearchEngine,
    Step,
    baseline_times,
    campaign_new,
    campaign_summary,
    evaluation_request,
    funnel,
    run_campaign,
)


def _state(src, **kw):
    kw.setdefault("platform", "cuda")
    kw.setdefault("max_candidates", 20)
    return campaign_new(problem_source=src, workload=None, **kw)


def _funnel_adds_up(state):
    f = funnel(state)
    stages = [s for s in FUNNEL_STAGES if s != "generated"]
    assert sum(f[s] for s in stages) == f["generated"]
    return f


def by_tile(params):
    # Bigger tiles are faster, up to a point; invalid beyond it.
    return {512: 1.0, 1024: 1.05, 2048: 1.2, 4096: 1.3, 8192: 1.5, 16384: 1.45}.get(params["tile"])


def test_budget_of_candidates_ends_as_improved_with_a_best(softmax_source, fake_evaluator):
    state = _state(softmax_source, max_candidates=12, saturation_rounds=50)
    run_campaign(state, evaluator=fake_evaluator(by_tile))
    summary = campaign_summary(state)
    assert summary["outcome"] == "improved"
    assert summary["stop_reason"] == "budget_candidates"
    assert len(summary["nodes"]) == 12
    assert summary["best"]["verdict"] == "accepted"
    assert summary["best"]["fitness"]["speedup"] == max(
        n["fitness"]["speedup"] for n in summary["nodes"] if n["status"] == "accepted"
    )
    f = _funnel_adds_up(state)
    assert f["device_s_per_accepted"] > 0 and f["accepted"] > 0
    assert summary["first_accepted"]["node_id"]
    assert {e["type"] for e in summary["edges"]} <= {
        "mutation",
        "alternative",
        "crossover",
        "repair",
    }


def test_saturation_stops_with_no_safe_improvement(softmax_source, fake_evaluator):
    state = _state(softmax_source, max_candidates=200, saturation_rounds=2)
    run_campaign(state, evaluator=fake_evaluator(lambda p: 1.001))  # never beyond noise
    assert state["outcome"] == "no_safe_improvement"
    assert state["stop_reason"] == "saturated"
    assert len(state["graph"]["nodes"]) < 200


def test_target_met_stops_early(softmax_source, fake_evaluator):
    state = _state(softmax_source, target_speedup=1.2, saturation_rounds=50, max_candidates=100)
    run_campaign(state, evaluator=fake_evaluator(by_tile))
    assert state["stop_reason"] == "target_met" and state["outcome"] == "improved"


def test_interpret_campaign_is_honest_about_correctness_only(softmax_source, fake_evaluator):
    state = _state(softmax_source, platform="interpret", max_candidates=30, saturation_rounds=2)
    run_campaign(state, evaluator=fake_evaluator(lambda p: 1.0))
    assert state["outcome"] == "no_safe_improvement"
    assert "no performance gate" in state["message"]
    summary = campaign_summary(state)
    assert summary["best"]["fitness"] is None and summary["funnel"]["accepted"] >= 1


def test_device_budget_ends_as_budget_exhausted(softmax_source, fake_evaluator):
    state = _state(softmax_source, max_candidates=100, max_device_s=3.0, saturation_rounds=50)
    run_campaign(state, evaluator=fake_evaluator(lambda p: None))
    assert state["stop_reason"] == "budget_device_s"
    assert state["outcome"] == "budget_exhausted"


def test_no_template_fits_fails_with_the_reason(fake_evaluator):
    ordered = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.sort(x, dim=-1).values


def get_inputs():
    return [torch.randn(1, 3, 8, 8)]


def get_init_inputs():
    return []
"""
    state = _state(ordered)
    run_campaign(state, evaluator=fake_evaluator(lambda p: 2.0))
    assert state["outcome"] == "failed"
    assert "sort.default" in state["message"]


def test_step_by_step_with_json_state_resumes_and_records_once(softmax_source, fake_evaluator):
    """What the Celery control task does: persist the state as JSON between every step."""
    ev = fake_evaluator(by_tile)
    from workers.evaluate import EvaluationRequest

    state = _state(softmax_source, max_candidates=10, saturation_rounds=50)
    while True:
        state = json.loads(json.dumps(state))
        engine = SearchEngine.from_state(state)  # rebuilt from nothing but the state
        step = engine.step(state)
        if step.action == STEP_FINISHED:
            break
        if step.action == STEP_BASELINE:
            engine.record_baseline(state, ev.baseline(None).to_dict())
            continue
        assert step.action == STEP_EVALUATE and step.node_ids
        for node_id in step.node_ids:
            state = json.loads(json.dumps(state))
            report = ev.evaluate(EvaluationRequest(**engine.request_kwargs(state, node_id)))
            assert engine.record(state, node_id, report.to_dict()) is True
            # A redelivered result is ignored.
            assert engine.record(state, node_id, report.to_dict()) is False
    assert state["outcome"] == "improved"
    assert len(state["graph"]["nodes"]) == 10 == ev.calls
    _funnel_adds_up(state)


def test_failed_compile_gets_a_repair_child(softmax_source, fake_evaluator):
    # The defaults fail to compile; everything else works.
    from workers.search.generators.template import DEFAULTS

    def score(params):
        return None if params == DEFAULTS["row"] else 1.2

    state = _state(softmax_source, max_candidates=12, saturation_rounds=50)
    run_campaign(state, evaluator=fake_evaluator(score, fail_gate="compile"))
    nodes = {n["id"]: n for n in state["graph"]["nodes"]}
    failed = [n for n in nodes.values() if n["failed_gate"] == "compile"]
    assert failed
    repairs = [e for e in state["graph"]["edges"] if e["type"] == "repair"]
    assert repairs and repairs[0]["src"] == failed[0]["id"]
    f = _funnel_adds_up(state)
    assert f["compile_failed"] == len(failed)


def test_islands_policy_runs(softmax_source, fake_evaluator):
    state = _state(
        softmax_source,
        max_candidates=14,
        policy="islands",
        policy_args={"n_islands": 2, "migration_interval": 2},
        saturation_rounds=50,
    )
    run_campaign(state, evaluator=fake_evaluator(by_tile))
    assert state["outcome"] == "improved"
    assert {n["island"] for n in state["graph"]["nodes"]} == {0, 1}


def test_a_state_without_reports_still_feeds_repairs_their_evidence(softmax_source, fake_evaluator):
    """The portal keeps reports on its rows: its saved state holds no report, yet a repair
    child still sees the failing gate's evidence."""
    from workers.evaluate import EvaluationRequest
    from workers.search.generators.template import DEFAULTS

    ev = fake_evaluator(lambda p: None if p == DEFAULTS["row"] else 1.2, fail_gate="compile")
    seen = []
    state = _state(softmax_source, max_candidates=8, saturation_rounds=50)
    while True:
        state = json.loads(json.dumps(state))
        engine = SearchEngine.from_state(state, keep_reports=False)
        template = engine.generators["template"]
        propose = template.propose
        template.propose = lambda ctx, n, _p=propose: seen.append(ctx.feedback) or _p(ctx, n)
        step = engine.step(state)
        if step.action == STEP_FINISHED:
            break
        if step.action == STEP_BASELINE:
            engine.record_baseline(state, ev.baseline(None).to_dict())
        for node_id in step.node_ids:
            request = EvaluationRequest(**engine.request_kwargs(state, node_id))
            engine.record(state, node_id, ev.evaluate(request).to_dict())
    nodes = state["graph"]["nodes"]
    assert all(n["report"] is None for n in nodes)
    failed = [n for n in nodes if n["failed_gate"] == "compile"]
    assert failed and failed[0]["feedback"] == "{'log': 'evidence for compile'}"
    assert any(fb and fb["evidence"] == failed[0]["feedback"] for fb in seen)


def test_the_baseline_is_kept_once_and_every_request_carries_its_timings(
    softmax_source, fake_evaluator
):
    timings = {"eager": {"median_ms": 0.5, "ci95_ms": [0.49, 0.51], "samples_ms": [0.5] * 200}}
    ev = fake_evaluator(by_tile)
    ev.baseline = lambda req: {
        "status": "passed",
        "cases": [{"name": "c", "timings": timings}],
        "device_s": 2.0,
        "fingerprint": {"device": "fake"},
    }
    given = []
    evaluate = ev.evaluate
    ev.evaluate = lambda req: given.append(req.baseline_times) or evaluate(req)
    state = _state(softmax_source, max_candidates=6, saturation_rounds=50)
    run_campaign(state, evaluator=ev)

    assert "baseline_times" not in state
    assert state["baseline"]["cases"] == [{"name": "c", "timings": timings}], "whole on the CLI"
    assert len(given) == 6 and all(times == {"c": timings} for times in given)
    assert funnel(state)["baseline_device_s"] == 2.0


def test_a_host_keeping_reports_elsewhere_keeps_the_baseline_without_raw_samples(softmax_source):
    state = _state(softmax_source)
    timing = {"median_ms": 0.5, "p10_ms": 0.4, "ci95_ms": [0.49, 0.51], "samples_ms": [0.5] * 200}
    baseline = {"cases": [{"name": "c", "timings": {"eager": timing}}], "device_s": 2.0}
    SearchEngine.from_state(state, keep_reports=False, generators={}).record_baseline(
        state, baseline
    )
    kept = state["baseline"]["cases"][0]["timings"]["eager"]
    assert kept == {"median_ms": 0.5, "p10_ms": 0.4, "ci95_ms": [0.49, 0.51]}
    assert baseline["cases"][0]["timings"]["eager"]["samples_ms"], "the report given is intact"
    assert evaluation_request(state, "src")["baseline_times"] == {"c": {"eager": kept}}

    # A state saved when the timings were kept twice is kept once when next rebuilt.
    state["baseline"], state["baseline_times"] = baseline, baseline_times(baseline)
    SearchEngine.from_state(state, keep_reports=False, generators={})
    assert "baseline_times" not in state
    assert state["baseline"]["cases"][0]["timings"]["eager"] == kept


def test_a_step_measures_the_baseline_first_and_proposes_only_a_fully_recorded_round(
    softmax_source, fake_evaluator
):
    """The rule every driver follows (the portal's control task, run_campaign)."""
    from workers.evaluate import EvaluationRequest

    ev = fake_evaluator(by_tile)
    state = _state(softmax_source, max_candidates=30, saturation_rounds=50)
    engine = SearchEngine.from_state(state)
    step = engine.step(state)
    assert step.action == STEP_BASELINE and not engine.graph(state).nodes, "nothing before it"
    engine.record_baseline(state, ev.baseline(None).to_dict())

    first = engine.step(state)
    assert first.action == STEP_EVALUATE and first.round == 1 and len(first.node_ids) >= 2
    assert [n.id for n in engine.graph(state).pending()] == list(first.node_ids)
    *recorded, last = first.node_ids
    for node_id in recorded:
        report = ev.evaluate(EvaluationRequest(**engine.request_kwargs(state, node_id)))
        engine.record(state, node_id, report.to_dict())
    again = engine.step(state)
    assert again == Step(STEP_WAIT, 1, pending=1), "no round while one is out"
    assert len(engine.graph(state).nodes) == len(first.node_ids)

    report = ev.evaluate(EvaluationRequest(**engine.request_kwargs(state, last)))
    engine.record(state, last, report.to_dict())
    second = engine.step(state)
    assert second.action == STEP_EVALUATE and second.round == 2
    assert not set(second.node_ids) & set(first.node_ids)


def test_a_step_with_nothing_new_to_propose_ends_the_campaign_and_it_stays_ended(softmax_source):
    class Empty:
        def propose(self, ctx, n):
            return []

    state = _state(softmax_source, platform="interpret")
    engine = SearchEngine.from_state(state, generators={"empty": Empty()})
    step = engine.step(state)
    assert step.action == STEP_FINISHED and step.no_proposals
    assert step.outcome == state["outcome"] == "failed"
    assert state["stop_reason"] == "no_proposals"
    assert engine.step(state) == Step(STEP_FINISHED, step.round, outcome="failed")
    assert not engine.graph(state).nodes
