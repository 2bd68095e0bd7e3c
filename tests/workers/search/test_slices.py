"""Slices, splits and concatenations along the last dimension (issue 11: "the reference used
ops the lowering does not know: ``split``/``chunk``"). Rotary embeddings' ``rotate_half`` is
``cat(-x2, x1)`` of the two halves of each head; these graphs get an elementwise kernel that
reads the columns where the slices put them, correct at the traced width and at others (the
split points are fractions of the row, not the traced numbers). What is not covered is refused
in words."""

from __future__ import annotations

import json

import pytest

from tests.workers.search.child import run_child
from tests.workers.search.test_broadcast import _CHECK, FOOTER, HEADER
from workers.search.trace import NoTemplate, trace_problem

ROPE = (
    HEADER
    + """batch = 2
heads = 4
tokens = 6
head_dim = 16


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class Model(nn.Module):
    def forward(self, q, cos, sin):
        return q * cos + rotate_half(q) * sin


def get_inputs():
    return [
        torch.randn(batch, heads, tokens, head_dim),
        torch.randn(tokens, head_dim),
        torch.randn(tokens, head_dim),
    ]
"""
    + FOOTER.format(init="[]")
)

PIECES = (
    HEADER
    + """rows = 5
width = 32


class Model(nn.Module):
    def forward(self, x):
        n = x.shape[-1]
        a, b, c = x.split([n // 4, n // 4, n // 2], dim=-1)
        swapped = torch.cat([x[..., n // 2 :], x[..., : n // 2]], dim=-1)
        return torch.cat([torch.sigmoid(c), a * b, b - 1.0], dim=-1) + swapped * 2.0


def get_inputs():
    return [torch.randn(rows, width)]
"""
    + FOOTER.format(init="[]")
)


GLU = (
    HEADER
    + """import torch.nn.functional as F

batch = 3
tokens = 5
hidden = 24


class Model(nn.Module):
    def forward(self, x, y):
        a, gate = x.chunk(2, dim=-1)
        swiglu = F.silu(y[..., : y.shape[-1] // 2]) * y[..., y.shape[-1] // 2 :]
        return a * torch.sigmoid(gate) - 0.5 * swiglu + F.glu(y, dim=-1)


def get_inputs():
    return [torch.randn(batch, tokens, 2 * hidden), torch.randn(batch, tokens, 2 * hidden)]
"""
    + FOOTER.format(init="[]")
)


@pytest.mark.parametrize(
    "source, sizes",
    [
        (ROPE, [{}, {"head_dim": 128, "tokens": 3}, {"head_dim": 40, "heads": 1}]),
        (PIECES, [{}, {"width": 64, "rows": 3}]),
        (GLU, [{}, {"hidden": 100, "tokens": 1}, {"hidden": 1}]),
    ],
    ids=["rotary-rotate-half", "split-three-ways-and-swap", "glu-and-swiglu-half-outputs"],
)
def test_slices_and_cat_get_a_correct_elementwise_kernel(source, sizes, tmp_path):
    result = run_child(_CHECK, source, json.dumps(sizes), str(tmp_path))
    assert result["family"] == "elementwise"
    assert "columns moved by slices" in result["summary"]
    assert len(result["runs"]) == 2 * len(sizes)
    for run in result["runs"]:
        assert run["err"] < 1e-5, run


@pytest.mark.parametrize(
    "forward, says",
    [
        ("torch.cat([x, x * 2.0], dim=-1)", "wider than the row"),
        ("torch.softmax(x[..., :8], dim=-1)", "where a whole row is needed"),
        ("torch.cat([x[..., 1::2], x[..., ::2]], dim=-1)", "step"),
        ("torch.softmax(torch.cat([x[..., 8:], x[..., :8]], dim=-1), dim=-1)", "reductions"),
        ("torch.cat([x[:2], x[2:]], dim=0)", "along dimension 0"),
    ],
    ids=["wider-output", "narrow-softmax", "strided-slice", "in-a-softmax", "first-dimension"],
)
def test_slices_the_templates_do_not_cover_are_refused_in_words(forward, says):
    source = (
        HEADER
        + f"class Model(nn.Module):\n    def forward(self, x):\n        return {forward}\n\n\n"
        + "def get_inputs():\n    return [torch.randn(4, 16)]\n"
        + FOOTER.format(init="[]")
    )
    with pytest.raises(NoTemplate, match=says):
        trace_problem(source)


@pytest.mark.parametrize(
    "forward",
    ["x[..., 1:] - x[..., :-1]", "torch.cat([x[..., 1:], x[..., :1]], dim=-1) * 2.0"],
    ids=["diff", "roll-by-one"],
)
def test_a_slice_of_a_number_of_columns_is_refused_not_sliced_at_a_fraction(forward):
    # Traced at width 16, x[..., 1:] starts 1/16 into the row: a kernel slicing at N/16 would be
    # wrong at every other width (only the tail-size edge case would catch it).
    source = (
        HEADER
        + "rows = 4\nwidth = 16\n\n\n"
        + f"class Model(nn.Module):\n    def forward(self, x):\n        return {forward}\n\n\n"
        + "def get_inputs():\n    return [torch.randn(rows, width)]\n"
        + FOOTER.format(init="[]")
    )
    with pytest.raises(NoTemplate, match="a number of columns, not a fraction of the row"):
        trace_problem(source)
    halves = source.replace(forward, "torch.cat([x[..., width // 2 :], x[..., : width // 2]], -1)")
    assert "columns moved by slices" in trace_problem(halves).summary
