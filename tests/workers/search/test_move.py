"""The ``move`` family (``workers.search.lowering_move``): ``cat``, ``stack``, slices (with a
step) and ``split`` / ``chunk`` pieces along any dimension, ``F.pad`` (constant, reflect,
replicate) of any trailing dimensions, ``repeat``, ``flip``, ``tril`` and ``triu``. The row
kernels move columns along the last dimension only and refused the rest in words; each is now
a kernel of its own (or one kernel of a chain, with pointwise ops and reductions around it)
that computes the reference exactly on the interpreter at the traced sizes and at others (odd
sizes, where a ``chunk`` rounds up), and compiles ahead of time for the H200's architecture."""

from __future__ import annotations

import json

import pytest

from tests.workers.search.child import check_chained, check_rendered, run_child
from workers.search.trace import NoTemplate, trace_problem

HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"
FOOTER = "\n\ndef get_init_inputs():\n    return []\n"
X4 = "torch.randn(batch, channels, height, width)"


def problem(forward: str, inputs: str = X4, args: str = "x") -> str:
    return (
        HEADER
        + "batch = 2\nchannels = 4\nheight = 6\nwidth = 8\n\n\n"
        + f"class Model(nn.Module):\n    def forward(self, {args}):\n        return {forward}\n\n\n"
        + f"def get_inputs():\n    return [{inputs}]\n"
        + FOOTER
    )


# Odd sizes everywhere (a chunk's piece rounds up there), one batch.
OTHER = {"batch": 1, "channels": 9, "height": 5, "width": 7}

# Each with what its plan says.
MOVED = {
    "cat-dim-1": (
        problem("torch.cat([x, y], dim=1)", f"{X4}, torch.randn(batch, 3, height, width)", "x, y"),
        "cat along dimension 1",
    ),
    "cat-dim-0": (
        problem(
            "torch.cat([x, y, x], dim=0)",
            "torch.randn(batch, width), torch.randn(3, width)",
            "x, y",
        ),
        "cat along dimension 0, 3 operand(s)",
    ),
    "stack": (
        problem("torch.stack([x, y], dim=1)", f"{X4}, {X4}", "x, y"),
        "stack along dimension 1",
    ),
    "stack-negative-dim": (
        problem("torch.stack([x, y, x], dim=-1)", "torch.randn(batch, width), " * 2, "x, y"),
        "stack along dimension 2",
    ),
    "cat-of-a-permuted-view": (
        problem(
            "torch.cat([x.permute(0, 2, 1), y], dim=-2)",
            "torch.randn(batch, width, channels), torch.randn(batch, 3, width)",
            "x, y",
        ),
        "cat along dimension 1",
    ),
    "cat-then-clone": (
        problem("torch.cat([x, y], dim=2).clone()", f"{X4}, {X4}", "x, y"),
        "cat along dimension 2",
    ),
    "slice-step-2": (problem("x[:, 1::2]"), "slice along dimension 1 (step 2)"),
    "slice-from-both-ends": (problem("x[:, :, 1:-1]"), "slice along dimension 2"),
    "chunk-piece": (problem("x.chunk(2, dim=1)[1]"), "slice along dimension 1"),
    "chunk-first-piece": (problem("x.chunk(4, dim=-2)[1]"), "slice along dimension 2"),
    "constant-pad-2d": (
        problem("F.pad(x, (1, 2, 3, 0), value=-1.5)", "torch.randn(channels, width)"),
        "constant pad [1, 2, 3, 0]",
    ),
    "constant-pad-3-dims": (problem("F.pad(x, (1, 1, 2, 0, 1, 1))"), "constant pad"),
    "reflect-pad": (problem("F.pad(x, (2, 1, 1, 2), mode='reflect')"), "reflect pad"),
    "replicate-pad": (problem("F.pad(x, (2, 1, 1, 3), mode='replicate')"), "replicate pad"),
    "repeat": (
        problem("x.repeat(2, 1, 3)", "torch.randn(channels, width)"),
        "repeat by [2, 1, 3]",
    ),
    "flip-dim-1": (problem("x.flip(1)"), "flip of dimensions [1]"),
    "flip-negative-dims": (problem("x.flip(-3, -1)"), "flip of dimensions [1, 3]"),
    # (not square: 6 x 8 traced, 5 x 7 at the odd sizes)
    "tril": (problem("torch.tril(x)"), "tril keeping diagonal 0 and below"),
    "triu-from-below": (problem("x.triu(diagonal=-2)"), "triu keeping diagonal -2 and above"),
}


def test_ops_that_move_elements_are_exact_at_two_sizes(tmp_path):
    """Every element lands where the reference puts it (zero error) at the traced sizes and at
    odd ones, with two launches (one of small blocks and one warp)."""
    problems = {name: src for name, (src, _) in MOVED.items()}
    variants = [{}, {"block": 256, "warps": 1}]
    got = check_rendered(problems, variants, dict.fromkeys(problems, [{}, OTHER]), str(tmp_path))
    for name, (_, says) in MOVED.items():
        assert got[name]["family"] == "move", (name, got[name])
        assert says in got[name]["summary"], (name, got[name])
        assert got[name]["errs"] == [0.0] * 4, (name, got[name])


