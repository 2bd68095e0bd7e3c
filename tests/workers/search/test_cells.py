"""A 0-d parameter or buffer (``self.constant = nn.Parameter(torch.tensor(2.0))``, KernelBench
level 2's 68) is read by the kernel from its memory. Before, the candidate took ``float()`` of
it: a device-to-host copy on every call, which also breaks a CUDA graph's capture; in a matrix
product's epilogue it was refused, and the product and its epilogue became two kernels. Each
form is checked on the interpreter against the reference after the parameter changes (so no
traced value is baked in) and the kernel's source is read for the load."""

from __future__ import annotations

import json

from tests.workers.search.child import run_child
from workers.search.generators.template import DEFAULTS, render
from workers.search.trace import trace_problem

PROBLEM = """import torch
import torch.nn as nn
import torch.nn.functional as F

rows = 6
features = 12
width = 20


class Model(nn.Module):
    def __init__(self, features, width):
        super().__init__()
        self.proj = nn.Linear(features, width)
        self.constant = nn.Parameter(torch.tensor(0.25))
        self.register_buffer("shift", torch.tensor(-0.5))

    def forward(self, x):
        return {body}


def get_inputs():
    return [torch.randn(rows, features)]


def get_init_inputs():
    return [features, width]
"""

BODIES = {
    # the product and its epilogue: one kernel
    "matmul-min": ("torch.min(self.proj(x), self.constant) - self.constant", "matmul"),
    "elementwise": ("F.gelu(x) * self.constant + self.shift", "elementwise"),
    # in a reduction (a number argument there is refused; a parameter is read from memory)
    "row": ("torch.softmax(x * self.constant, dim=-1) + self.shift", "row"),
}

_CHECK = r"""
import json, sys, torch
from workers.contract import problem as P
from workers.search.generators.template import DEFAULTS, render
from workers.search.trace import trace_problem

problems, folder = json.loads(sys.argv[1]), sys.argv[2]
out = {}
for name, src in problems.items():
    plan = trace_problem(src)
    cand = P.load_module(render(plan, DEFAULTS[plan.family]), f"c_{name}", folder)
    prob = P.load_module(src, f"p_{name}", folder)
    _, ref, new = P.make_models(prob, cand, {}, torch.float32, 0, "cpu", None)
    errs = []
    for value in (0.25, -1.5):  # the parameters moved after the trace
        with torch.no_grad():
            for m in (ref, new):
                m.constant.fill_(value)
                m.shift.fill_(value * 2)
            x = P.make_inputs(prob, {}, torch.float32, 0, "cpu")
            errs.append(float((new(*x) - ref(*x)).abs().max()))
    out[name] = {"family": plan.family, "errs": errs}
print("RESULTS" + json.dumps(out))
"""


def test_zero_d_parameters_are_read_from_memory_in_every_family(tmp_path):
    problems = {k: PROBLEM.format(body=body) for k, (body, _) in BODIES.items()}
    results = run_child(_CHECK, json.dumps(problems), str(tmp_path))
    for name, (_, family) in BODIES.items():
        assert results[name]["family"] == family, results[name]
        assert max(results[name]["errs"]) < 1e-5, (name, results[name])
    for name, src in problems.items():
        plan = trace_problem(src)
        code = render(plan, DEFAULTS[plan.family])
        assert "float(self." not in code, name  # no device-to-host copy per call
        assert "tl.load(in" in code and ".to(tl.float32)" in code
