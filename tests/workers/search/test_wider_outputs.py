"""Outputs wider than the input rows (issue 11, generality: "no template fits" only for what is
not pointwise ops, reductions, views and broadcasts). ``F.pad`` of the last dimension, a repeat
along the row and ``F.one_hot`` were refused because the rows come from the inputs; a pad is a
cat of constant columns and the row, a repeat a cat of the row with itself, a one-hot an arange
along the row compared with each target. Each gets an elementwise kernel that computes the
reference on the interpreter at the traced sizes and at others (odd widths, one row), and
compiles for the H200; what stays out is refused in one line that says what."""

from __future__ import annotations

import json
import re

import pytest

from tests.workers.search.child import SM90, check_chained, check_rendered, run_child
from tests.workers.search.test_broadcast import FOOTER
from workers.search.trace import NoTemplate, trace_problem

HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"


def problem(forward: str, inputs: str = "torch.randn(rows, width)", args: str = "x") -> str:
    return (
        HEADER
        + "rows = 4\nwidth = 16\n\n\n"
        + f"class Model(nn.Module):\n    def forward(self, {args}):\n        return {forward}\n\n\n"
        + f"def get_inputs():\n    return [{inputs}]\n"
        + FOOTER.format(init="[]")
    )


# Each with what its plan says about its output's width.
WIDER = {
    "zero-pad": ("F.pad(x, (2, 3))", "N + 5 columns wide"),
    "pad-value": ("F.pad(x, (2, 3), value=-1.0)", "N + 5 columns wide"),
    "pad-after-relu": ("F.pad(torch.relu(x), (0, 5)) * 2", "N + 5 columns wide"),
    "pad-then-pointwise": ("torch.sigmoid(F.pad(x, (4, 0), value=0.5)) - 1.0", "N + 4"),
    "negative-pad-crops": ("F.pad(x, (-1, 4), value=0.5) + 1.0", "N + 3 columns wide"),
    "repeat-row": ("x.repeat(1, 3)", "3·N columns wide"),
    "tile-row": ("torch.tile(x * 2.0, (2,))", "2·N columns wide"),
    "cat-of-more-than-the-row": ("torch.cat([x, x * 2.0], dim=-1)", "2·N columns wide"),
    "pad-beside-a-row": ("(F.pad(x, (1, 0)), x * 2.0)", "output 0 N + 1 columns wide"),
}


def test_pads_and_repeats_along_the_row_are_right_at_every_width(tmp_path):
    """The kernel runs over the output's columns and reads each input column where the pad or
    repeat puts it (nothing outside the input's row): right at odd widths and for one row,
    with the pad value where there is no input column."""
    problems = {k: problem(f) for k, (f, _) in WIDER.items()}
    widths = [{}, {"width": 33, "rows": 3}, {"width": 7, "rows": 1}]
    variants = [{}, {"block": 16, "tiles": 1}]
    got = check_rendered(problems, variants, dict.fromkeys(problems, widths), str(tmp_path))
    for name, (_, says) in WIDER.items():
        assert got[name]["family"] == "elementwise" and says in got[name]["summary"], got[name]
        assert len(got[name]["errs"]) == len(variants) * len(widths)
        assert all(isinstance(e, float) and e < 1e-5 for e in got[name]["errs"]), (name, got[name])


def test_a_pad_of_the_last_dimension_of_a_3d_tensor(tmp_path):
    src = problem("F.pad(x, (1, 1))", "torch.randn(2, rows, width)")
    got = check_rendered(
        {"pad3d": src}, [{}], {"pad3d": [{}, {"width": 9, "rows": 5}]}, str(tmp_path)
    )
    assert "N + 2 columns wide" in got["pad3d"]["summary"]
    assert got["pad3d"]["errs"] == [0.0, 0.0], got


TARGETS = "torch.randint(0, 16, (rows,))"
ONE_HOT = {
    # int64 out, as torch returns it: the rows are the output's, 16 classes wide
    "one-hot": problem("F.one_hot(t, 16)", TARGETS, "t"),
    "one-hot-float-times-x": problem(
        "F.one_hot(t, x.shape[-1]).float() * x",
        "torch.randint(0, width, (rows,)), torch.randn(rows, width)",
        "t, x",
    ),
    # integers in, float32 out
    "label-smoothed-target": problem("(1 - 0.1) * F.one_hot(t, 16) + 0.1 / 16", TARGETS, "t"),
    "targets-2d": problem("F.one_hot(t, 10).float() * 2.0", "torch.randint(0, 10, (2, rows))", "t"),
}


def test_one_hot_and_its_float_uses_are_right_in_value_and_dtype(tmp_path):
    """``F.one_hot`` is ``t[..., None] == arange(C)``: each column's index compared with the
    row's target, exactly. Its int64 output, a float mask of logits, and a label-smoothed
    target (float32 from int64 targets) come out with the reference's values and dtype, with
    more rows and with one."""
    sizes = {k: [{}, {"rows": 33}, {"rows": 1}] for k in ONE_HOT}
    sizes["one-hot-float-times-x"] = [{}, {"width": 33, "rows": 3}, {"width": 7, "rows": 1}]
    got = check_rendered(ONE_HOT, [{}, {"block": 16, "tiles": 1}], sizes, str(tmp_path))
    for name in ONE_HOT:
        assert got[name]["family"] == "elementwise", got[name]
        assert "each column's index" in got[name]["summary"], got[name]
        # a str here says the shape or dtype differs from the reference's
        assert got[name]["errs"] == [0.0] * 6, (name, got[name])


