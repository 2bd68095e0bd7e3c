"""The report's cases are typed (`workers.report.Case`) from the evaluator on: a real report of a
catalog problem on the interpreter writes the same JSON it always did and reads back to itself,
and what comes back malformed (from the sandbox child, from a worker) is refused with the field
that is wrong, or, inside the evaluator, becomes a failed gate rather than an error."""

import json
from pathlib import Path

import pytest

from workers import constants as C
from workers.evaluate import ChildCall, EvaluationRequest
from workers.report import Case, EvaluationReport, MalformedReport

ROOT = Path(__file__).resolve().parents[2]
PROBLEMS = ROOT / "workers" / "catalog" / "problems"
SOFTMAX = (PROBLEMS / "softmax.py").read_text()
GOOD = (ROOT / "tests" / "workers" / "fixtures" / "candidates" / "softmax_good.py").read_text()
# The catalog's smoke workload, with the edge cases derived from its heaviest case.
WORKLOAD = {**json.loads((PROBLEMS / "softmax.smoke.json").read_text()), "edge_cases": True}

# What every case record carries, in this order; the rest only where set (`Case.OPTIONAL`).
ALWAYS = [
    "name", "kind", "weight", "status", "skip_reason", "rule", "reason", "max_abs_err",
    "max_rel_err", "dtype", "overrides", "timing", "baselines",
]  # fmt: skip


@pytest.fixture(scope="module")
def report(evaluator) -> EvaluationReport:
    request = EvaluationRequest(SOFTMAX, GOOD, workload=WORKLOAD, platform="interpret", trials=2)
    report = evaluator.evaluate(request)
    assert report.verdict == C.ACCEPTED, report.reason
    return report


@pytest.mark.timeout(240)
def test_a_real_report_carries_typed_cases_and_writes_the_json_it_always_did(report):
    assert report.cases and all(isinstance(case, Case) for case in report.cases)
    assert {c.kind for c in report.cases} == {C.CASE_WORKLOAD, C.CASE_EDGE}
    assert report.case("b8_d96").weight == 2.0 and report.case("b8_d96").dtype == "float32"
    assert report.case("b8_d96").trials == 2 and report.case("b8_d96").timing is None
    assert report.case(C.EDGE_TAIL).derived_from == "b8_d96"

    text = report.to_json()
    plain = json.loads(text)
    for case, written in zip(report.cases, plain["cases"], strict=True):
        optional = [k for k in Case.OPTIONAL if getattr(case, k) is not None]
        assert list(written) == ALWAYS + optional, "the layout the portal reads, unchanged"
        assert written["name"] == case.name and written["status"] == case.status
    again = EvaluationReport.from_dict(plain)
    assert again == report
    assert again.to_json() == text, "read back and written again: the same JSON text"


def _case(report: EvaluationReport) -> dict:
    return report.to_dict()["cases"][0]


def _timing() -> dict:
    return {
        "median_ms": 0.004, "p10_ms": 0.0036, "p90_ms": 0.0048, "ci95_ms": [0.0039, 0.0041],
        "samples": 2, "samples_ms": [0.004, 0.0041], "mode": "graph",
    }  # fmt: skip


@pytest.mark.timeout(240)
@pytest.mark.parametrize(
    "change, where",
    [
        (lambda c: "no case", "cases[0]: expected an object, got str"),
        (lambda c: {k: v for k, v in c.items() if k != "name"}, "cases[0].name: missing"),
        (lambda c: {**c, "weight": "lots"}, "cases[0].weight: expected int or float, got str"),
        (lambda c: {**c, "weight": True}, "cases[0].weight: expected int or float, got bool"),
        (lambda c: {**c, "status": "great"}, "cases[0].status: 'great' is not one of"),
        (lambda c: {**c, "kind": None}, "cases[0].kind: expected str, got NoneType"),
        (lambda c: {**c, "overrides": [8, 96]}, "cases[0].overrides: expected dict, got list"),
        (lambda c: {**c, "trials": 2.5}, "cases[0].trials: expected int, got float"),
        (
            lambda c: {**c, "timing": {**_timing(), "median_ms": "fast"}},
            "cases[0].timing.median_ms: expected int or float, got str",
        ),
        (
            lambda c: {**c, "timing": {**_timing(), "ci95_ms": [0.004]}},
            "cases[0].timing.ci95_ms: expected 2 numbers",
        ),
        (
            lambda c: {**c, "baselines": {"eager": {**_timing(), "samples_ms": ["x"]}}},
            "cases[0].baselines.eager.samples_ms: expected numbers",
        ),
        (
            lambda c: {**c, "baselines": {"eager": {"p10_ms": 0.1}}},
            "cases[0].baselines.eager.median_ms: missing",
        ),
    ],
)
def test_a_malformed_case_is_refused_with_the_field_that_is_wrong(report, change, where):
    plain = report.to_dict()
    plain["cases"] = [change(_case(report))] + plain["cases"][1:]
    with pytest.raises(MalformedReport) as caught:
        EvaluationReport.from_dict(plain)
    assert str(caught.value).startswith(f"the report is malformed: {where}")


