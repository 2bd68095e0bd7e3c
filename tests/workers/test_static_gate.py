import pytest

from tests.workers.conftest import read_fixture
from tests.workers.fixtures.adversarial import CASES
from workers import constants as C
from workers.gates.static import check_static

GOOD = ["silu_good", "softmax_good", "rmsnorm_good", "matmul_good"]


@pytest.mark.parametrize("name", GOOD)
def test_good_candidates_pass_static(name):
    result = check_static(read_fixture("candidates", f"{name}.py"))
    assert result.passed, result.reason
    assert result.kernels
    assert not result.warnings


@pytest.mark.parametrize(
    "name", [n for n, (_, _, gate, _) in CASES.items() if gate == C.GATE_STATIC]
)
def test_static_adversarial_rejected_with_rule(name):
    problem, source, _, rule = CASES[name]
    result = check_static(source, read_fixture("problems", f"{problem}.py"))
    assert not result.passed
    assert result.rule == rule, result.reason
    assert f"[{rule}]" in result.reason


@pytest.mark.parametrize(
    "source, rule",
    [
        ("def f(:\n", C.RULE_SYNTAX),
        ("import triton\n\n@triton.jit\ndef k(x):\n    pass\n", C.RULE_NO_MODEL_NEW),
        ("class ModelNew:\n    pass\n", C.RULE_NO_KERNEL),
    ],
)
def test_structure_rules(source, rule):
    assert check_static(source).findings[0].rule == rule


def test_kernel_defined_but_never_launched():
    source = "import triton\n\n@triton.jit\ndef k(x):\n    pass\n\nclass ModelNew:\n    pass\n"
    assert check_static(source).rule == C.RULE_KERNEL_NOT_LAUNCHED


def test_reference_op_names_are_warnings():
    problem = read_fixture("problems", "softmax.py")
    cand = read_fixture("candidates", "softmax_good.py").replace(
        "return out", "return x.softmax(1)"
    )
    result = check_static(cand, problem)
    assert result.passed, result.reason
    assert [w.rule for w in result.warnings] == [C.RULE_TORCH_FALLBACK]
    assert ".softmax()" in result.warnings[0].message


def test_torch_behind_a_guard_passes_with_a_warning():
    """The issue's case: torch runs only on a K == 0 guard that no case takes. The static gate
    cannot tell, so it warns and leaves the decision to the runtime torch-op check."""
    source = read_fixture("candidates", "matmul_k0_guard.py")
    result = check_static(source, read_fixture("problems", "matmul.py"))
    assert result.passed, result.reason
    line = source.splitlines().index("            return torch.matmul(A, B)") + 1
    assert result.evidence["findings"] == []
    assert result.evidence["warnings"] == [
        {
            "rule": C.RULE_TORCH_FALLBACK,
            "line": line,
            "message": "calls torch.matmul() outside a kernel: rejected at run time if it does "
            "work on any case",
        }
    ]
    assert result.reason.startswith("1 Triton kernel(s): matmul_kernel; warning [torch_fallback]")


@pytest.mark.parametrize("name", ["torch_fallback", "matmul_operator", "tensor_method_fallback"])
def test_plain_torch_fallbacks_warn_and_are_left_to_the_runtime_check(name):
    problem, source, gate, rule = CASES[name]
    result = check_static(source, read_fixture("problems", f"{problem}.py"))
    assert result.passed and result.warnings, result.reason
    assert {w.rule for w in result.warnings} == {C.RULE_TORCH_FALLBACK}
    assert (gate, rule) == (C.GATE_COMPILE, C.RULE_TORCH_COMPUTE)


def test_warnings_do_not_hide_a_rejection():
    _, source, _, _ = CASES["try_except"]  # torch.nn.functional.silu in the except branch
    result = check_static(source, read_fixture("problems", "silu.py"))
    assert not result.passed and result.rule == C.RULE_TRY_EXCEPT
    assert result.evidence["warnings"][0]["rule"] == C.RULE_TORCH_FALLBACK