@pytest.mark.parametrize(
    "forward, inputs, says",
    [
        ("(F.pad(x, (1, 1)), x.sum(-1))", "", "an output narrower or wider than the row"),
        (
            "F.one_hot(t, t.shape[0])",
            "torch.randint(0, rows, (rows,))",
            "an arange along the row whose length moves with the input sizes",
        ),
    ],
    # (a pad in a softmax, an arange other than the row: chains of kernels now,
    # test_refused_graphs_that_chain_compute_the_reference below; a one-hot in a reduction:
    # one row kernel, the test after it; a reflect or
    # replicate pad, a pad of rows and a repeat of rows: move kernels, the test after it)
    ids=[
        "pad-beside-a-reduction",
        "one-hot-as-wide-as-a-size",
    ],
)
def test_what_stays_out_is_refused_in_one_line(forward, inputs, says):
    args = ", ".join(a for a in ("t", "x") if re.search(rf"\b{a}\b", forward))
    source = problem(forward, inputs or "torch.randn(rows, width)", args)
    with pytest.raises(NoTemplate, match=says) as info:
        trace_problem(source)
    assert "\n" not in str(info.value)


def test_refused_graphs_that_chain_compute_the_reference(tmp_path):
    """A pad inside a softmax and an arange narrower than the row were refused in words; each
    is now a chain of kernels (the padded or indexed values
    written out, the rest reading them) that matches the reference at two sizes."""
    chained = {
        "pad-in-a-softmax": problem("torch.softmax(F.pad(x, (1, 1)), -1)"),
        "arange-other-than-the-row": problem("x[..., :8] + torch.arange(8)"),
    }
    sizes = {name: [{}, {"rows": 9}] for name in chained}
    sizes["pad-in-a-softmax"] = [{}, {"rows": 5, "width": 33}]
    check_chained(chained, str(tmp_path), sizes)


def test_a_one_hot_inside_a_reduction_is_one_row_kernel(tmp_path):
    """Each column's index now reaches the row kernels (session 40, for tril/triu), so a
    one-hot inside a row reduction is one kernel, not a chain that writes the one-hot out."""
    source = problem(
        "-(F.one_hot(t, 16) * F.log_softmax(x, -1)).sum(-1)",
        TARGETS + ", torch.randn(rows, 16)",
        "t, x",
    )
    variants = [{}, {"strategy": "looped", "block_n": 4}]
    got = check_rendered({"nll": source}, variants, {"nll": [{}, {"rows": 9}]}, str(tmp_path))
    assert got["nll"]["family"] == "row", got
    for err in got["nll"]["errs"]:
        assert not isinstance(err, str) and err < 1e-6, got["nll"]["errs"]


# Refused in words before the move family (``workers.search.lowering_move``): each is a kernel
# of its own now, with what its plan says.
MOVED = {
    "reflect-pad": ("F.pad(x, (2, 3), mode='reflect')", "reflect pad [2, 3]"),
    "replicate-pad": ("F.pad(x, (2, 3), mode='replicate')", "replicate pad [2, 3]"),
    "pad-of-rows": ("F.pad(x, (0, 0, 1, 1))", "constant pad [0, 0, 1, 1]"),
    "repeat-rows": ("x.repeat(2, 1)", "repeat by [2, 1]"),
}


def test_pads_and_repeats_beyond_the_row_are_move_kernels(tmp_path):
    """A reflect or replicate pad, a pad of the rows and a repeat of the rows (refused in words
    when the row kernels were all there was) are move kernels that compute the reference
    exactly at the traced sizes and at odd ones."""
    problems = {name: problem(forward) for name, (forward, _) in MOVED.items()}
    sizes = dict.fromkeys(problems, [{}, {"width": 33, "rows": 3}])
    got = check_rendered(problems, [{}, {"block": 256, "warps": 1}], sizes, str(tmp_path))
    for name, (_, says) in MOVED.items():
        assert got[name]["family"] == "move" and says in got[name]["summary"], got[name]
        assert got[name]["errs"] == [0.0] * 4, (name, got[name])


_COMPILE = (
    SM90
    + r"""
out = {}
for name, (src, ints) in json.loads(sys.argv[1]).items():
    fn = P.load_module(render(trace_problem(src), DEFAULTS["elementwise"]), name, sys.argv[2])
    fn = fn._ke_broadcast
    out[name] = len(sm90_ptx(fn, {"ROWS": 4, "BLOCK": 256, "NC": 0, "I32": True}, ints))
print("RESULTS" + json.dumps(out))
"""
)


def test_wider_output_kernels_compile_for_sm90(tmp_path):
    """A pad's, a repeat's and a one-hot's kernels (int64 targets in, int64 out) compile ahead
    of time for the H200's architecture, as on the GPU host."""
    sources = {
        "pad": (problem(WIDER["pad-value"][0]), []),
        "repeat": (problem(WIDER["repeat-row"][0]), []),
        "one_hot": (ONE_HOT["one-hot"], ["in0_ptr", "out0_ptr"]),
    }
    got = run_child(_COMPILE, json.dumps(sources), str(tmp_path), interpret=False)
    assert set(got) == set(sources) and all(size > 1000 for size in got.values()), got
