"""Inputs read through a transpose or permute (issue 11, "generality"): ``x.transpose(1, 2) +
y``, ``x * w.t()``, a permuted copy, pointwise ops before the transpose, a softmax over a
transposed tensor, a layer norm over the channels of an NLC tensor read as NCL. Each gets a
candidate that reads the input through the permuted view's strides (no copy) and computes the
reference on the interpreter at the traced sizes and at others, odd and of size 1 included."""

from __future__ import annotations

import pytest

from tests.workers.search.child import check_chained, check_rendered
from workers.search.trace import NoTemplate, trace_problem


def _problem(forward: str, inputs: str, args: str = "x, y") -> str:
    return (
        "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"
        "b = 3\nt = 10\nd = 24\n\n\n"
        f"class Model(nn.Module):\n    def forward(self, {args}):\n        return {forward}\n\n\n"
        f"def get_inputs():\n    return [{inputs}]\n\n\n"
        "def get_init_inputs():\n    return []\n"
    )


TRANSPOSED = "torch.randn(b, t, d), torch.randn(b, d, t)"
ELEMENTWISE = {
    "transpose-add": (_problem("x.transpose(1, 2) + y", TRANSPOSED), "x read permuted (0, 2, 1)"),
    "permuted-copy": (
        _problem("x.permute(2, 0, 1).contiguous()", "torch.randn(b, t, d)", "x"),
        "x read permuted (2, 0, 1)",
    ),
    "weight-transposed": (
        _problem("torch.sigmoid(x) * y.t()", "torch.randn(t, d), torch.randn(d, t)"),
        "y read permuted (1, 0)",
    ),
    "both-transposed": (
        _problem(
            "x.transpose(0, 1) - y.transpose(0, 1) * 2", "torch.randn(t, d), torch.randn(t, d)"
        ),
        "read permuted (1, 0)",
    ),
    "computed-then-transposed": (
        _problem("(y * 2 + 1).transpose(1, 2) - torch.tanh(x)", TRANSPOSED),
        "y read permuted (0, 2, 1)",
    ),
    "transposed-and-broadcast": (
        _problem("x.transpose(-1, -2) * y[:, None, :]", "torch.randn(b, d, t), torch.randn(b, d)"),
        "x read permuted (0, 2, 1)",
    ),
}
ROWS = {
    "softmax-transposed": (
        _problem("torch.softmax(x.transpose(1, 2), dim=-1) + y", TRANSPOSED),
        "row-wise over the last dimension",
    ),
    "channels-norm": (
        _problem("F.layer_norm(x.transpose(1, 2), (x.shape[1],)) * y", TRANSPOSED),
        "x read permuted (0, 2, 1)",
    ),
    "computed-then-permuted-softmax": (
        _problem("torch.softmax(torch.sigmoid(y).permute(0, 2, 1) * 3, -1)", TRANSPOSED),
        "y read permuted (0, 2, 1)",
    ),
    "only-a-transposed-input": (
        _problem("torch.log_softmax(x.transpose(1, 2) / 0.7, dim=-1)", "torch.randn(b, t, d)", "x"),
        "x read permuted (0, 2, 1)",
    ),
    "sum-of-transposed": (
        _problem("(x.transpose(1, 2) * y).sum(-1)", TRANSPOSED),
        "reductions [sum]",
    ),
}
SIZES = [{}, {"b": 1, "t": 7, "d": 33}, {"t": 1}]


def test_elementwise_reads_transposed_inputs(tmp_path):
    problems = {name: source for name, (source, _) in ELEMENTWISE.items()}
    results = check_rendered(
        problems, [{}, {"block": 64}], dict.fromkeys(problems, SIZES), str(tmp_path)
    )
    for name, (_, says) in ELEMENTWISE.items():
        assert results[name]["family"] == "elementwise", (name, results[name]["summary"])
        assert says in results[name]["summary"], (name, results[name]["summary"])
        for err in results[name]["errs"]:
            assert not isinstance(err, str) and err < 1e-5, (name, results[name]["errs"])


def test_row_reductions_read_transposed_inputs(tmp_path):
    problems = {name: source for name, (source, _) in ROWS.items()}
    variants = [{"strategy": "one_pass"}, {"strategy": "looped", "block_n": 16}]
    results = check_rendered(problems, variants, dict.fromkeys(problems, SIZES), str(tmp_path))
    for name, (_, says) in ROWS.items():
        assert results[name]["family"] == "row", (name, results[name]["summary"])
        assert says in results[name]["summary"], (name, results[name]["summary"])
        for err in results[name]["errs"]:
            assert not isinstance(err, str) and err < 1e-4, (name, results[name]["errs"])


def test_a_reduction_of_a_permuted_reshape_is_a_copy_then_the_reduction(tmp_path):
    """``x.view(b, t, 2, d // 2).transpose(1, 2).sum(1)`` (refused as a permute of a view):
    the move kernel copies the view, then the row kernel reduces it."""
    source = _problem("x.view(b, t, 2, d // 2).transpose(1, 2).sum(1)", TRANSPOSED)
    assert trace_problem(source).stages[0].family == "move"
    check_chained({"split-transpose-sum": source}, str(tmp_path), {"split-transpose-sum": [{}]})


@pytest.mark.parametrize(
    "forward, says",
    [
        # (a permute across a reduction is a chain of two kernels now: test_chain.py)
        ("x.transpose(1, 2).reshape(b, -1) + y.reshape(b, -1)", "beyond inserting or dropping"),
    ],
)
def test_what_is_not_read_through_a_permutation_says_why(forward, says):
    with pytest.raises(NoTemplate, match=says):
        trace_problem(_problem(forward, TRANSPOSED))
