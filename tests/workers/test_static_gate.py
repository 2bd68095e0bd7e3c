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


def test_reference_op_names_are_fallbacks():
    problem = read_fixture("problems", "softmax.py")
    cand = read_fixture("candidates", "softmax_good.py").replace(
        "return out", "return x.softmax(1)"
    )
    assert check_static(cand, problem).rule == C.RULE_TORCH_FALLBACK
