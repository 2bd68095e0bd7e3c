"""Reductions over the whole tensor (issue 11, generality): losses (MSE, hinge), a global norm
that scales every element, sums and maxima over every dimension with keepdim, and a reduction
of a reshaped view. Each is a row candidate with one row of every element, correct on the
interpreter for the one-pass and the looped kernel; a weight per column (a hinge loss's targets)
reads weight i mod its length; mixing a whole-tensor reduction with one over a dimension, or a
weight along another dimension, is refused in words."""

from __future__ import annotations

import json

import pytest

from tests.workers.search.child import check_chained, run_child
from workers.search.trace import NoTemplate, trace_problem

_HEAD = "import torch\nimport torch.nn as nn\n\n\n"
_TAIL = "\n\ndef get_init_inputs():\n    return []\n"


def _problem(forward: str, inputs: str) -> str:
    return (
        _HEAD
        + "class Model(nn.Module):\n    def forward(self, *args):\n"
        + "".join(f"        {line}\n" for line in forward.splitlines())
        + f"\n\ndef get_inputs():\n    return [{inputs}]\n"
        + _TAIL
    ).replace(
        "def forward(self, *args)",
        "def forward(self, x, y)" if "y" in forward else "def forward(self, x)",
    )


PROBLEMS = {
    "mse_loss": _problem("return torch.mean((x - y) ** 2)", "torch.randn(5, 7, 3), "
                         "torch.randn(5, 7, 3)"),
    "hinge_loss": _problem("return torch.mean(torch.clamp(1 - x * y, min=0))",
                           "torch.randn(33, 9), torch.randn(33, 9)"),
    "frobenius_normalise": _problem("return x / torch.norm(x, p='fro')",
                                    "torch.randn(2, 3, 5, 4)"),
    "sum_and_max_keepdim": _problem(
        "return x.sum(dim=(0, 1), keepdim=True) + x.amax(dim=(0, 1), keepdim=True)",
        "torch.randn(6, 10)"),
    "argmax_flat_with_ties": _problem("return torch.argmax(x)", "torch.randn(6, 10).round()"),
    "sum_of_a_view": _problem("return (x.view(-1, 4) * 2).sum()", "torch.randn(6, 10)"),
    # PyTorch's own losses (KernelBench's HuberLoss is smooth_l1_loss), through their ATen ops
    "smooth_l1_loss": _problem("return torch.nn.functional.smooth_l1_loss(x, y, beta=0.5)",
                               "torch.randn(6, 10), torch.randn(6, 10)"),
    "huber_loss_sum": _problem(
        "return torch.nn.functional.huber_loss(x, y, delta=2.0, reduction='sum')",
        "torch.randn(6, 10) * 3, torch.randn(6, 10)"),
    "mse_loss_functional": _problem("return torch.nn.functional.mse_loss(x, y)",
                                    "torch.randn(6, 10), torch.randn(6, 10)"),
    # KernelBench's HingeLoss: one target per column, the same for every row
    "hinge_loss_vector_targets": _problem("return torch.mean(torch.clamp(1 - x * y, min=0))",
                                          "torch.randn(7, 9), torch.randn(9).sign()"),
    "kl_div_sum": _problem("return torch.nn.functional.kl_div(x, y.abs(), reduction='sum')",
                           "torch.randn(6, 10), torch.randn(6, 10)"),
}  # fmt: skip

_CHECK = r"""
import json, sys, torch
from workers.contract import problem as P
from workers.search.generators.template import DEFAULTS, render
from workers.search.trace import trace_problem

problems, folder = json.loads(sys.argv[1]), sys.argv[2]
table = {"1,60,float32": [2, 1, 32, 1, 1, 0, 0, 1]}  # two chunks, compiled for the shape
variants = [{}, {"strategy": "looped", "block_n": 16}, {"table": table}]
out = {}
for name, src in problems.items():
    plan = trace_problem(src)
    errs = []
    for i, v in enumerate(variants):
        cand = P.load_module(render(plan, {**DEFAULTS["row"], **v}), f"c_{name}_{i}", folder)
        prob = P.load_module(src, f"p_{name}_{i}", folder)
        _, ref, new = P.make_models(prob, cand, {}, torch.float32, 0, "cpu", None)
        x = P.make_inputs(prob, {}, torch.float32, 0, "cpu")
        got, want = new(*x), ref(*x)
        if got.shape != want.shape or got.dtype != want.dtype:
            errs.append(f"variant {i}: shape {tuple(got.shape)} != {tuple(want.shape)}")
        else:
            errs.append(float((got - want).abs().max()))
    out[name] = {"family": plan.family, "full": plan.extra.get("full"), "errs": errs,
                 "summary": plan.summary}
print("RESULTS" + json.dumps(out))
"""


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return run_child(_CHECK, json.dumps(PROBLEMS), str(tmp_path_factory.mktemp("full")))


