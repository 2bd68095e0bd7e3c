"""On the large-values edge case a candidate may be off by what a correct kernel can be off by:
twice the larger of torch's own error and the backward error (how far the reference moves when
every input moves by one rounding). On a GPU a float32 case has no higher-precision reference,
so without the backward error a kernel that sums a dot product in another order than torch was
rejected for differences of 1e-6 of the terms (seen on the H200: an einsum dot per head at 1e4
scale, off by 1.3e3 on sums of terms of 1e8)."""

from __future__ import annotations

import torch
import torch.nn as nn

from workers.gates.correctness import CaseChecker, _rounded_once


class Dot(nn.Module):
    def forward(self, x, y):
        return (x * y).sum(-1)


def _checker(high) -> CaseChecker:
    checker = CaseChecker.__new__(CaseChecker)  # only what own_error reads
    checker.exact, checker.device = False, "cpu"
    checker.high, checker.ref = high, Dot()
    checker.initial = {}  # no buffers: every call starts from none
    return checker


def _inputs():
    g = torch.Generator().manual_seed(0)
    return [torch.randn(64, 4096, generator=g) * 1e4, torch.randn(64, 4096, generator=g) * 1e4]


def test_every_float_input_moves_by_about_one_rounding():
    x, n = _inputs()[0], torch.arange(5)
    moved, same = _rounded_once([x, n])
    ratio = (moved.double() / x.double() - 1).abs()
    assert float(ratio.max()) <= torch.finfo(torch.float32).eps * 1.5  # one ulp, as rounded
    assert float(ratio.max()) > 0 and bool((moved == x).any())  # up, down or not at all
    assert same is n  # integers are left alone


def test_a_float32_case_without_a_higher_reference_allows_the_backward_error():
    inputs = _inputs()
    refs = [Dot()(*inputs)]
    (allowed,) = _checker(high=None).own_error(inputs, refs)
    # a dot in blocks of 256, summed in float32: another order than torch's
    x, y = inputs
    blocked = (x * y).view(64, 16, 256).sum(-1).sum(-1)
    off = float((blocked - refs[0]).abs().max())
    assert 0 < off <= 2 * allowed, (off, allowed)
    # a kernel off by far more than any rounding is not
    assert 1e-3 * float(refs[0].abs().max()) > 2 * allowed


def test_an_exact_case_allows_nothing():
    checker = _checker(high=None)
    checker.exact = True
    inputs = _inputs()
    assert checker.own_error(inputs, [Dot()(*inputs)]) == [0.0]


class SeesTF32(nn.Module):
    """Returns whether cuDNN may take TF32 for a float32 convolution while it runs."""

    def forward(self, x):
        return x + float(torch.backends.cudnn.allow_tf32)


def test_the_reference_convolves_float32_in_ieee_and_leaves_the_users_default():
    """cuDNN's default TF32 is about 1e-3 off: against it every correct float32 convolution
    would miss the contract's 1e-4. The reference runs without it; the setting comes back."""
    checker = _checker(high=None)
    checker.ref = SeesTF32()
    assert torch.backends.cudnn.allow_tf32, "PyTorch's default, which timing keeps"
    (out,) = checker.reference([torch.zeros(3)])
    assert out.tolist() == [0.0, 0.0, 0.0]
    assert torch.backends.cudnn.allow_tf32
