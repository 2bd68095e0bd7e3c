"""The correctness gate compares an output in flat chunks (``C.COMPARE_CHUNK`` elements), so its
float64 temporaries stay bounded: a 1G-element float32 output compared whole took 48 GB and ran
an 80 GB H100 out of memory on KernelBench's small-K product. What a reviewer reads off a
rejection (how many elements, where the first one is, the worst error) must be the whole
output's, whichever chunk the errors fall in."""

from __future__ import annotations

import pytest
import torch

from workers import constants as C
from workers.gates.correctness import CaseChecker, CaseFailure, _max_finite


def _checker() -> CaseChecker:
    checker = CaseChecker.__new__(CaseChecker)  # only what compare reads
    checker.exact = False
    checker.tolerance = {"float32": {"atol": 1e-5, "rtol": 1e-5}}
    checker.max_abs = checker.max_rel = 0.0
    return checker


@pytest.fixture(params=[1 << 24, 1000, 7])
def chunk(request, monkeypatch):
    monkeypatch.setattr(C, "COMPARE_CHUNK", request.param)
    return request.param


def test_a_mismatch_names_the_whole_outputs_count_first_index_and_worst_error(chunk):
    ref = torch.randn(40, 300, generator=torch.Generator().manual_seed(0))
    out = ref.clone()
    out[17, 250] += 0.5  # in a later chunk when chunks are small
    out[31, 3] -= 2.0
    with pytest.raises(CaseFailure) as err:
        _checker().compare([out], [ref], "trial 0")
    assert "2 of 12000 elements outside" in str(err.value)
    assert err.value.evidence["index"] == [17, 250]
    assert err.value.evidence["max_abs_err"] == pytest.approx(2.0, rel=1e-5)


def test_nan_and_inf_where_the_reference_has_none_are_found_in_any_chunk(chunk):
    ref = torch.randn(50, 50, generator=torch.Generator().manual_seed(1))
    out = ref.clone()
    out[49, 48] = float("nan")
    with pytest.raises(CaseFailure, match="1 NaN where the reference has none") as err:
        _checker().compare([out], [ref], "trial 0")
    assert err.value.evidence["index"] == [49, 48]
    out = ref.clone()
    out[30, 1] = float("inf")
    with pytest.raises(CaseFailure, match="1 inf/NaN position") as err:
        _checker().compare([out], [ref], "trial 0")
    assert err.value.evidence["index"] == [30, 1]


def test_a_correct_output_passes_and_records_its_worst_error(chunk):
    ref = torch.randn(64, 64, generator=torch.Generator().manual_seed(2))
    out = ref + 1e-6
    checker = _checker()
    checker.compare([out], [ref], "trial 0")
    assert checker.max_abs == pytest.approx(1e-6, rel=0.2)
    assert _max_finite(out, ref) == pytest.approx(checker.max_abs)
