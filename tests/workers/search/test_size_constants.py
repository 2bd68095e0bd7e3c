"""Constants the trace computes from the inputs' sizes (issue 11: a KL divergence's
``batchmean`` divided by the traced batch size, so a campaign at another size failed every
correctness check). Such a constant is found by tracing again at moved sizes and becomes a number
the candidate computes from the shapes at run time; a literal that happens to equal a size stays
a literal; a size-derived constant in a form the templates cannot compute is refused in words."""

from __future__ import annotations

import pytest

from tests.workers.search.child import check_rendered
from workers.search.trace import NoTemplate, trace_problem

_HEAD = "import math\n\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"
_TAIL = "\n\ndef get_init_inputs():\n    return []\n"
PROBLEMS = {
    "kl_batchmean": _HEAD
    + """batch = 4
classes = 24


class Model(nn.Module):
    def forward(self, predictions, targets):
        return F.kl_div(torch.log(predictions), targets, reduction="batchmean")


def get_inputs():
    return [torch.randn(batch, classes).softmax(-1), torch.randn(batch, classes).softmax(-1)]
"""
    + _TAIL,
    "scaled_by_head_dim": _HEAD
    + """batch = 4
seq = 6
dim = 16


class Model(nn.Module):
    def forward(self, q, k):
        return q * k / math.sqrt(q.size(-1)) + q.shape[-1] ** -0.5


def get_inputs():
    return [torch.randn(batch, seq, dim), torch.randn(batch, seq, dim)]
"""
    + _TAIL,
    "mean_by_hand": _HEAD
    + """rows = 4
cols = 20


class Model(nn.Module):
    def forward(self, x):
        return x.sum(dim=-1) / x.shape[-1]


def get_inputs():
    return [torch.randn(rows, cols)]
"""
    + _TAIL,
    "centred_by_hand": _HEAD
    + """rows = 4
cols = 20


class Model(nn.Module):
    def forward(self, x):
        return x - x.sum() / x.numel()


def get_inputs():
    return [torch.randn(rows, cols)]
"""
    + _TAIL,
    "literal_equal_to_a_size": _HEAD
    + """batch = 4
dim = 8


class Model(nn.Module):
    def forward(self, x):
        return x * 4.0 + x.sum(dim=-1, keepdim=True) / 8.0


def get_inputs():
    return [torch.randn(batch, dim)]
"""
    + _TAIL,
}

SIZES = {
    "kl_batchmean": [{}, {"batch": 7, "classes": 5}],
    "scaled_by_head_dim": [{}, {"dim": 40, "batch": 1}],
    "mean_by_hand": [{}, {"rows": 3, "cols": 33}],
    "centred_by_hand": [{}, {"rows": 3, "cols": 33}],
    "literal_equal_to_a_size": [{}, {"batch": 5, "dim": 3}],
}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return check_rendered(PROBLEMS, [{}], SIZES, str(tmp_path_factory.mktemp("sizes")))


@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_a_candidate_is_correct_at_other_sizes_than_the_traced_ones(name, results):
    got = results[name]
    assert len(got["errs"]) == 2 and all(err < 1e-5 for err in got["errs"]), got


def test_which_constants_are_computed_at_run_time(results):
    assert results["kl_batchmean"]["runtime"] == ["float(predictions.shape[0])"]
    assert sorted(results["scaled_by_head_dim"]["runtime"]) == [
        "1.0 / math.sqrt(q.shape[2])",
        "math.sqrt(q.shape[2])",
    ]
    assert results["mean_by_hand"]["runtime"] == ["float(x.shape[1])"]
    assert results["centred_by_hand"]["runtime"] == ["float(x.numel())"]
    assert results["literal_equal_to_a_size"]["runtime"] == []
    assert "input sizes" not in results["literal_equal_to_a_size"]["summary"]
    assert results["kl_batchmean"]["summary"].endswith("computed from the input sizes at run time")


def test_a_size_derived_constant_the_templates_cannot_compute_is_refused():
    source = PROBLEMS["centred_by_hand"].replace("x.sum() / x.numel()", "x.sum() / (3 * x.numel())")
    with pytest.raises(NoTemplate, match="computed from the input sizes"):
        trace_problem(source)
