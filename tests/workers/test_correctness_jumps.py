"""A function that jumps (the rounding of a quantiser) against a higher-precision reference.

On the CPU a float32 case is compared with the reference run in float64. Where an input lies
within one rounding of a jump, float32 and float64 land on different sides of it: torch's own
float32 answer is a whole step from the float64 one there. A kernel that computes what torch
computes was rejected for it (an int8 absmax quantiser, held out of the repository: 2 of 1M
elements one step off). An element now passes if it is within tolerance of either the
float64 reference or torch's answer in the case dtype; one off from both still fails."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

from workers import constants as C
from workers.gates.correctness import CaseChecker, CaseFailure


class AbsmaxQuant(nn.Module):
    def forward(self, x):
        scale = x.abs().amax(dim=-1, keepdim=True).clamp(min=1e-5) / 127.0
        return torch.round(x / scale).clamp(-128, 127) * scale


def _checker() -> CaseChecker:
    checker = CaseChecker.__new__(CaseChecker)  # what compare_outputs reads
    checker.exact, checker.device = False, "cpu"
    checker.tolerance = {"float32": {"atol": 1e-4, "rtol": 1e-4}}
    checker.max_abs = checker.max_rel = 0.0
    checker.high, checker.ref = AbsmaxQuant().double(), AbsmaxQuant()
    checker.initial = {}
    return checker


@pytest.fixture(scope="module")
def case():
    x = torch.randn(1024, 1024, generator=torch.Generator().manual_seed(0))
    return x, AbsmaxQuant()(x), AbsmaxQuant()(x.double())


def test_torch_own_float32_answer_is_a_step_from_float64_somewhere(case):
    x, own, high = case
    assert int(((own.double() - high).abs() > 1e-3).sum()) >= 1  # the premise of this file


def test_a_kernel_that_computes_what_torch_computes_passes(case):
    x, own, high = case
    checker = _checker()
    with pytest.raises(CaseFailure):  # against the float64 reference alone it would not
        checker.compare([own.clone()], [high], "trial 0")
    checker.compare_outputs([own.clone()], [high], [x], "trial 0")


def test_an_element_off_from_both_references_still_fails(case):
    x, own, high = case
    wrong = own.clone()
    wrong[5, 7] += 0.05  # a step where float32 and float64 agree
    with pytest.raises(CaseFailure) as info:
        _checker().compare_outputs([wrong], [high], [x], "trial 0")
    assert info.value.rule == C.RULE_MISMATCH
    assert "1 of 1048576 elements" in info.value.reason
    assert "of both references" in info.value.reason
    assert info.value.evidence["index"] == [5, 7]
