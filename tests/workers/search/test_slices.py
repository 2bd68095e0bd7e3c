"""Slices, splits and concatenations along the last dimension (issue 11: "the reference used
ops the lowering does not know: ``split``/``chunk``"). Rotary embeddings' ``rotate_half`` is
``cat(-x2, x1)`` of the two halves of each head; these graphs get an elementwise kernel that
reads the columns where the slices put them, correct at the traced width and at others (the
split points are fractions of the row, not the traced numbers). A flip along the row between
pointwise ops reads its inputs from the row's far end. What is not covered is refused in
words."""

from __future__ import annotations

import json

import pytest

from tests.workers.search.child import SM90, check_chained, check_rendered, run_child
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


NUMBER = "        torch.tensor(2.5),  # a number: the same at either end of the row\n"
FLIPS = (
    HEADER
    + """rows = 5
width = 16


class Model(nn.Module):
    def forward(self, x, y, z, s):
        n = x.shape[-1]
        back = x.flip(-1) * z
        halves = torch.cat([back[..., n // 2 :], back[..., : n // 2]], dim=-1)
        return torch.relu(x.flip(-1)) * y.flip(-1) + halves - (x * s).flip(-1).flip(-1)


def get_inputs():
    return [
        torch.randn(rows, width),
        torch.randn(1, width),
        torch.randn(rows, 1),
"""
    + NUMBER
    + """    ]
"""
    + FOOTER.format(init="[]")
)


@pytest.mark.parametrize(
    "source, sizes",
    [
        (
            ROPE,
            [
                {},
                {"head_dim": 128, "tokens": 3},
                {"head_dim": 40, "heads": 1},
                {"head_dim": 33},
                {"head_dim": 9, "tokens": 1},
            ],
        ),
        (PIECES, [{}, {"width": 64, "rows": 3}]),
        (GLU, [{}, {"hidden": 100, "tokens": 1}, {"hidden": 1}]),
        (FLIPS, [{}, {"width": 33, "rows": 3}, {"width": 7, "rows": 1}]),
    ],
    ids=[
        "rotary-rotate-half",
        "split-three-ways-and-swap",
        "glu-and-swiglu-half-outputs",
        "flips-between-pointwise-ops",
    ],
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
        ("(torch.cat([x, x * 2.0], dim=-1), x.sum(-1))", "wider than the row .* reductions"),
    ],
    # (a flip along the rows: a chain of a move kernel and the rest now, CHAINED below; a cat
    # of strided slices or along the first dimension: one move kernel, test_move_views.py)
    ids=["wider-output-beside-a-reduction"],
)
def test_slices_the_templates_do_not_cover_are_refused_in_words(forward, says):
    with pytest.raises(NoTemplate, match=says):
        trace_problem(_slicing(forward))


def _slicing(forward: str) -> str:
    return (
        HEADER
        + f"class Model(nn.Module):\n    def forward(self, x):\n        return {forward}\n\n\n"
        + "def get_inputs():\n    return [torch.randn(4, 16)]\n"
        + FOOTER.format(init="[]")
    )


# Refused in one kernel (a slice or a flip where a whole row is needed, a flip of moved
# columns), each is a chain of two now: the columns moved first, written, then the rest. (A
# flip of a slice is one move kernel: test_move_views.py.)
CHAINED = {
    "narrow-softmax": "torch.softmax(x[..., :8], dim=-1)",
    "in-a-softmax": "torch.softmax(torch.cat([x[..., 8:], x[..., :8]], dim=-1), dim=-1)",
    "flip-in-a-softmax": "torch.softmax(x.flip(-1), dim=-1)",
    "flip-of-a-cat": "torch.cat([x[..., 8:], x[..., :8]], dim=-1).flip(-1)",
    # the rows flipped by a move kernel (``workers.search.lowering_move``), then the product
    "flip-along-rows": "x.flip(0) * 2.0",
}


def test_slices_one_kernel_does_not_hold_are_chains_that_compute_the_reference(tmp_path):
    check_chained({k: _slicing(f) for k, f in CHAINED.items()}, str(tmp_path))


COLUMNS = (
    HEADER
    + "rows = 4\nwidth = 16\n\n\n"
    + "class Model(nn.Module):\n    def forward(self, x):\n        return {forward}\n\n\n"
    + "def get_inputs():\n    return [torch.randn(rows, width)]\n"
    + FOOTER.format(init="[]")
)


# Each with what its plan says about the columns it slices.
COLUMN_SLICES = {
    "diff": ("x[..., 1:] - x[..., :-1]", "the first N - 1 columns"),
    "torch-diff": ("torch.diff(x, dim=-1)", "the first N - 1 columns"),
    "roll-by-one-cat": ("torch.cat([x[..., 1:], x[..., :1]], dim=-1) * 2.0", "moved by slices"),
    "both-ends": ("x[..., 2:-3] * 3.0", "the first N - 5 columns"),
    "half-plus-one": ("x[..., : x.shape[-1] // 2 + 1] + 1.0", "the first 1/2 of N + 1 columns"),
    "fixed": ("x[..., :8] * 2.0", "the first 8 columns"),
}


