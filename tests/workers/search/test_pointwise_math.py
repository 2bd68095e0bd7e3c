"""Pointwise math a user's reference reaches for beyond the basic activations (issue 11,
"generality"): trigonometric and hyperbolic functions and their inverses, rounding, remainders,
comparisons and logic on masks, NaN-aware extremes, erfinv, lerp, logaddexp, nan_to_num. Each
becomes a candidate that computes what torch computes in float32 on the interpreter, at the
edges as well (infinities, NaN, signed zeros, halves, 1e4-scaled values), where a formula
written naively overflows or cancels."""

from __future__ import annotations

import json

import pytest

from tests.workers.search.child import run_child
from workers.search.trace import NoTemplate, trace_problem

GROUPS = {
    "trig": [
        "torch.tan(x)",
        "torch.atan(x)",
        "torch.asin(torch.tanh(x))",
        "torch.acos(torch.tanh(x))",
        "torch.atan2(x, y)",
        "torch.sinh(x)",
        "torch.cosh(x)",
        "torch.tanh(x)",
        "torch.asinh(x)",
        "torch.acosh(x.abs() + 1)",
        "torch.atanh(torch.tanh(x) * 0.5)",
        "torch.sinc(x)",
        "torch.hypot(x, y)",
    ],
    "rounding": [
        "torch.floor(x * 3)",
        "torch.ceil(x * 3)",
        "torch.round(x * 3)",
        "torch.round(x, decimals=2)",
        "torch.trunc(x * 3)",
        "torch.frac(x * 3)",
        "torch.fmod(x, 0.7)",
        "torch.remainder(x, -0.7)",
        "torch.remainder(x, y)",
        "torch.fmod(x, y)",
        "torch.copysign(x, y)",
        "torch.sgn(x)",
    ],
    "special": [
        "torch.erfc(x)",
        "torch.erfinv(torch.tanh(x) * 0.9)",
        "torch.log10(x.abs() + 1)",
        "torch.logit(torch.sigmoid(x), eps=1e-6)",
        "torch.special.xlog1py(x, y.abs())",
        "torch.log1p(x.abs())",
        "torch.expm1(x)",
        "torch.pow(2.0, x)",
        "torch.logaddexp(x, y)",
        "torch.logaddexp2(x, y)",
        "torch.lerp(x, y, 0.3)",
        "torch.lerp(x, y, torch.sigmoid(y))",
    ],
    "logic": [
        "(x == y).float()",
        "(x != y).float() * x",
        "torch.where((x > 0) & (y > 0), x, y)",
        "torch.where((x > 0) | (y > 0), x, y)",
        "torch.where(~(x > 0), x, y)",
        "torch.where((x > 0) ^ (y > 0), x, y)",
        "torch.where(torch.isnan(x), y, x)",
        "torch.where(torch.isinf(x), y, x)",
        "torch.where(torch.isfinite(x), x, y)",
        "torch.signbit(x).float()",
        "torch.heaviside(x, y)",
        "torch.fmax(x, y)",
        "torch.fmin(x, y)",
        "torch.clamp(x, min=y, max=y + 1)",
    ],
    "activations": [
        "F.celu(x, 0.5)",
        "F.threshold(x, 0.1, 20.0)",
        "F.hardshrink(x, 0.5)",
        "F.softshrink(x, 0.5)",
        "torch.addcmul(x, y, x, value=0.5)",
        "torch.addcdiv(x, y, y.abs() + 1, value=0.5)",
        "torch.nan_to_num(x / y)",
        "torch.nan_to_num(x, nan=0.0, posinf=1.0, neginf=-1.0)",
        "self.act(x)",
    ],
}


def _problem(exprs: list[str]) -> str:
    body = ",\n            ".join(exprs)
    act = "        self.act = nn.PReLU(cols, init=0.1)\n" if "self.act(x)" in exprs else ""
    return (
        "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"
        "rows = 8\ncols = 96\n\n\n"
        "class Model(nn.Module):\n"
        "    def __init__(self):\n"
        f"        super().__init__()\n{act}\n"
        "    def forward(self, x, y):\n"
        f"        return (\n            {body},\n        )\n\n\n"
        "def get_inputs():\n    return [torch.randn(rows, cols), torch.randn(rows, cols)]\n\n\n"
        "def get_init_inputs():\n    return []\n"
    )


