"""Reductions over a dimension other than the last (issue 11, generality): sums and means over
a middle dimension, a max over the first, a norm over the channels of an NCHW tensor with
per-channel weights, a softmax over dim 1. Each is a row family candidate whose rows are
strided; each is correct on the interpreter for every strategy, and a weight that varies along
another dimension is refused in words."""

from __future__ import annotations

import json

import pytest

from tests.workers.search.child import check_chained, check_rendered, run_child
from workers.search.generators.template import row_policy
from workers.search.trace import trace_problem

_HEAD = "import torch\nimport torch.nn as nn\n\n\n"
PROBLEMS = {
    "sum_dim1_keepdim": _HEAD
    + """class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.sum(x, dim=self.dim, keepdim=True)


def get_inputs():
    return [torch.randn(3, 20, 7)]


def get_init_inputs():
    return [1]
""",
    "mean_dim1": _HEAD
    + """class Model(nn.Module):
    def forward(self, x):
        return torch.mean(x, dim=1)


def get_inputs():
    return [torch.randn(3, 20, 7)]


def get_init_inputs():
    return []
""",
    "amax_dim0": _HEAD
    + """class Model(nn.Module):
    def forward(self, x):
        return x.amax(dim=0)


def get_inputs():
    return [torch.randn(20, 7)]


def get_init_inputs():
    return []
""",
    "rms_norm_channels": _HEAD
    + """class Model(nn.Module):
    def __init__(self, c: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(c))

    def forward(self, x):
        rms = torch.sqrt(torch.mean(x ** 2, dim=1, keepdim=True) + 1e-5)
        return x / rms * self.weight.view(1, -1, 1, 1)


def get_inputs():
    return [torch.randn(2, 6, 5, 4)]


def get_init_inputs():
    return [6]
""",
    "max_values_dim1": _HEAD
    + """class Model(nn.Module):
    def forward(self, x):
        return torch.max(x, dim=1)[0]


def get_inputs():
    return [torch.randn(3, 20, 7)]


def get_init_inputs():
    return []
""",
    "l2_normalise_dim1": _HEAD
    + """class Model(nn.Module):
    def forward(self, x):
        return x / torch.norm(x, p=2, dim=1, keepdim=True)


def get_inputs():
    return [torch.randn(3, 20, 7)]


def get_init_inputs():
    return []
""",
    "p_norms_dim1": _HEAD
    + """class Model(nn.Module):
    def forward(self, x):
        a = torch.linalg.vector_norm(x, ord=1, dim=1)
        b = torch.linalg.vector_norm(x, ord=float("inf"), dim=1)
        c = torch.linalg.vector_norm(x, ord=3, dim=1)
        return a + b * c


def get_inputs():
    return [torch.randn(3, 20, 7)]


def get_init_inputs():
    return []
""",
    "argmax_dim1_and_max_indices": _HEAD
    + """class Model(nn.Module):
    def forward(self, x):
        values, indices = torch.max(x, dim=1)
        return torch.argmin(x, dim=1), indices, values


def get_inputs():
    return [torch.randn(3, 20, 7).round()]


def get_init_inputs():
    return []
""",
    "softmax_dim1": _HEAD
    + """class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)


def get_inputs():
    return [torch.randn(2, 9, 5)]


def get_init_inputs():
    return []
""",
}

_CHECK = r"""
import json, sys, torch
from workers.contract import problem as P
from workers.search.generators.template import DEFAULTS, render
from workers.search.trace import trace_problem

problems, folder = json.loads(sys.argv[1]), sys.argv[2]
table = {"42,20,float32": [0, 1, 8, 1, 2, 3, 1], "21,20,float32": [1, 2, 32, 1, 1, 0, 0]}
# The last: one pass over two chunks (16 + 4 lanes for rows of 20) along strided rows.
variants = [{}, {"strategy": "looped", "block_n": 4}, {"max_rows": 4, "tile": 64},
            {"max_rows": 64, "tile": 8192, "vec": 32, "stages": 1},
            {"max_rows": 32, "tile": 4096, "vec": 16, "stages": 1, "static": 1},
            {"strategy": "looped", "block_n": 4, "max_rows": 64, "tile": 64, "static": 1},
            {"table": table}, {"table": {"21,20,float32": [2, 2, 16, 1, 1, 0, 1]}}]
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
        got = list(got) if isinstance(got, tuple) else [got]
        want = list(want) if isinstance(want, tuple) else [want]
        err = 0.0
        for g, w in zip(got, want):
            if g.shape != w.shape or g.dtype != w.dtype:
                err = f"variant {i}: {tuple(g.shape)} {g.dtype} != {tuple(w.shape)} {w.dtype}"
                break
            err = max(err, float((g.double() - w.double()).abs().max()))
        errs.append(err)
    out[name] = {"family": plan.family, "red_dim": plan.extra.get("red_dim"), "errs": errs}
print("RESULTS" + json.dumps(out))
"""


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return run_child(_CHECK, json.dumps(PROBLEMS), str(tmp_path_factory.mktemp("middle")))