def test_slices_a_number_of_columns_from_either_end_are_right_at_every_width(tmp_path):
    """``x[..., 1:]`` traced at width 16 starts 1/16 into the row; a kernel slicing at N/16
    would be wrong at every other width. Traced again at other widths, each bound is kept as
    a·N + c columns: the kernel is right at odd widths, narrower and wider ones, down to one
    column (an empty output), and a fixed number of columns is clamped to the row as torch
    clamps it (``x[..., :8]`` of a 5-wide row has 5)."""
    problems = {k: COLUMNS.format(forward=f) for k, (f, _) in COLUMN_SLICES.items()}
    widths = [{}, {"width": 37, "rows": 3}, {"width": 200}, {"width": 5}, {"width": 1}]
    variants = [{}, {"block": 16, "tiles": 1}]
    got = check_rendered(problems, variants, dict.fromkeys(problems, widths), str(tmp_path))
    for name, (_, says) in COLUMN_SLICES.items():
        assert got[name]["family"] == "elementwise" and says in got[name]["summary"], name
        assert len(got[name]["errs"]) == len(variants) * len(widths)
        assert all(isinstance(e, float) and e < 1e-5 for e in got[name]["errs"]), (name, got[name])


ROLLS = {
    "roll-one": "torch.roll(x, 1, -1) - x",
    "roll-back-three": "x.roll(shifts=-3, dims=1) * 2.0",
    "roll-half": "torch.roll(x, x.shape[-1] // 2, dims=-1) + 1.0",
}


def test_a_roll_along_the_row_is_its_two_slices_concatenated(tmp_path):
    """``torch.roll`` was refused ("no template expresses roll"). Along one dimension it is the
    last ``s`` entries and then the rest (written so while tracing), so the slices lowering reads
    the columns where the roll puts them: right at other widths, odd ones too. A row narrower
    than a fixed shift (a roll by 3 of 1 column is a roll by 0) is outside the a·N + c bounds:
    the correctness gate's cases say so where a workload has such rows."""
    problems = {k: COLUMNS.format(forward=f) for k, f in ROLLS.items()}
    widths = [{}, {"width": 37, "rows": 3}, {"width": 200}, {"width": 5}]
    variants = [{}, {"block": 16, "tiles": 1}]
    got = check_rendered(problems, variants, dict.fromkeys(problems, widths), str(tmp_path))
    for name in ROLLS:
        assert "columns moved by slices" in got[name]["summary"], got[name]
        assert len(got[name]["errs"]) == len(variants) * len(widths)
        assert all(isinstance(e, float) and e < 1e-5 for e in got[name]["errs"]), (name, got[name])


def test_a_slice_bound_that_is_no_line_in_the_width_is_refused_in_words():
    # Columns 1, 4 and 9 at widths 16, 32 and 48: not a·N + c, so no kernel slices right.
    forward = "x[..., : (x.shape[-1] // 16) ** 2]"
    with pytest.raises(NoTemplate, match="neither a fraction of the row nor a number of columns"):
        trace_problem(COLUMNS.format(forward=forward))
    halves = COLUMNS.format(forward="torch.cat([x[..., width // 2 :], x[..., : width // 2]], -1)")
    assert "columns moved by slices" in trace_problem(halves).summary


_COMPILE = (
    SM90
    + r"""
out = {}
for i, src in enumerate(json.loads(sys.argv[1])):
    fn = P.load_module(render(trace_problem(src), DEFAULTS["elementwise"]), f"m{i}", sys.argv[2])
    fn = fn._ke_broadcast
    out[i] = len(sm90_ptx(fn, {"ROWS": 4, "BLOCK": 256, "NC": 0, "I32": True}))
print("RESULTS" + json.dumps(out))
"""
)


def test_kernels_that_slice_columns_from_the_ends_compile_for_sm90(tmp_path):
    """The clamped widths (``tl.minimum`` / ``tl.maximum`` of the row length), the moved
    columns and the mirrored reads of a flip compile ahead of time for the H200's architecture,
    as on the GPU host."""
    forwards = [COLUMN_SLICES[k][0] for k in ("diff", "fixed", "roll-by-one-cat")]
    # (the number input aside: this harness declares every argument a pointer)
    flips = FLIPS.replace("x, y, z, s)", "x, y, z)").replace("(x * s)", "(x * 2.0)")
    flips = flips.replace(NUMBER, "")
    sources = [COLUMNS.format(forward=f) for f in forwards] + [flips]
    got = run_child(_COMPILE, json.dumps(sources), str(tmp_path), interpret=False)
    assert len(got) == 4 and all(size > 1000 for size in got.values()), got