def test_a_report_whose_cases_are_not_a_list_is_refused():
    with pytest.raises(MalformedReport, match=r"report\.cases: expected list, got dict"):
        EvaluationReport.from_dict({"verdict": "accepted", "cases": {"a": {}}})
    with pytest.raises(MalformedReport, match="report: expected an object"):
        EvaluationReport.from_dict(["accepted"])


def _corrupting(evaluator, monkeypatch, op: str, corrupt):
    """The evaluator, with ``corrupt`` applied to the child's answer to ``op`` (as a child
    whose candidate tampered with it would answer)."""
    real = evaluator._call

    def call(child, name, args, deadline, gate) -> ChildCall:
        answer = real(child, name, args, deadline, gate)
        if name == op and answer.result is not None:
            corrupt(answer.result)
        return answer

    monkeypatch.setattr(evaluator, "_call", call)
    return evaluator


@pytest.mark.timeout(240)
def test_a_malformed_correctness_answer_fails_the_gate_not_the_worker(evaluator, monkeypatch):
    def corrupt(result):
        result["cases"][1]["max_abs_err"] = "tiny"

    ev = _corrupting(evaluator, monkeypatch, "correctness", corrupt)
    report = ev.evaluate(EvaluationRequest(SOFTMAX, GOOD, workload=WORKLOAD, trials=1))
    assert report.verdict == C.REJECTED and report.failed_gate == C.GATE_CORRECTNESS
    gate = report.gate(C.GATE_CORRECTNESS)
    assert gate.rule == C.RULE_RUNTIME
    assert gate.reason == (
        "the report is malformed: correctness.cases[1].max_abs_err: expected int or float, got str"
    )
    assert report.cases and all(c.status == C.SKIPPED for c in report.cases), "as loaded"


@pytest.mark.timeout(240)
def test_a_malformed_load_answer_is_a_problem_that_did_not_load(evaluator, monkeypatch):
    def corrupt(result):
        result["cases"][0]["weight"] = None

    ev = _corrupting(evaluator, monkeypatch, "load", corrupt)
    report = ev.evaluate(EvaluationRequest(SOFTMAX, GOOD, workload=WORKLOAD, trials=1))
    assert report.verdict == C.REJECTED and report.failed_gate is None
    assert report.reason == (
        "the problem did not load: [runtime_error] the report is malformed: "
        "load.cases[0].weight: expected int or float, got NoneType"
    )
    assert report.cases == []


@pytest.mark.timeout(240)
@pytest.mark.parametrize(
    "corrupt, reason",
    [
        (
            lambda r: r.update(status="great"),
            "the report is malformed: compile.status: 'great' is not one of passed, failed, "
            "skipped",
        ),
        (
            lambda r: r.update(evidence="all fine"),
            "the report is malformed: compile.evidence: expected dict, got str",
        ),
        (
            lambda r: r.pop("status"),
            "the report is malformed: compile.status: expected str, got NoneType",
        ),
    ],
)
def test_a_malformed_gate_answer_fails_the_gate_not_the_worker(
    evaluator, monkeypatch, corrupt, reason
):
    """A candidate that rewrites its gate's answer (a status no gate has) is rejected there; it
    was once read as a gate that did not fail, and the candidate accepted."""
    ev = _corrupting(evaluator, monkeypatch, "compile", corrupt)
    report = ev.evaluate(EvaluationRequest(SOFTMAX, GOOD, workload=WORKLOAD, trials=1))
    assert report.verdict == C.REJECTED and report.failed_gate == C.GATE_COMPILE
    gate = report.gate(C.GATE_COMPILE)
    assert (gate.status, gate.rule, gate.reason) == (C.FAILED, C.RULE_RUNTIME, reason)
    assert EvaluationReport.from_dict(report.to_dict()) == report
