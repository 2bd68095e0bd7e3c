"""A Python number among a problem's inputs (KernelBench level 1's ``A * s`` with
``forward(self, A, s: float)``) is traced as a 0-d tensor, so the kernel takes it as an
argument: the candidate is right for values other than the one ``get_inputs`` gave the trace
(before, the trace baked the number in, and the template refused the input). A number in a
reduction is refused in words."""

from __future__ import annotations

import json

import pytest

from tests.workers.search.child import check_chained, run_child

SCALE = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, A: torch.Tensor, s: float) -> torch.Tensor:
        return A * s


def get_inputs():
    return [torch.rand(16, 8), 3.14]


def get_init_inputs():
    return []
"""

WITH_BROADCAST = SCALE.replace(
    "def forward(self, A: torch.Tensor, s: float) -> torch.Tensor:\n        return A * s",
    "def forward(self, A, s: float, b):\n"
    "        return torch.nn.functional.leaky_relu(A, 0.1) * s + b",
).replace("[torch.rand(16, 8), 3.14]", "[torch.randn(3, 16, 8), 0.3, torch.randn(16, 1)]")

_CHECK = r"""
import json, sys, torch
from workers.search.generators.template import render
from workers.search.trace import load_problem, trace_problem

src, calls = sys.argv[1], json.loads(sys.argv[2])
plan = trace_problem(src)
out = {"family": plan.family, "errs": []}
for params in ({}, {"block": 256, "vec": 2}):
    cand = {"__name__": "candidate_under_test"}
    exec(compile(render(plan, params), "candidate", "exec"), cand)
    for call in calls:
        torch.manual_seed(0)
        args = [torch.randn(a) if isinstance(a, list) else a for a in call]
        want = load_problem(src)["Model"]()(*args)
        got = cand["ModelNew"]()(*args)
        out["errs"].append(float((got - want).abs().max()))
print("RESULTS" + json.dumps(out))
"""


@pytest.mark.parametrize(
    "source, calls",
    [
        (SCALE, [[[16, 8], 2.5], [[5, 33], -1.0]]),
        (WITH_BROADCAST, [[[3, 16, 8], 0.7, [16, 1]], [[2, 4, 40], 2.0, [4, 1]]]),
    ],
    ids=["matrix-times-number", "number-and-broadcast-input"],
)
def test_a_number_input_is_a_kernel_argument_not_the_traced_value(source, calls):
    result = run_child(_CHECK, source, json.dumps(calls))
    assert result["family"] == "elementwise"
    assert len(result["errs"]) == 2 * len(calls)
    assert all(err < 1e-6 for err in result["errs"]), result


def test_a_number_in_a_reduction_is_a_chain(tmp_path):
    """The row kernels take no number argument (it was refused in words): the scaled values
    are written by an elementwise kernel that does, then summed (test_chain.py)."""
    source = SCALE.replace("return A * s", "return (A * s).sum(-1)")
    check_chained({"scaled-sum": source}, str(tmp_path))
