"""A reference that casts its output (``x.half()``, ``.to(torch.bfloat16)``) gets candidates
whose outputs have that dtype: the wrapper allocated them in the inputs' dtype before, and the
correctness gate rejected every candidate over the dtype alone."""

from __future__ import annotations

from tests.workers.search.child import check_rendered
from workers.search.trace import trace_problem

PROBLEM = """import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return BODY

rows, width = 8, 48

def get_inputs():
    return [torch.randn(rows, width)]

def get_init_inputs():
    return []
"""

CASTS = {
    "half": ("x.half()", "elementwise", 0.0),
    "relu-then-bf16": ("torch.relu(x * 3).to(torch.bfloat16)", "elementwise", 8e-3),
    "row-sum-in-half": ("x.half().sum(-1)", "row", 2e-3),
    "softmax-to-double": ("torch.softmax(x, -1).double()", "row", 1e-6),
    "cumsum-in-half": ("torch.cumsum(x, -1).half()", "scan", 2e-3),
    # Booleans and integers: allocated in the reference's dtype, the store converting (a
    # nonzero is True; an integer truncated towards zero, as torch casts)
    "any": ("(x > 1.0).any(-1)", "row", 0.0),
    "all-finite": ("torch.isfinite(x).all(dim=1)", "row", 0.0),
    "any-at-all": ("(x.abs() > 2.5).any()", "row", 0.0),
    "mask": ("(x > 0.5) & (x < 1.5)", "elementwise", 0.0),
    "absmax-int8": (
        "torch.round(x / x.abs().amax(-1, keepdim=True).clamp(min=1e-5) * 127).to(torch.int8)",
        "row",
        0.0,
    ),
}


def test_a_cast_output_has_the_reference_dtype(tmp_path):
    problems = {name: PROBLEM.replace("BODY", body) for name, (body, _, _) in CASTS.items()}
    sizes = {name: [{}, {"rows": 5, "width": 33}] for name in problems}
    results = check_rendered(problems, [{}], sizes, str(tmp_path))
    for name, (_, family, bound) in CASTS.items():
        got = results[name]
        assert got["family"] == family, (name, got["summary"])
        for err in got["errs"]:
            # a string says the dtype or shape differs; within one rounding of the cast dtype
            assert not isinstance(err, str) and err <= bound, (name, got["errs"])


def test_a_cast_to_float32_follows_the_inputs():
    """Traced with float32 inputs, ``.float()`` and ``.to(x.dtype)`` read the same: the
    output follows the inputs (a bf16 workload gets bf16 out of ``x.float().sum().to(x.dtype)``)."""
    plan = trace_problem(PROBLEM.replace("BODY", "x.float().sum(-1).to(x.dtype)"))
    assert "out_dtype" not in plan.extra
    plan = trace_problem(PROBLEM.replace("BODY", "x.half() * 2"))
    assert plan.extra["out_dtype"] == "torch.float16"
