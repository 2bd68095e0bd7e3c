"""One element picked per row by an index, and losses built on it (issue 11, generality):
``x.gather(1, t[:, None])`` was "gather.default, which no template expresses"; a class-weighted
``nll_loss`` / ``cross_entropy`` was "class-weighted nll_loss is not covered" (and with the
weight a parameter, not traceable at all); ``-x.mean()`` was "arithmetic on a reduction over
every row is not covered". The pick is the one-hot sum it is, so a log-softmax and its pick are
one row kernel. The classes may lie along a middle dimension (a segmentation loss over
``[N, C, d]`` or ``[N, C, H, W]`` logits: rows over that dimension read in place, the
target once per row through its strides), and a mean over kept elements divides one total
by another (the weights' sum, a mask's count), folded together. Each candidate computes the
reference on the interpreter at two sizes, with a one-pass and a looped row."""

from __future__ import annotations

import pytest

from tests.workers.search.child import check_rendered
from workers.search.trace import NoTemplate, trace_problem


def _problem(forward: str, x: str = "torch.randn(n, c)", t: str = "(n,)") -> str:
    return (
        "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"
        "n = 24\nc = 10\n\n\nclass Model(nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.w = nn.Parameter(torch.rand(c) + 0.5)\n\n"
        f"    def forward(self, x, t):\n        return {forward}\n\n\n"
        f"def get_inputs():\n    return [{x}, torch.randint(0, c, {t})]\n\n\n"
        "def get_init_inputs():\n    return []\n"
    )


# name: (problem, its plan's family, what the summary says)
CASES = {
    # cross-entropy written out: the log-softmax and its pick in one kernel, then the mean
    "manual-cross-entropy": (
        _problem("-F.log_softmax(x, 1).gather(1, t.unsqueeze(1)).squeeze(1).mean()"),
        "row", "then the mean of a per-row value over every row",
    ),
    "softmax-pick": (
        _problem("(x.softmax(-1).gather(-1, t[:, None]) * 2.0).squeeze(-1)"),
        "row", "reductions [max, sum, sum]",
    ),
    "weighted-sum-ignored": (
        _problem('F.cross_entropy(x, t, weight=self.w, ignore_index=3, reduction="sum") * 0.5'),
        "row", "then the sum of a per-row value over every row",
    ),
    # the mean divides by the summed weights of the kept rows: two totals, one quotient
    "weighted-mean": (_problem("F.nll_loss(F.log_softmax(x, 1), t, weight=self.w)"),
                      "row", "over the sum of another"),
    "segmentation-loss": (
        _problem("F.cross_entropy(x, t, weight=self.w, ignore_index=2)", "torch.randn(n, c, 6)",
                 "(n, 6)"),
        "row", "row-wise over dimension 1 of 3",
    ),
    "segmentation-pick": (
        _problem("-F.log_softmax(x, 1).gather(1, t.unsqueeze(1)).squeeze(1)",
                 "torch.randn(n, c, 6)", "(n, 6)"),
        "row", "row-wise over dimension 1 of 3",
    ),
    "segmentation-loss-2d": (
        _problem("F.cross_entropy(x, t, ignore_index=4)", "torch.randn(2, c, 3, 5)", "(2, 3, 5)"),
        "row", "t [2, 3, 5, 1] broadcast",
    ),
    "masked-mean": (
        _problem("(x.sum(-1) * (t > 4)).sum() / (t > 4).sum()"),
        "row", "then the sum of a per-row value over every row over the sum of another",
    ),
    # a column index along the last dimension beside rows over the classes: not the rows'
    # coordinate (it was once read as such, a wrong kernel); the masked values written first
    "last-dim-arange-beside-class-rows": (
        _problem("torch.where(torch.arange(x.shape[-1]) < 3, x, 0.0).softmax(1) + t[:, None]",
                 "torch.randn(n, c, 6)", "(n, 6)"),
        "chain+row", "kernels",
    ),
    # numbers applied to a total one after another, a negation among them
    "negated-scaled-total": (_problem("-(torch.relu(x).sum(-1).sum() / 4.0) * 3.0"),
                             "row", "then the sum of a per-row value over every row"),
}  # fmt: skip


def test_each_pick_is_lowered_as_the_reduction_it_is():
    for name, (source, family, says) in CASES.items():
        plan = trace_problem(source)
        assert plan.family == family and says in plan.summary, (name, plan.summary)


def test_each_candidate_computes_the_reference(tmp_path):
    problems = {name: source for name, (source, _, _) in CASES.items()}
    sizes = dict.fromkeys(problems, [{}, {"n": 7, "c": 33}])
    variants = [{}, {"strategy": "looped", "block_n": 16}]
    results = check_rendered(problems, variants, sizes, str(tmp_path))
    for name, result in results.items():
        assert len(result["errs"]) == 4, (name, result)
        for err in result["errs"]:
            assert not isinstance(err, str) and err < 1e-4, (name, result["errs"])


@pytest.mark.parametrize(
    "forward, x, t, says",
    [
        # several elements a row: not one pick
        ("x.gather(1, t)", "torch.randn(n, c)", "(n, 2)", "gather"),
    ],
    ids=["two-picks-a-row"],
)
def test_what_is_not_a_pick_is_refused_in_one_line(forward, x, t, says):
    with pytest.raises(NoTemplate, match=says) as info:
        trace_problem(_problem(forward, x, t))
    assert "\n" not in str(info.value)