def test_integer_tensors_and_mixed_dtypes_keep_the_references_dtype(tmp_path):
    """A stack of integer tensors stays int64; a cat of an int64 and a float32 tensor is
    float32, as torch promotes it (each operand's values cast in the kernel)."""
    problems = {
        "int64": problem(
            "torch.stack([t, u], dim=0)",
            "torch.randint(0, 9, (batch, width)), torch.randint(0, 9, (batch, width))",
            "t, u",
        ),
        "mixed": problem(
            "torch.cat([t, x], dim=1)",
            "torch.randint(0, 9, (batch, width)), torch.randn(batch, width)",
            "t, x",
        ),
    }
    got = check_rendered(problems, [{}], dict.fromkeys(problems, [{}, OTHER]), str(tmp_path))
    for name in problems:
        assert got[name]["family"] == "move", (name, got[name])
        assert got[name]["errs"] == [0.0, 0.0], (name, got[name])  # a str: dtype or shape


def test_fractions_of_a_dimension_follow_the_sizes():
    """A ``chunk(2)`` piece starts at half the dimension (rounded up, as torch's chunks are)
    and ``x[:, 1:-1]`` one in from each end, at every size; a pad stays a number."""
    chunk = trace_problem(problem("x.chunk(2, dim=1)[1]"))
    assert chunk.extra["fits"] == [[1, 2, 0, 1]]
    ends = trace_problem(problem("x[:, 1:-1]"))
    assert ends.extra["fits"] == [[0, 1, 1], [0, 1, -1]]
    pad = trace_problem(problem("F.pad(x, (2, 1, 1, 0), mode='replicate')"))
    assert pad.extra["fits"] == [[0, 1, 2], [0, 1, 1], [0, 1, 1], [0, 1, 0]]


# A move with pointwise ops or a reduction around it: a chain, the move one of its kernels.
CHAINED = {
    "relu-of-a-cat": problem("torch.relu(torch.cat([x, y], dim=1))", f"{X4}, {X4}", "x, y"),
    "sum-of-a-cat": problem("torch.cat([x, y], dim=1).sum(1)", f"{X4}, {X4}", "x, y"),
    "cat-of-a-relu": problem("torch.cat([torch.relu(x), y], dim=1)", f"{X4}, {X4}", "x, y"),
    "softmax-of-a-reflect-pad": problem(
        "torch.softmax(F.pad(x, (1, 1, 1, 1), mode='reflect'), dim=-1)"
    ),
}


def test_moves_with_more_around_them_are_chains(tmp_path):
    check_chained(CHAINED, str(tmp_path), dict.fromkeys(CHAINED, [{}, OTHER]))
    for name in ("relu-of-a-cat", "sum-of-a-cat"):
        plan = trace_problem(CHAINED[name])
        assert [s.family for s in plan.stages][0] == "move", (name, plan.summary)


def test_a_triangle_with_pointwise_ops_around_it_is_one_kernel(tmp_path):
    """``triu(x, 1) * 2`` and ``tril(x) + y`` were chains of two kernels (the move, then the
    pointwise op); the triangle is now computed from each element's coordinates in the
    elementwise kernel (test_causal_masks.py). A triangle alone stays a move (it never reads
    what the diagonal cuts off)."""
    problems = {
        "scaled-triu": problem("torch.triu(x, 1) * 2.0"),
        "tril-plus-input": problem("torch.tril(x) + y", f"{X4}, {X4}", "x, y"),
    }
    results = check_rendered(problems, [{}, {"block": 64}], dict.fromkeys(problems, [{}, OTHER]),
                             str(tmp_path))  # fmt: skip
    for name, got in results.items():
        assert got["family"] == "elementwise" and "kernels:" not in got["summary"], got
        for err in got["errs"]:
            assert not isinstance(err, str) and err == 0.0, (name, got["errs"])
    assert trace_problem(problem("torch.triu(x, 1)")).family == "move"


@pytest.mark.parametrize(
    "forward, inputs, args, says",
    [
        (
            "x[:, : x.shape[1] ** 2 // 16]",
            X4,
            "x",
            "neither a number nor a fraction of its dimension plus a number",
        ),
    ],
    ids=["bound-a-square-of-a-size"],
)
def test_what_stays_out_is_refused_in_one_line(forward, inputs, args, says):
    with pytest.raises(NoTemplate, match=says) as info:
        trace_problem(problem(forward, inputs, args))
    assert "\n" not in str(info.value)


_COMPILE = r"""
import json, sys
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from workers.contract import problem as P
from workers.search.generators.template import DEFAULTS, render
from workers.search.trace import trace_problem

out = {}
for name, src in json.loads(sys.argv[1]).items():
    fn = P.load_module(render(trace_problem(src), DEFAULTS["move"]), name, sys.argv[2])._ke_move
    for i32 in (True, False):
        ce = {"I32": i32, "BLOCK": 1024}
        sig = {a: "*fp32" if a.endswith("_ptr") else ("i32" if i32 else "i64")
               for a in fn.arg_names if a not in ce}
        sig.update({c: "constexpr" for c in ce})
        k = triton.compile(ASTSource(fn=fn, signature=sig, constexprs=ce),
                           target=GPUTarget("cuda", 90, 64), options={"num_warps": 4})
        out[f"{name}-{i32}"] = len(k.asm["ptx"])
print("RESULTS" + json.dumps(out))
"""


def test_move_kernels_compile_for_sm90(tmp_path):
    """Each kind's kernel compiles ahead of time for the H200's architecture, with 32-bit and
    with 64-bit coordinates."""
    names = ["cat-dim-1", "slice-step-2", "reflect-pad", "constant-pad-2d", "repeat", "flip-dim-1"]
    names.append("tril")
    sources = {name: MOVED[name][0] for name in names}
    got = run_child(_COMPILE, json.dumps(sources), str(tmp_path), interpret=False)
    assert len(got) == 2 * len(sources) and all(size > 1000 for size in got.values()), got