@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_a_reduction_over_a_middle_dimension_is_a_correct_row_candidate(name, results):
    got = results[name]
    assert got["family"] == "row" and got["red_dim"] is not None and got["red_dim"] < -1
    for err in got["errs"]:
        assert isinstance(err, float) and err < 1e-5, got


def test_the_first_seeds_of_a_middle_dimension_are_wide_tiles_specialised_to_the_shape():
    """Their loads are as wide as the tile's rows (32 or 64, where the fixed seeds hold 16),
    and the first two compile each shape's sizes in (N, M and K constants): on an H100 those
    launches were at compile's time on KernelBench 47 and the same with run-time sizes 2%
    behind. A last-dimension reduction gets none of them."""
    from workers.search.generators.base import GenerationContext
    from workers.search.generators.template import TemplateGenerator

    def first(src):
        return TemplateGenerator().propose(GenerationContext(src, platform="interpret"), 3)

    seeds = first(PROBLEMS["mean_dim1"])
    m, n = 128 * 255, 128  # KernelBench 47's rows at the bench's sizes
    launches = [row_policy(s.params, m, n, strided=True)[:5] for s in seeds]
    assert launches == [[1, 32, 128, 8, 1], [1, 64, 128, 16, 1], [1, 64, 128, 8, 1]]
    assert [s.params["static"] for s in seeds] == [1, 1, 0]
    # A looped kernel there takes as many rows; along the last dimension it keeps one.
    looped = {**seeds[0].params, "strategy": "looped", "block_n": 64}
    assert row_policy(looped, m, n, strided=True)[:2] == [0, 32]
    assert row_policy(looped, m, n)[:2] == [0, 1]
    last = first(PROBLEMS["mean_dim1"].replace("dim=1", "dim=-1"))[0]
    assert last.params["max_rows"] == 16 and last.params["static"] == 0


def test_the_summary_says_which_dimension():
    plan = trace_problem(PROBLEMS["rms_norm_channels"])
    assert "dimension 1 of 4" in plan.summary


def test_indices_of_a_max_used_in_further_arithmetic_are_exact(tmp_path):
    """The index of each column's max over dimension 1, as a float and scaled (refused in words
    before): the same kernel, the index an exact whole number."""
    problems = {
        "index-float": PROBLEMS["max_values_dim1"].replace("[0]", "[1].float()"),
        "index-scaled": PROBLEMS["max_values_dim1"].replace("[0]", "[1] / x.shape[1] + x.mean(1)"),
    }
    results = check_rendered(problems, [{}], {n: [{}] for n in problems}, str(tmp_path))
    for name, got in results.items():
        assert "dimension 1 of 3" in got["summary"], (name, got["summary"])
        assert got["errs"] and all(err == 0.0 or err < 1e-6 for err in got["errs"]), got


def test_a_weight_along_another_dimension_is_a_chain(tmp_path):
    """A weight along the last dimension beside a softmax over dim 1 (refused in one kernel):
    the softmax is written, then weighted (test_chain.py)."""
    src = PROBLEMS["softmax_dim1"].replace(
        "    def forward(self, x):\n        return torch.softmax(x, dim=1)",
        "    def __init__(self):\n        super().__init__()\n"
        "        self.weight = nn.Parameter(torch.randn(5))\n\n"
        "    def forward(self, x):\n        return torch.softmax(x, dim=1) * self.weight",
    )
    check_chained({"softmax-dim1-weighted": src}, str(tmp_path))


def test_a_sum_over_the_ones_a_keepdim_reduction_left_drops_them(tmp_path):
    """KernelBench L2 42's tail: a log-sum-exp over the channels with keepdim, then a sum over
    the two dimensions of size 1 left. The chain returned (B, 1, 1) where the reference returns
    (B, 1), and the gate rejected every candidate on shape."""
    tail = (
        _HEAD
        + """batch_size = 4
channels = 8


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(channels, 1, 1))

    def forward(self, x):
        x = torch.mean(x, dim=(2, 3), keepdim=True) + self.bias
        x = torch.logsumexp(x, dim=1, keepdim=True)
        return torch.sum(x, dim=(2, 3)) * 10.0


def get_inputs():
    return [torch.rand(batch_size, channels, 6, 5)]


def get_init_inputs():
    return []
"""
    )
    check_chained({"tail": tail}, str(tmp_path), {"tail": [{}, {"batch_size": 3, "channels": 5}]})
