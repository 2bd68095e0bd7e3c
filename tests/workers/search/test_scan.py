"""Cumulative sums and products along any one dimension (issue 11: "cumulative sums" had no
template; KernelBench's cumsum, cumprod, reversed cumsum and masked cumsum): a ``scan`` family
candidate walks each row in blocks and carries its running total, correct for one block and for
many, from either end, with a boolean mask, at the traced sizes and at others. What is not such
a graph is refused in words."""

from __future__ import annotations

import json

import pytest

from tests.workers.search.child import check_chained, check_rendered, run_child
from workers.search.trace import NoTemplate, trace_problem

_HEAD = "import torch\nimport torch.nn as nn\n\nrows = 3\nwidth = 50\n\n\n"
_TAIL = "\n\ndef get_init_inputs():\n    return []\n"


def _problem(forward: str, inputs: str = "[torch.rand(rows, width)]", args: str = "x") -> str:
    return (
        _HEAD
        + f"class Model(nn.Module):\n    def forward(self, {args}):\n        return {forward}\n"
        + f"\n\ndef get_inputs():\n    return {inputs}\n"
        + _TAIL
    )


PROBLEMS = {
    "cumsum": _problem("torch.cumsum(x, dim=1)"),
    "cumprod_of_pointwise": _problem("torch.cumprod(1.0 + 0.01 * x, dim=-1) * 2.0"),
    "reversed": _problem("torch.cumsum(x.flip(1), dim=1).flip(1) - x"),
    "masked": _problem(
        "torch.cumsum(x * mask, dim=-1)",
        "[torch.rand(rows, width), torch.rand(rows, width) > 0.5]",
        "x, mask",
    ),
    "three_d": _problem("torch.cumsum(torch.sigmoid(x), dim=2)", "[torch.rand(2, rows, width)]"),
    "middle": _problem("torch.cumsum(x * 2.0, dim=1)", "[torch.rand(2, width, rows)]"),
    "first_reversed": _problem(
        "x.flip(0).cumprod(0).flip(0)", "[torch.rand(width, rows, 2) * 0.1 + 0.95]"
    ),
    # Exclusive: a zero column, then the cumsum of all but the last column (KernelBench 92's
    # way, through select and narrow, and through slices).
    "exclusive": _problem(
        "torch.cat((torch.zeros_like(x.select(1, 0).unsqueeze(1)), "
        "torch.cumsum(x.narrow(dim=1, start=0, length=x.size(1) - 1), dim=1)), dim=1)"
    ),
    "exclusive_sliced": _problem(
        "torch.cat([torch.zeros_like(x[:, :1]), torch.cumsum(x[:, :-1], dim=-1)], -1) * 2.0"
    ),
    # Running maxima and minima (their values) and a running log-sum-exp, from either end.
    "cummax": _problem("torch.cummax(x - 0.5, dim=1).values * 2.0"),
    "cummin_reversed": _problem("torch.cummin(x.flip(-1), dim=-1)[0].flip(-1)"),
    "logcumsumexp": _problem(
        "torch.logcumsumexp(x * 20.0 - 10.0, dim=-1)", "[torch.randn(rows, width)]"
    ),
}

# {"block": 16}: few rows of several blocks, so the rows are cut into segments (two launches);
# segments 1: one program walks the whole row; 5: more segments than some rows have blocks.
VARIANTS = [
    {},
    {"block": 16},
    {"block": 128, "rows": 4, "warps": 2},
    {"block": 16, "segments": 1},
    {"block": 16, "segments": 5, "rows": 2},
]
SIZES = [{}, {"width": 1, "rows": 5}, {"width": 300}]


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    sizes = dict.fromkeys(PROBLEMS, SIZES)
    return check_rendered(PROBLEMS, VARIANTS, sizes, str(tmp_path_factory.mktemp("scan")))


@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_a_cumulative_scan_is_a_correct_candidate_in_one_block_and_many(name, results):
    got = results[name]
    assert got["family"] == "scan", got
    assert len(got["errs"]) == 15
    for err in got["errs"]:
        assert isinstance(err, float) and err < 1e-5, got


def test_the_summary_says_which_scan_and_from_which_end(results):
    assert results["cumsum"]["summary"] == "cumsum along the last dimension"
    assert (
        results["reversed"]["summary"] == "cumsum along the last dimension, from the end of the row"
    )
    assert "mask a boolean mask" in results["masked"]["summary"]
    assert results["middle"]["summary"] == "cumsum along dimension 1 of 3"
    assert results["first_reversed"]["summary"] == (
        "cumprod along dimension 0 of 3, from the end of the row"
    )
    assert results["exclusive"]["summary"] == "exclusive cumsum along the last dimension"
    assert results["cummin_reversed"]["summary"] == (
        "cummin along the last dimension, from the end of the row"
    )


# A scan beside a reduction, and an exclusive cumsum two columns back (each refused in one
# kernel): chains, the scan one kernel of them.
SCAN_CHAINS = {
    "with-a-reduction": _problem("torch.cumsum(x, 1) / x.sum(dim=1, keepdim=True)"),
    "two-columns-back": _problem(
        "torch.cat([torch.zeros_like(x[:, :2]), torch.cumsum(x[:, :-2], 1)], 1)"
    ),
}


def test_a_scan_with_more_than_one_kernel_holds_is_a_chain(tmp_path):
    check_chained(SCAN_CHAINS, str(tmp_path), dict.fromkeys(SCAN_CHAINS, [{}]))


