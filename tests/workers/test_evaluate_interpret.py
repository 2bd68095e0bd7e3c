"""Good candidates pass every gate on the interpreter and compile ahead of time for sm_90; the
adversarial suite is rejected at the right gate with the right rule; the evaluating process
survives crashes and the next evaluation is unaffected."""

import json

import pytest

from tests.workers.conftest import read_fixture
from tests.workers.fixtures.adversarial import CASES, NEEDS_EDGE_CASES
from workers import constants as C
from workers.evaluate import EvaluationReport, EvaluationRequest, WorkloadError

NO_EDGES = {"cases": [{"name": "default"}], "edge_cases": False}
WITH_EDGES = {"cases": [{"name": "default"}], "edge_cases": True}


@pytest.mark.timeout(180)
def test_good_elementwise_with_edge_cases(evaluator):
    report = evaluator.evaluate(
        EvaluationRequest(
            read_fixture("problems", "silu.py"), read_fixture("candidates", "silu_good.py")
        )
    )
    assert report.verdict == C.ACCEPTED, report.reason
    names = {c.name: c for c in report.cases}
    assert {C.EDGE_TAIL, C.EDGE_EMPTY, C.EDGE_NONCONTIGUOUS, C.EDGE_LARGE_VALUES} <= set(names)
    assert names[C.EDGE_TAIL].overrides["dim"] == 2049  # one past a power of two
    assert names["default"].scaled_for_interpreter == {
        "orig": {"dim": 16384},
        "used": {"dim": 4096},
    }
    assert names[C.EDGE_INF].status == C.SKIPPED  # x * sigmoid(-inf) is NaN in torch too
    assert names["default"].max_abs_err < 1e-5
    perf = report.gate(C.GATE_PERFORMANCE)
    assert perf.status == C.SKIPPED and perf.reason == "skipped: no device"
    assert report.fitness is None
    assert report.fingerprint["harness_hash"] == report.harness_hash
    again = EvaluationReport.from_dict(json.loads(report.to_json()))
    assert again == EvaluationReport.from_dict(report.to_dict())


@pytest.mark.timeout(240)
@pytest.mark.parametrize(
    "name, workload",
    [
        (
            "softmax",
            {
                "cases": [
                    {"name": "a", "weight": 3},
                    {"name": "b", "overrides": {"batch_size": 5}, "weight": 1},
                ],
                "edge_cases": False,
            },
        ),
        ("rmsnorm", NO_EDGES),
        ("matmul", NO_EDGES),
    ],
)
def test_good_candidates_pass_and_compile_for_sm90(evaluator, name, workload):
    report = evaluator.evaluate(
        EvaluationRequest(
            read_fixture("problems", f"{name}.py"),
            read_fixture("candidates", f"{name}_good.py"),
            workload=workload,
            trials=2,
        )
    )
    assert report.verdict == C.ACCEPTED, report.reason
    compiled = report.gate(C.GATE_COMPILE).evidence
    assert compiled["mode"] == "aot"
    for art in compiled["artifacts"]:
        assert art["target"] == ["cuda", 90, 64]
        assert set(art["ir"]) == {"ttir", "ttgir", "llir", "ptx"}
        assert ".target sm_90" in art["ir"]["ptx"]
        assert art["cubin_bytes"] > 0 and len(art["cubin_sha256"]) == 64
        assert art["registers"] > 0 and art["spill_stores"] is not None


ADVERSARIAL = [n for n, (_, _, gate, _) in CASES.items() if gate != C.GATE_STATIC]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", ADVERSARIAL)
def test_adversarial_rejected_at_the_right_gate(evaluator, name):
    problem, source, gate, rule = CASES[name]
    report = evaluator.evaluate(
        EvaluationRequest(
            read_fixture("problems", f"{problem}.py"),
            source,
            workload=WITH_EDGES if name in NEEDS_EDGE_CASES else NO_EDGES,
            time_limit_s=10 if name == "hang_on_import" else 60,
        )
    )
    assert report.verdict == C.REJECTED
    assert report.failed_gate == gate, report.reason
    assert report.gate(gate).rule == rule, report.reason
    assert "\n" not in report.reason
    if name == "hang_on_import":  # the limit that struck is said
        assert "timed out during" in report.reason and "limit: 10 s" in report.reason


@pytest.mark.timeout(240)
def test_torch_behind_a_guard_no_case_takes_is_accepted_with_a_warning(evaluator):
    """torch.matmul on a K == 0 guard: no workload or edge case has K == 0 (the empty edge case
    empties M), so the runtime check sees no torch compute and the static finding stays a
    warning in the static gate's evidence."""
    report = evaluator.evaluate(
        EvaluationRequest(
            read_fixture("problems", "matmul.py"),
            read_fixture("candidates", "matmul_k0_guard.py"),
            workload=WITH_EDGES,
            trials=2,
        )
    )
    assert report.verdict == C.ACCEPTED, report.reason
    assert {c.name for c in report.cases} >= {C.EDGE_TAIL, C.EDGE_EMPTY, C.EDGE_NONCONTIGUOUS}
    assert all(c.status != C.FAILED for c in report.cases)
    static = report.gate(C.GATE_STATIC)
    assert static.status == C.PASSED
    assert [w["rule"] for w in static.evidence["warnings"]] == [C.RULE_TORCH_FALLBACK]
    assert "torch.matmul()" in static.evidence["warnings"][0]["message"]


@pytest.mark.timeout(180)
def test_evaluator_survives_a_crash(evaluator):
    _, crash, _, _ = CASES["segfault"]
    problem = read_fixture("problems", "silu.py")
    bad = evaluator.evaluate(EvaluationRequest(problem, crash, workload=NO_EDGES))
    assert bad.failed_gate == C.GATE_COMPILE and "SIGSEGV" in bad.reason
    good = evaluator.evaluate(
        EvaluationRequest(problem, read_fixture("candidates", "silu_good.py"), workload=NO_EDGES)
    )
    assert good.verdict == C.ACCEPTED, good.reason


@pytest.mark.timeout(120)
def test_workload_naming_an_unknown_constant_is_an_error(evaluator):
    with pytest.raises(WorkloadError, match=r"cases\[0\].overrides.nope"):
        evaluator.evaluate(
            EvaluationRequest(
                read_fixture("problems", "silu.py"),
                read_fixture("candidates", "silu_good.py"),
                workload={"cases": [{"name": "a", "overrides": {"nope": 1}}]},
            )
        )
