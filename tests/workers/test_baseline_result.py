"""A baseline's cases are typed (`workers.report.BaselineCase`) from the evaluator on: on the
interpreter each workload case is named with nothing timed, the report reads back to itself, and
a malformed answer from the sandbox child is a failed baseline rather than an error."""

import json
from pathlib import Path

import pytest

from tests.workers.test_case_result import _corrupting
from workers import constants as C
from workers.evaluate import EvaluationRequest
from workers.report import BaselineCase, BaselineReport

PROBLEMS = Path(__file__).resolve().parents[2] / "workers" / "catalog" / "problems"
SOFTMAX = (PROBLEMS / "softmax.py").read_text()
WORKLOAD = json.loads((PROBLEMS / "softmax.smoke.json").read_text())


def _request() -> EvaluationRequest:
    return EvaluationRequest(SOFTMAX, "", workload=WORKLOAD, platform=C.PLATFORM_INTERPRET)


@pytest.mark.timeout(240)
def test_a_baseline_on_the_interpreter_names_each_workload_case_and_times_nothing(evaluator):
    report = evaluator.baseline(_request())
    assert report.status == C.SKIPPED and report.reason == "skipped: no device"
    assert [c.name for c in report.cases] == [c["name"] for c in WORKLOAD["cases"]]
    assert all(isinstance(c, BaselineCase) and c.timings == {} for c in report.cases)
    assert report.times() == {c.name: {} for c in report.cases}
    plain = json.loads(report.to_json())
    assert list(plain["cases"][0])[:5] == ["name", "weight", "overrides", "dtype", "timings"]
    assert BaselineReport.from_dict(plain) == report
    assert BaselineReport.from_dict(plain).to_dict() == plain


@pytest.mark.timeout(240)
def test_a_malformed_baseline_answer_fails_the_baseline_not_the_worker(evaluator, monkeypatch):
    def corrupt(result):
        result["cases"][0]["dtype"] = 16

    ev = _corrupting(evaluator, monkeypatch, "load", corrupt)
    report = ev.baseline(_request())
    assert report.status == C.FAILED and report.cases == []
    assert report.reason == (
        "the report is malformed: baseline.cases[0].dtype: expected str, got int"
    )
