"""Reductions over several trailing dimensions (issue 11, generality: "LayerNorm over the last
three dimensions" had no template): LayerNorm over (C, H, W) with its (C, H, W) weight and bias,
an instance norm (``nn.InstanceNorm2d``, and written out) over (H, W), sums, maxima and
variances over the last two or three dimensions. The rows are those dimensions flattened (a
contiguous tensor's layout already is), a weight of their shape a vector along the row; each is
correct on the interpreter for every strategy, at the traced sizes and at others, and what is
not such a graph is refused in words."""

from __future__ import annotations

import pytest

from tests.workers.search.child import check_chained, check_rendered
from workers.search.trace import NoTemplate, trace_problem

_HEAD = "import torch\nimport torch.nn as nn\n\nb = 3\nc = 4\nh = 5\nw = 6\n\n\n"
_INPUT = "\n\ndef get_inputs():\n    return [torch.randn(b, c, h, w)]\n"
PROBLEMS = {
    "layer_norm_chw": _HEAD
    + """class Model(nn.Module):
    def __init__(self, shape):
        super().__init__()
        self.ln = nn.LayerNorm(shape)
        with torch.no_grad():
            self.ln.weight.uniform_(0.5, 1.5)
            self.ln.bias.uniform_(-0.5, 0.5)

    def forward(self, x):
        return self.ln(x)
"""
    + _INPUT
    + "\n\ndef get_init_inputs():\n    return [(c, h, w)]\n",
    "instance_norm_written_out": _HEAD
    + """class Model(nn.Module):
    def forward(self, x):
        mean = x.mean(dim=(2, 3), keepdim=True)
        var = x.var(dim=(2, 3), keepdim=True, unbiased=False)
        return (x - mean) / torch.sqrt(var + 1e-5)
"""
    + _INPUT
    + "\n\ndef get_init_inputs():\n    return []\n",
    "instance_norm_module": _HEAD
    + """class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.inorm = nn.InstanceNorm2d(num_features=features)

    def forward(self, x):
        return self.inorm(x)
"""
    + _INPUT
    + "\n\ndef get_init_inputs():\n    return [c]\n",
    "sum_and_max_last_two": _HEAD
    + """class Model(nn.Module):
    def forward(self, x):
        return x.sum(dim=(-2, -1)), x.amax(dim=(2, 3), keepdim=True)
"""
    + _INPUT
    + "\n\ndef get_init_inputs():\n    return []\n",
    "std_last_three": _HEAD
    + """class Model(nn.Module):
    def forward(self, x):
        return torch.var(x, dim=(1, 2, 3))
"""
    + _INPUT
    + "\n\ndef get_init_inputs():\n    return []\n",
}

VARIANTS = [{}, {"strategy": "looped", "block_n": 16}, {"max_rows": 4, "tile": 256}]
SIZES = [{}, {"c": 2, "h": 3, "w": 33}, {"b": 1}]


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    sizes = dict.fromkeys(PROBLEMS, SIZES)
    return check_rendered(PROBLEMS, VARIANTS, sizes, str(tmp_path_factory.mktemp("trailing")))


@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_a_reduction_over_trailing_dimensions_is_a_correct_row_candidate(name, results):
    got = results[name]
    assert got["family"] == "row" and "dimensions (flattened)" in got["summary"], got
    assert len(got["errs"]) == 9
    for err in got["errs"]:
        assert isinstance(err, float) and err < 1e-4, got


def test_the_summary_says_how_many_dimensions_and_counts_the_weights():
    plan = trace_problem(PROBLEMS["layer_norm_chw"])
    assert "over the last 3 dimensions (flattened)" in plan.summary
    assert "2 vector(s)" in plan.summary


def test_an_instance_norm_with_a_weight_per_channel_reads_it_by_each_elements_channel():
    """The per-channel weight varies along the rows (one row per image and channel): the row
    kernels read it by each element's coordinates (its correctness at several sizes is in
    test_views_and_masks)."""
    source = PROBLEMS["instance_norm_module"].replace(
        "nn.InstanceNorm2d(num_features=features)", "nn.InstanceNorm2d(features, affine=True)"
    )
    plan = trace_problem(source)
    assert plan.extra.get("by_index") and plan.extra.get("red_from") == -2
    assert "weight [1, " in plan.summary and "broadcast" in plan.summary


def _forward(forward: str) -> str:
    return (
        _HEAD
        + f"class Model(nn.Module):\n    def forward(self, x):\n        return {forward}\n"
        + _INPUT
        + "\n\ndef get_init_inputs():\n    return []\n"
    )


# Reductions over two spans of trailing dimensions (refused in one kernel): a chain, a kernel
# per span and one for the arithmetic after.
SPANS = {
    "two-spans": _forward("x.sum(dim=(2, 3)) + x.sum(dim=3).sum(dim=2)"),
    "span-and-last": _forward(
        "x - x.mean(dim=(1, 2), keepdim=True) + x.mean(dim=-1, keepdim=True)"
    ),
}


def test_reductions_over_two_spans_are_a_chain(tmp_path):
    check_chained(SPANS, str(tmp_path), dict.fromkeys(SPANS, [{}, {"c": 2, "w": 9}]))


@pytest.mark.parametrize(
    "forward, says",
    [
        ("x.sum(dim=(0, 2)).sum() + x.sum(dim=(1, 3)).sum()", "reductions over dims"),
    ],
    ids=["two-sets-apart"],
)
def test_reductions_over_dimensions_that_are_not_one_trailing_span_are_refused(forward, says):
    with pytest.raises(NoTemplate, match=says):
        trace_problem(_forward(forward))


def test_the_per_case_rows_are_the_flattened_trailing_dimensions():
    """The per-case launch tables are keyed by (M, N) as the candidate sees them: M rows of
    c·h·w elements here, not rows of w."""
    from workers.search.trace import case_rows

    cases = [{"name": "traced", "overrides": {}}, {"name": "wide", "overrides": {"w": 33}}]
    rows = case_rows(PROBLEMS["layer_norm_chw"], 0, cases, [-3])
    assert rows == {"traced": [3, 120, "float32"], "wide": [3, 660, "float32"]}
