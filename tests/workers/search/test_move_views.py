"""Moves whose operands are views of an input (``workers.search.lowering_move``): ``torch.roll``
(one dimension, several, negative or wrapping shifts, the flattened tensor), a cat of slices of
one input, a select or an ``unbind`` piece before a move, and strided copies of views (an
``expand``, a select, slices with a step) made contiguous. Each was refused ("no template
fits"); each is now a ``move`` candidate the wrapper feeds with torch views of the input (their
numbers fitted to the sizes as the op's are), which passes every gate on the interpreter with no
error at the traced sizes and at odd ones, and whose kernel the compile gate builds for sm_90."""

from __future__ import annotations

import pytest

from tests.workers.search.child import check_chained
from tests.workers.search.test_move import OTHER, X4, problem
from workers import constants as C
from workers.search.trace import NoTemplate, trace_problem

# Each with what its plan says.
VIEWS = {
    "roll-one-dim": ("torch.roll(x, 2, 1)", "cat along dimension 1, 2 operand(s)"),
    "roll-two-dims": ("torch.roll(x, shifts=(-1, 11), dims=(1, 3))", "roll of dimensions [1, 3]"),
    "roll-flattened": ("torch.roll(x, -5)", "roll of the flattened input"),
    "fftshift": ("torch.fft.fftshift(x, dim=(-2, -1))", "roll of dimensions [2, 3]"),
    "cat-of-slices": ("torch.cat([x[:, 3:], x[:, :3]], dim=1)", "cat along dimension 1"),
    "cat-of-chunks": ("torch.cat(x.chunk(2, dim=1)[::-1], dim=1)", "cat along dimension 1"),
    # (both were refused in words before, test_slices.py)
    "cat-of-strided-slices": ("torch.cat([x[..., 1::2], x[..., ::2]], dim=-1)", "dimension 3"),
    "cat-of-slices-along-dim-0": ("torch.cat([x[:2], x[2:]], dim=0)", "cat along dimension 0"),
    "select-then-flip": ("x[:, -1].flip(1)", "flip of dimensions [1]"),
    # (a chain of two kernels before, test_slices.py)
    "flip-of-a-slice": ("x[..., 1:].flip(-1)", "flip of dimensions [3]"),
    "cat-of-selects": ("torch.cat([x[:, 0], x[:, 3]], dim=-1)", "cat along dimension 2"),
    "select": ("x[:, 3]", "strided copy"),
    "unbind-piece": ("torch.unbind(x, 2)[1]", "strided copy"),
    "expand": ("x[:, None].expand(-1, 3, -1, -1, -1).contiguous()", "strided copy"),
    "strided-slices": ("x[:, 1::2, :, ::3].contiguous()", "slice along dimension 3 (step 3)"),
    # A reshape after the op that merges neighbouring dimensions: the kernel writes the op's
    # value, the wrapper reshapes it (repeat_interleave: an expand, copied, then merged).
    "repeat-interleave": ("x.repeat_interleave(2, dim=1)", "dimensions [[1, 2]] merged"),
    "repeat-interleave-last": ("x.repeat_interleave(3, dim=-1)", "dimensions [[3, 4]] merged"),
    "kv-heads-repeated": (
        "x[:, None].expand(-1, 3, -1, -1, -1).reshape(x.shape[0], -1, x.shape[2], x.shape[3])",
        "dimensions [[1, 2]] merged",
    ),
    "cat-then-flatten": ("torch.cat([x, x[:, 1:]], 1).flatten(1)", "dimensions [[1, 2, 3]]"),
}

# The traced sizes and odd ones (the roll by 11 of 8 columns wraps by 4 of 7; fftshift moves
# 5 rows by 2).
WORKLOAD = {
    "cases": [{"name": "traced"}, {"name": "odd", "overrides": OTHER}],
    "edge_cases": False,
}


@pytest.mark.timeout(600)
def test_moves_of_views_pass_every_gate_at_two_sizes(evaluator):
    """Every element lands where the reference puts it (zero error) at both sizes, and the
    compile gate builds the kernel for sm_90."""
    _every_gate_exact(evaluator, VIEWS, WORKLOAD)


def _every_gate_exact(evaluator, forwards: dict, workload: dict) -> None:
    """Each forward is one ``move`` kernel whose plan says what it should, accepted with zero
    error in every case of ``workload``, its kernel compiled for sm_90."""
    from workers.evaluate import EvaluationRequest
    from workers.search.generators.template import DEFAULTS, render

    cases = [case["name"] for case in workload["cases"]]
    for name, (forward, says) in forwards.items():
        source = problem(forward)
        plan = trace_problem(source)
        assert plan.family == "move" and says in plan.summary, (name, plan.summary)
        candidate = render(plan, DEFAULTS["move"])
        report = evaluator.evaluate(EvaluationRequest(source, candidate, workload=workload))
        assert report.verdict == C.ACCEPTED, (name, report.reason)
        errs = [report.case(case).max_abs_err for case in cases]
        assert errs == [0.0] * len(cases), (name, errs)
        arts = report.gate(C.GATE_COMPILE).evidence["artifacts"]
        assert arts and all(a["target"][:2] == ["cuda", 90] for a in arts), (name, arts)
        assert all(a["kernel"] == "_ke_move" and a["ir"].get("ptx") for a in arts), name


