"""Graphs no one kernel holds without a matrix product in them (issue 11, generality:
"reductions over any dimensions"): a softmax over the batch then a sum over the features, a
row's statistic added before a transpose, a GroupNorm then a min over the channels. Each was
refused for its second set of reductions; it is now a chain of kernels (family
``chain+<family of the last stage>``, or a product's chain split further): the longest prefix
one kernel computes is written out and the rest reads it. Each is checked against the reference
on the interpreter at the traced sizes and at others, with two launch sets."""

from __future__ import annotations

import pytest

from tests.workers.search.child import check_rendered
from workers.search.trace import NoTemplate, trace_problem

PROBLEM = """import torch
import torch.nn as nn
import torch.nn.functional as F

b = 3
t = 10
d = 12


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(d, 16)

    def forward(self, x):
        return {body}


def get_inputs():
    return [torch.randn(b, t, d)]


def get_init_inputs():
    return []
"""

# name: (forward body, the family, what the summary says)
CHAINS = {
    "softmax-over-batch-then-sum": (
        "(torch.softmax(x, dim=0) * x).sum(dim=-1)",
        "chain+row",
        "2 kernels: row-wise over dimension 0 of 3",
    ),
    "row-statistic-then-transpose": (
        "(x + x.sum(-1, keepdim=True)).transpose(1, 2) * 0.5",
        "chain+elementwise",
        "read permuted (0, 2, 1)",
    ),
    "norm-then-mean-over-time": (
        "F.layer_norm(x, x.shape[-1:]).mean(dim=1)",
        "chain+row",
        "then row-wise over dimension 1 of 3",
    ),
    # a product, a softmax over the batch, then a sum over the features: the piece after the
    # product split in two
    "product-softmax-sum": (
        "torch.softmax(self.proj(x), dim=0).sum(-1) + 1.0",
        "matmul+row",
        "3 kernels",
    ),
}
SIZES = [{}, {"b": 2, "t": 5, "d": 33}]


def test_graphs_of_two_reduction_sets_are_chains_that_compute_the_reference(tmp_path):
    problems = {k: PROBLEM.format(body=body) for k, (body, _, _) in CHAINS.items()}
    sizes = {k: SIZES for k in problems}
    sizes["product-softmax-sum"] = [{}, {"b": 2, "t": 5}]  # d is the Linear's own
    variants = [{}, {"strategy": "looped", "block_n": 8}]
    results = check_rendered(problems, variants, sizes, str(tmp_path))
    for name, (_, family, says) in CHAINS.items():
        got = results[name]
        assert got["family"] == family, (name, got["summary"])
        assert says in got["summary"], (name, got["summary"])
        for err in got["errs"]:
            assert not isinstance(err, str) and err < 1e-4, (name, got["errs"])


def test_a_chain_does_not_hide_what_no_kernel_computes():
    """A cut helps only where each piece lowers: a sort between two reductions is still
    refused, with the single kernel's reason."""
    body = "torch.sort(torch.softmax(x, dim=0), dim=-1).values.sum(-1)"
    with pytest.raises(NoTemplate, match=r"sort"):
        trace_problem(PROBLEM.format(body=body))
