"""Typed gates, cases and timings of a report, and typed cases of a baseline: read back from the
JSON a worker sends, they are the same report (every gate and case the evaluator writes
round-trips exactly, the real H200 reports and baselines of docs/demo included), typed where a
reader uses them, frozen, and a malformed one is refused with the field that is wrong."""

import dataclasses
import json
from pathlib import Path

import pytest

from workers import constants as C
from workers.report import (
    BaselineCase,
    BaselineReport,
    Case,
    EvaluationReport,
    GateResult,
    MalformedReport,
    Timing,
)

DEMO = Path(__file__).resolve().parents[2] / "docs" / "demo"


def _demo_reports() -> list[dict]:
    reports = []
    for path in sorted(DEMO.glob("h200-*.json")):
        reports += [n["report"] for n in json.loads(path.read_text())["nodes"] if n.get("report")]
    return reports


def _demo_baselines() -> list[dict]:
    return [json.loads(path.read_text())["baseline"] for path in sorted(DEMO.glob("h200-*.json"))]


def _graph_timing(median_ms: float) -> dict:
    """A timing as the performance gate writes it today (paired graph replays)."""
    return {
        "median_ms": median_ms,
        "p10_ms": median_ms * 0.9,
        "p90_ms": median_ms * 1.2,
        "ci95_ms": [median_ms * 0.98, median_ms * 1.02],
        "samples": 3,
        "samples_ms": [median_ms, median_ms * 0.9, median_ms * 1.2],
        "mode": "graph",
        "device_median_ms": median_ms,
        "host_median_ms": 0.011,
        "graph_calls": 20,
        "input_sets": 4,
    }


def test_every_case_of_real_h200_reports_round_trips_and_reads_typed():
    reports = _demo_reports()
    assert len(reports) >= 40
    for report in reports:
        parsed = EvaluationReport.from_dict(report)
        cases = parsed.cases
        assert parsed.to_dict() == report
        assert [case.to_dict() for case in cases] == report["cases"]
        for case, plain in zip(cases, report["cases"], strict=True):
            if plain["timing"]:
                assert case.timing.median_ms == plain["timing"]["median_ms"]
                assert case.timing.ci95_ms == tuple(plain["timing"]["ci95_ms"])
                assert len(case.timing.samples_ms) == plain["timing"]["samples"]
                assert set(case.baselines) == set(plain["baselines"]) and case.baselines
                assert all(isinstance(t, Timing) for t in case.baselines.values())
            else:
                assert case.timing is None and not case.timed


def test_a_case_timed_today_round_trips_and_leaves_out_what_was_not_measured():
    plain = {
        "name": "b8_d4096",
        "kind": "workload",
        "weight": 3.0,
        "status": "passed",
        "skip_reason": None,
        "rule": None,
        "reason": None,
        "max_abs_err": 1e-6,
        "max_rel_err": 2e-6,
        "dtype": "float16",
        "overrides": {"batch_size": 8, "dim": 4096},
        "timing": _graph_timing(0.004),
        "baselines": {"eager": _graph_timing(0.006), "compile": _graph_timing(0.005)},
        "floor_ms": 0.001,
        "paired": {"eager": {"speedup": 1.5, "ci95": [1.4, 1.6]}},
        "bytes": 65536,
        "flops": 0.0,
        "trials": 3,
        "wall_s": 2.5,
    }
    case = Case.from_dict(plain)
    assert case.to_dict() == plain
    assert json.loads(json.dumps(case.to_dict())) == plain, "plain JSON: lists, not tuples"
    assert case.baselines["eager"].host_median_ms == 0.011
    assert case.timing.mode == "graph" and case.timing.graph_calls == 20

    unmeasured = {**_graph_timing(0.004), "device_median_ms": None, "host_median_ms": None}
    written = Timing.from_dict(unmeasured).to_dict()
    assert "device_median_ms" not in written and "host_median_ms" not in written
    assert written["median_ms"] == 0.004


def test_cases_and_timings_are_frozen():
    case = Case.from_dict(_demo_reports()[0]["cases"][0])
    with pytest.raises(dataclasses.FrozenInstanceError):
        case.status = "failed"
    with pytest.raises(dataclasses.FrozenInstanceError):
        case.timing.median_ms = 0.0


# What every gate record carries, in this order (the portal's gate rows are made of it).
GATE_KEYS = ["name", "status", "reason", "rule", "evidence", "wall_s", "device_s"]


def test_every_gate_of_real_h200_reports_round_trips_and_reads_typed():
    failed = 0
    for report in _demo_reports():
        parsed = EvaluationReport.from_dict(report)
        assert [g.name for g in parsed.gates] == list(C.GATES)
        for gate, plain in zip(parsed.gates, report["gates"], strict=True):
            assert isinstance(gate, GateResult)
            assert list(gate.to_dict()) == GATE_KEYS == list(plain)
            assert gate.to_dict() == plain
            assert parsed.gate(gate.name) is gate
        if parsed.failed_gate:
            failed += 1
            gate = parsed.gate(parsed.failed_gate)
            assert gate.status == C.FAILED and not gate.passed and gate.rule
        else:
            assert all(g.passed for g in parsed.gates), parsed.reason
        fitness = parsed.gate(C.GATE_FITNESS)
        if fitness.passed:
            assert fitness.evidence["fitness"]["speedup"] == parsed.fitness["speedup"]
    assert failed, "the demo searches rejected some candidates: a failed gate is read too"