def test_the_views_numbers_follow_the_sizes():
    """A select's index and a slice's bounds stay numbers, or fractions of their dimension
    (the one-dimension roll's cut is 2 in from the end at every size); a roll's shifts stay
    as written (the wrapper wraps them at each size), or halves of the dimension (fftshift)."""
    cut = trace_problem(problem("torch.roll(x, 2, 1)"))
    assert cut.extra["fits"] == [[1, 1, -2], [1, 1, 0], [0, 1, 0], [1, 1, -2]]
    roll = trace_problem(problem("torch.roll(x, shifts=(-1, 11), dims=(1, 3))"))
    assert roll.extra["fits"] == [[0, 1, -1], [0, 1, 11]]
    half = trace_problem(problem("torch.fft.fftshift(x, dim=(-2, -1))"))
    assert half.extra["fits"] == [[1, 2, 0], [1, 2, 0]]
    select = trace_problem(problem("x[:, -1].flip(1)"))
    assert select.extra["fits"] == [[0, 1, -1]]


# Reshapes of an input read through (each group of dimensions split or merged, not both):
# the wrapper unflattens and flattens the input, then permutes it, and the kernel copies.
RESHAPED = {
    "pixel-shuffle": ("F.pixel_shuffle(x, 2)", "strided copy"),
    "pixel-unshuffle": ("F.pixel_unshuffle(x, 2)", "strided copy"),
    "channel-shuffle": ("F.channel_shuffle(x, 2)", "strided copy"),
    "space-to-depth": (
        "x.view(x.shape[0], x.shape[1], x.shape[2] // 2, 2, x.shape[3] // 2, 2)"
        ".permute(0, 1, 3, 5, 2, 4).reshape(x.shape[0], -1, x.shape[2] // 2, x.shape[3] // 2)",
        "strided copy",
    ),
    "roll-of-a-flattened-view": (
        "torch.roll(x.view(x.shape[0], -1), 3, 1)",
        "cat along dimension 1",
    ),
    "heads-split-then-transposed": (
        "x.view(x.shape[0], x.shape[1], x.shape[2], 2, -1).transpose(1, 3).contiguous()",
        "strided copy",
    ),
}
# Other sizes that each op divides (4 and 8 channels; even heights and widths).
RESHAPED_OTHER = {"batch": 1, "channels": 8, "height": 4, "width": 10}


@pytest.mark.timeout(600)
def test_reshaped_inputs_are_read_through(evaluator):
    """pixel_shuffle / pixel_unshuffle / channel_shuffle (each a view to more dimensions, a
    permute and a copy) and hand-written forms of them: a move whose operand is the input
    reshaped by the wrapper, exact at the traced sizes and at others (the split sizes follow
    the channels), compiled for sm_90. They were refused as "permute of view"."""
    workload = {
        "cases": [{"name": "traced"}, {"name": "other", "overrides": RESHAPED_OTHER}],
        "edge_cases": False,
    }
    _every_gate_exact(evaluator, RESHAPED, workload)


# Views moved beside computed values: chains, the move one of their kernels.
CHAINED = {
    "cat-of-scaled-slice": problem("torch.cat([x[:, :2], x[:, 2:] * 2], dim=1)"),
    "roll-of-a-product-plus-input": problem("torch.roll(x * 2, 1, 1) + x"),
    "sum-of-an-expand": problem("x[:, :1].expand(-1, 3, -1, -1).sum(1)"),
}


def test_moves_of_views_beside_computed_values_are_chains(tmp_path):
    """``cat([x[:, :k], x[:, k:] * 2])``: the product written first, the cat reading the
    slice of the input in place beside it; a roll of a product; a sum over an expand."""
    check_chained(CHAINED, str(tmp_path), dict.fromkeys(CHAINED, [{}, OTHER]))
    plan = trace_problem(CHAINED["cat-of-scaled-slice"])
    assert plan.stages[-1].family == "move", plan.summary


@pytest.mark.parametrize(
    "forward, says",
    [
        (
            "torch.roll(x.reshape(batch, height, channels, width), 1, 1)",
            "a reshape from \\[2, 4, 6, 8\\] to \\[2, 6, 4, 8\\] before the op that moves",
        ),
        (
            "torch.stack(torch.unbind(x, 1)[::-1], 1)",
            "takes 4 operands at the traced sizes and 8 at others",
        ),
        (
            "torch.cat([x, x], 1).view(x.shape[0], 2, -1, x.shape[2], x.shape[3])",
            "a view that splits a dimension after the op",
        ),
    ],
    ids=[
        "reshape-that-splits-and-merges",
        "stack-of-all-pieces",
        "split-view-after-a-cat",
    ],
)
def test_what_stays_out_is_refused_in_one_line(forward, says):
    with pytest.raises(NoTemplate, match=says) as info:
        trace_problem(problem(forward, X4))
    assert "\n" not in str(info.value)