@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_a_reduction_over_the_whole_tensor_is_a_correct_row_candidate(name, results):
    got = results[name]
    assert got["family"] == "row" and got["full"], got
    assert "the whole tensor" in got["summary"]
    for err in got["errs"]:
        assert isinstance(err, float) and err < 1e-5, got


@pytest.mark.parametrize(
    "forward, match",
    [
        ("return x.sum() + x.sum(-1).mean()", "over the whole tensor and over a dimension"),
        # the total of the rows' sums and the sum of every element: two folds, added
        ("return x.sum(-1).sum() + x.sum()", "arithmetic on a reduction over every row"),
        ("return x.view(-1, 4).sum(-1)", "a view that changes the row layout"),
    ],
)
def test_mixed_reductions_are_refused_in_words(forward, match):
    with pytest.raises(NoTemplate, match=match):
        trace_problem(_problem(forward, "torch.randn(6, 10)"))


def test_a_weight_along_another_dimension_in_a_whole_tensor_reduction_is_a_chain(tmp_path):
    """A weight per column reads weight i mod its length (a hinge loss's targets); one per row
    of the flattened tensor has no such form in one kernel (it was refused): the weighted
    values are written first, then summed (test_chain.py)."""
    src = _problem("return (x * self.w.view(-1, 1)).sum()", "torch.randn(6, 10)").replace(
        "class Model(nn.Module):\n",
        "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.w = nn.Parameter(torch.randn(6))\n\n",
    )
    check_chained({"weighted-rows-sum": src}, str(tmp_path))


_EMPTY = r"""
import json, sys, torch
from workers.contract import problem as P
from workers.search.generators.template import DEFAULTS, render
from workers.search.trace import trace_problem

src, folder = sys.argv[1], sys.argv[2]
cand = P.load_module(render(trace_problem(src), DEFAULTS["row"]), "c_empty", folder)
prob = P.load_module(src, "p_empty", folder)
_, ref, new = P.make_models(prob, cand, {}, torch.float32, 0, "cpu", None)
out = {}
for shape in [(0, 5), (4, 0)]:
    x = torch.zeros(shape)
    out[str(shape)] = [[[list(t.shape), t.tolist()] for t in model(x)] for model in (new, ref)]
print("RESULTS" + json.dumps(out))
"""


@pytest.mark.parametrize(
    "forward", ["return x.mean(), x.sum()", "return x.sum(-1), x.mean(-1, keepdim=True)"]
)
def test_empty_inputs_give_the_reductions_identity(forward, tmp_path):
    """A mean over nothing is NaN and a sum 0, per row and over the whole tensor, as torch
    says: the outputs are written, not left as whatever memory held."""
    got_by_shape = run_child(_EMPTY, _problem(forward, "torch.randn(4, 5)"), str(tmp_path))
    for shape, (got, want) in got_by_shape.items():
        assert json.dumps(got) == json.dumps(want), (shape, got, want)


_LONG_ROW = r"""
import json, sys, torch
from workers.contract import problem as P
from workers.search.generators.template import DEFAULTS, render
from workers.search.trace import trace_problem

src, folder = sys.argv[1], sys.argv[2]
plan = trace_problem(src)
# A candidate forced to one pass (KernelBench 94 on the H200 drew one): its one row is every
# element, 2^21 of them, past Triton's largest tile (2^20).
p = {**DEFAULTS["row"], "strategy": "one_pass", "max_one_pass": 16384, "tile": 8192}
cand = P.load_module(render(plan, p), "c_long", folder)
prob = P.load_module(src, "p_long", folder)
_, ref, new = P.make_models(prob, cand, {}, torch.float32, 0, "cpu", None)
x = P.make_inputs(prob, {}, torch.float32, 0, "cpu")
got, want = new(*x), ref(*x)
print("RESULTS" + json.dumps({"err": float((got - want).abs().max() / want.abs())}))
"""


def test_a_one_pass_candidate_on_a_row_past_the_largest_tile_runs_as_auto(tmp_path):
    """On the H200 a row candidate forced to one pass failed to compile on KernelBench 94 (MSE
    over 2048 x 2048): its tile was the whole 4M-element row, past Triton's limit of 2^20
    elements ("numel exceeds triton maximum tensor numel"). Such a row now takes the policy of
    "auto" (split into segments or looped), and the candidate is correct."""
    src = _problem("return torch.mean((x - y) ** 2)",
                   "torch.randn(1024, 2048), torch.randn(1024, 2048)")  # fmt: skip
    out = run_child(_LONG_ROW, src, str(tmp_path))
    assert out["err"] < 1e-5, out