def test_the_real_h200_baselines_round_trip_and_read_typed():
    baselines = _demo_baselines()
    assert len([b for b in baselines if b["status"] == C.PASSED]) >= 3
    for plain in baselines:
        parsed = BaselineReport.from_dict(plain)
        assert parsed.to_dict() == plain
        assert json.loads(parsed.to_json()) == plain
        if parsed.status == C.FAILED:  # GQA attention's timed out (its candidates did not)
            assert parsed.reason and not parsed.cases
            continue
        assert parsed.cases and all(isinstance(c, BaselineCase) for c in parsed.cases)
        for case, written in zip(parsed.cases, plain["cases"], strict=True):
            assert list(case.to_dict()) == list(written), "the same layout, in the same order"
            assert set(case.timings) >= {C.BASELINE_EAGER, C.BASELINE_COMPILE}
            eager = case.timings[C.BASELINE_EAGER]
            assert isinstance(eager, Timing)
            assert eager.median_ms == written["timings"]["eager"]["median_ms"]
            assert case.floor_ms > 0 and case.bytes > 0
        times = parsed.times()
        assert times == {c["name"]: c["timings"] for c in plain["cases"]}, "a request's plain form"


def _gate() -> dict:
    return {
        "name": "compile", "status": "failed", "reason": "ptxas died", "rule": "compile_error",
        "evidence": {"log": "register spill"}, "wall_s": 1.5, "device_s": 0.25,
    }  # fmt: skip


def test_a_gate_round_trips_and_may_leave_out_all_but_its_name_and_status():
    assert GateResult.from_dict(_gate()).to_dict() == _gate()
    bare = GateResult.from_dict({"name": "static", "status": "passed"})
    assert bare == GateResult("static", C.PASSED, "")
    assert bare.to_dict() == {
        "name": "static", "status": "passed", "reason": "", "rule": None, "evidence": {},
        "wall_s": 0.0, "device_s": 0.0,
    }  # fmt: skip
    with pytest.raises(dataclasses.FrozenInstanceError):
        bare.status = C.FAILED


@pytest.mark.parametrize(
    "change, where",
    [
        (lambda g: "compile failed", "gates[1]: expected an object, got str"),
        (lambda g: {k: v for k, v in g.items() if k != "name"}, "gates[1].name: missing"),
        (lambda g: {k: v for k, v in g.items() if k != "status"}, "gates[1].status: missing"),
        (lambda g: {**g, "status": "fine"}, "gates[1].status: 'fine' is not one of"),
        (lambda g: {**g, "reason": None}, "gates[1].reason: expected str, got NoneType"),
        (lambda g: {**g, "rule": 7}, "gates[1].rule: expected str, got int"),
        (lambda g: {**g, "evidence": "ptxas died"}, "gates[1].evidence: expected dict, got str"),
        (lambda g: {**g, "wall_s": "1.5"}, "gates[1].wall_s: expected int or float, got str"),
        (lambda g: {**g, "device_s": None}, "gates[1].device_s: expected int or float, got No"),
    ],
)
def test_a_malformed_gate_is_refused_with_the_field_that_is_wrong(change, where):
    report = dict(_demo_reports()[0])
    report["gates"] = [report["gates"][0], change(_gate()), *report["gates"][2:]]
    with pytest.raises(MalformedReport) as caught:
        EvaluationReport.from_dict(report)
    assert str(caught.value).startswith(f"the report is malformed: {where}")


def test_a_report_whose_gates_are_not_a_list_is_refused():
    with pytest.raises(MalformedReport, match=r"report\.gates: expected list, got dict"):
        EvaluationReport.from_dict({"verdict": "accepted", "gates": {"static": {}}})


@pytest.mark.parametrize(
    "change, where",
    [
        (lambda c: None, "baseline.cases[0]: expected an object, got NoneType"),
        (lambda c: {k: v for k, v in c.items() if k != "name"}, "baseline.cases[0].name: missing"),
        (lambda c: {k: v for k, v in c.items() if k != "weight"}, "baseline.cases[0].weight: mis"),
        (lambda c: {**c, "weight": "lots"}, "baseline.cases[0].weight: expected int or float"),
        (lambda c: {**c, "overrides": [16]}, "baseline.cases[0].overrides: expected dict, got li"),
        (lambda c: {**c, "dtype": 16}, "baseline.cases[0].dtype: expected str, got int"),
        (lambda c: {**c, "timings": [1.0]}, "baseline.cases[0].timings: expected dict, got list"),
        (
            lambda c: {**c, "timings": {"eager": {**_graph_timing(0.1), "median_ms": "fast"}}},
            "baseline.cases[0].timings.eager.median_ms: expected int or float, got str",
        ),
        (lambda c: {**c, "floor_ms": "0"}, "baseline.cases[0].floor_ms: expected int or float"),
        (lambda c: {**c, "bytes": True}, "baseline.cases[0].bytes: expected int or float, got b"),
    ],
)
def test_a_malformed_baseline_case_is_refused_with_the_field_that_is_wrong(change, where):
    plain = _demo_baselines()[0]
    plain = {**plain, "cases": [change(plain["cases"][0]), *plain["cases"][1:]]}
    with pytest.raises(MalformedReport) as caught:
        BaselineReport.from_dict(plain)
    assert str(caught.value).startswith(f"the report is malformed: {where}")


def test_a_baseline_given_to_a_request_that_is_malformed_is_ignored_with_a_note():
    from workers.evaluate import _baseline_times

    plain = _demo_baselines()[0]
    bad = {**plain, "cases": [{**plain["cases"][0], "timings": {"eager": {"p10_ms": 0.1}}}]}
    times, note = _baseline_times(bad, plain["fingerprint"])
    assert times == {}
    assert note == (
        "baseline_times ignored: the report is malformed: "
        "baseline.cases[0].timings.eager.median_ms: missing"
    )
    assert _baseline_times(plain, plain["fingerprint"]) == (
        BaselineReport.from_dict(plain).times(),
        None,
    )