# Each group's candidate against the reference on inputs with the edge values in them (x and y
# each get them, against random values and against each other) and at 1e4 scale: at every
# element, the same NaN and infinity and a value within 2e-6 of the magnitudes involved (the
# reference's and the inputs', where a difference cancels), the reference being float32 eager
# or the float64 result rounded to float32 (the correctness gate's: sinh(88.9) is finite,
# float32 eager overflows to inf).
_EDGES = r"""
import json, sys, torch
from workers.contract import problem as P
from workers.search.generators.template import DEFAULTS, render
from workers.search.trace import trace_problem

problems, folder = json.loads(sys.argv[1]), sys.argv[2]
special = [float("inf"), -float("inf"), float("nan"), 0.0, -0.0, 0.5, 2.5, -2.5, 1.0, -1.0,
           3.0, -0.7, 1e-7, -1e-30, 88.9, -89.2, 0.49999997]
out = {}
for name, src in problems.items():
    plan = trace_problem(src)
    cand = P.load_module(render(plan, DEFAULTS[plan.family]), f"c_{name}", folder)
    prob = P.load_module(src, f"p_{name}", folder)
    _, ref, new = P.make_models(prob, cand, {}, torch.float32, 0, "cpu", None)
    exact = P.make_models(prob, cand, {}, torch.float64, 0, "cpu", None)[1]
    bad = []
    for scale in (1.0, 1e4):
        x, y = (t * scale for t in P.make_inputs(prob, {}, torch.float32, 0, "cpu"))
        k = len(special)
        x[0, :k] = torch.tensor(special)
        y[1, :k] = torch.tensor(special)
        x[2, : k * k] = torch.tensor(special).repeat_interleave(k)[: x.shape[1]]
        y[2, : k * k] = torch.tensor(special).repeat(k)[: y.shape[1]]
        with torch.no_grad():
            got, want = new(x, y), ref(x, y)
            math_ = exact(x.double(), y.double())
        for i, (g, w, m) in enumerate(zip(got, want, math_, strict=True)):
            g, w, m = g.double(), w.double(), m.float().double()
            miss = []
            for r in (w, m):  # as float32 eager computes it, or the exact value rounded
                nonfinite = (g.isnan() != r.isnan()) | ((g.isinf() | r.isinf()) & (g != r))
                fin = g.isfinite() & r.isfinite()
                size = r.abs() + x.double().abs() + y.double().abs()  # cancellation
                miss.append(nonfinite | (fin & ((g - r).abs() > 2e-6 * size + 1e-6)))
            where = (miss[0] & miss[1]).nonzero()
            if len(where):
                r, c = where[0].tolist()
                seen = [float(t[r, c]) for t in (x, y, g, w, m)]
                bad.append(f"output {i} scale {scale:g} at x, y = {seen[0]:.9g}, {seen[1]:.9g}: "
                           f"{seen[2]:.9g} vs torch {seen[3]:.9g} / {seen[4]:.9g} "
                           f"({len(where)} such)")
    out[name] = {"family": plan.family, "summary": plan.summary, "bad": bad}
print("RESULTS" + json.dumps(out))
"""


def test_pointwise_math_matches_torch_at_the_edges(tmp_path):
    problems = {name: _problem(exprs) for name, exprs in GROUPS.items()}
    results = run_child(_EDGES, json.dumps(problems), str(tmp_path), timeout=600)
    for name, result in results.items():
        pointwise = result["family"] == "elementwise" or "reductions []" in result["summary"]
        assert pointwise, (name, result["summary"])  # a per-column PReLU weight: rows
        assert not result["bad"], (name, result["bad"])


@pytest.mark.parametrize(
    "forward, says",
    [
        ("torch.lgamma(x)", "lgamma.default, a special function no template writes"),
        ("torch.special.i0(x)", "i0.default, a special function no template writes"),
        ("torch.bitwise_and(x.long(), 3).float()", "bitwise_and.Scalar, which no template"),
        ("torch.pow(-2.0, x)", "a negative number"),
    ],
)
def test_what_the_templates_do_not_write_is_refused_in_one_line(forward, says):
    source = _problem([forward]).replace("(\n            ", "(").replace(",\n        )", ",)")
    with pytest.raises(NoTemplate, match=says):
        trace_problem(source)