@pytest.mark.parametrize(
    "forward, says",
    [
        ("torch.cummax(x, 1).indices * 1.0", "the indices of cummax"),
    ],
    ids=["cummax-indices"],
)
def test_what_is_not_one_scan_between_pointwise_ops_is_refused(forward, says):
    with pytest.raises(NoTemplate, match=says):
        trace_problem(_problem(forward))


# Not one scan between pointwise ops (they were refused in words), each is a chain now: the
# first scan, or the columns a slice or a flip moves, written, then the rest.
CHAINED = {
    "two-dimensions": "torch.cumsum(x, 0) * torch.cumsum(x, 1)",
    "two-scans": "torch.cumsum(x, 1) + torch.cumprod(x, 1)",
    "no-flip-back": "torch.cumsum(x.flip(1), 1)",
    "scan-of-a-suffix": "torch.cumsum(x[:, 1:], 1)",
    "cumprod-of-a-prefix": "torch.cumprod(x[:, :-1], 1)",
}


def test_scans_one_kernel_does_not_hold_are_chains_that_compute_the_reference(tmp_path):
    check_chained({k: _problem(f) for k, f in CHAINED.items()}, str(tmp_path))


@pytest.mark.timeout(300)
def test_a_cumprod_that_overflows_float32_is_accepted_where_a_correct_one_would_be(evaluator):
    """On the interpreter the reference runs in float64, where the product of large values
    stays finite long after float32's overflows: the correctness gate compares where the
    output's dtype can hold the value (inf beyond it), so a correctly rounded candidate passes
    the large-values case (it was rejected there: "inf/NaN positions differ")."""
    from workers import constants as C
    from workers.evaluate import EvaluationRequest
    from workers.search.generators.template import DEFAULTS, render

    source = _problem("torch.cumprod(x, dim=-1)")
    candidate = render(trace_problem(source), DEFAULTS["scan"])
    workload = {"cases": [{"name": "default"}], "edge_cases": True}
    report = evaluator.evaluate(EvaluationRequest(source, candidate, workload=workload))
    assert report.verdict == C.ACCEPTED, report.reason
    assert report.case(C.EDGE_LARGE_VALUES).status == C.PASSED


_AOT = r"""
import json, sys
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from workers.contract import problem as P
from workers.search.generators.template import DEFAULTS, render
from workers.search.trace import trace_problem

out = {}
for name, src in json.loads(sys.argv[1]).items():
    module = P.load_module(render(trace_problem(src), DEFAULTS["scan"]), f"s_{name}", sys.argv[2])
    fn = module._ke_scan
    sizes = []
    # each phase with a row length known at run time and 64-bit offsets, then the whole row
    # with its length a constant and 32-bit offsets (the default where they fit)
    for phase, nc, i32 in ((0, 0, False), (1, 0, False), (2, 0, False), (0, 3000, True)):
        ce = {"ROWS": 1, "BLOCK": 1024, "PHASE": phase, "SP": 16, "NC": nc, "I32": i32}
        sig = {a: ("*fp32" if a.endswith("_ptr") else "i32") for a in fn.arg_names if a not in ce}
        sig.update({c: "constexpr" for c in ce})
        kernel = triton.compile(ASTSource(fn=fn, signature=sig, constexprs=ce),
                                target=GPUTarget("cuda", 90, 64), options={"num_warps": 4})
        sizes.append(len(kernel.asm["ptx"]))
    out[name] = sizes
print("RESULTS" + json.dumps(out))
"""


def test_every_phase_of_the_scan_compiles_for_sm90(tmp_path):
    """The segments' two launches and the whole-row one, for a sum, a product, a reversed
    scan and the scans through tl.associative_scan (a running max, a log-sum-exp), through the
    GPU compiler (stricter than the interpreter about what a branch defines)."""
    names = ("cumsum", "cumprod_of_pointwise", "reversed", "masked", "exclusive", "cummax",
             "cummin_reversed", "logcumsumexp")  # fmt: skip
    got = run_child(_AOT, json.dumps({n: PROBLEMS[n] for n in names}), str(tmp_path),
                    interpret=False)  # fmt: skip
    assert sorted(got) == sorted(names)
    assert all(len(v) == 4 and min(v) > 1000 for v in got.values()), got


_INFINITE = r"""
import json, sys, torch
from workers.contract import problem as P
from workers.search.generators.template import DEFAULTS, render
from workers.search.trace import trace_problem

src = sys.argv[1]
plan = trace_problem(src)
out = []
for params in [{}, {"block": 16}]:
    cand = P.load_module(render(plan, {**DEFAULTS["scan"], **params}), f"c{len(out)}", sys.argv[2])
    prob = P.load_module(src, f"p{len(out)}", sys.argv[2])
    _, ref, new = P.make_models(prob, cand, {}, torch.float32, 0, "cpu", None)
    x = torch.rand(3, 50)
    x[0, 3], x[1, 20], x[2, 49] = float("inf"), float("-inf"), float("inf")
    with torch.no_grad():
        got, want = new(x), ref(x)
    out.append({"same": bool(torch.equal(got.isnan(), want.isnan())),
                "close": bool(torch.allclose(got, want, equal_nan=True))})
print("RESULTS" + json.dumps(out))
"""


def test_an_exclusive_cumsum_is_finite_where_only_its_own_column_is_infinite(tmp_path):
    """The exclusive sum at an infinite column is the sum before it, finite: a kernel that took
    the inclusive sum less the column gave inf - inf = NaN there (the correctness gate's
    infinities case rejected it). It reads the row one column back instead."""
    got = run_child(_INFINITE, PROBLEMS["exclusive"], str(tmp_path))
    assert got == [{"same": True, "close": True}] * 2, got
