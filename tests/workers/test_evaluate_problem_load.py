"""A problem that fails to load is reported as the problem's failure, not the candidate's: no
gate failed (so a search does not try to repair the candidate), every child gate says why it
did not run, and the report keeps the format the portal reads."""

import pytest

from tests.workers.conftest import read_fixture
from workers import constants as C
from workers.evaluate import EvaluationRequest, GateResult

BROKEN_PROBLEM = read_fixture("problems", "silu.py").replace(
    "def get_inputs", "raise RuntimeError('no such dataset')\n\n\ndef get_inputs", 1
)


@pytest.mark.timeout(180)
def test_a_problem_that_fails_to_load_is_not_a_compile_failure(evaluator):
    report = evaluator.evaluate(
        EvaluationRequest(BROKEN_PROBLEM, read_fixture("candidates", "silu_good.py"))
    )
    assert report.verdict == C.REJECTED
    assert report.failed_gate is None
    assert report.reason.startswith("the problem did not load: [problem_load_failed]")
    assert "no such dataset" in report.reason
    gates = {g.name: g for g in report.gates}
    assert list(gates) == list(C.GATES)
    assert gates[C.GATE_STATIC].status == C.PASSED
    for name in C.GATES[1:]:
        assert gates[name].status == C.SKIPPED
        assert gates[name].reason == "not run: the problem did not load"
    # The dict every gate becomes is the one the portal has always read.
    plain = report.to_dict()["gates"]
    assert set(plain[1]) == set(GateResult("x", C.PASSED, "").to_dict())
    assert set(plain[1]) == {
        "name", "status", "reason", "rule", "evidence", "wall_s", "device_s",
    }  # fmt: skip
