"""A workload in training mode (``"mode": "train"``; issue 11, generality: "training-mode batch
norm" was refused). BatchNorm then normalises by the batch's statistics per channel and moves its
running statistics towards them in place, counting the batch; a candidate must leave the module
as the reference does, so the kernel computes the statistics once, normalises with them and
stores the new running statistics into the module's own buffers (and bumps the counter on the
device). The correctness gate compares every buffer after the forward, so a kernel that only
gets the output right is rejected, with the buffer named. Eval mode stays the default, and the
trace now runs the module in the mode the gates run it in."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.workers.search.child import ROOT, run_child
from workers.contract.workload import WorkloadError, parse_workload
from workers.search.generators.template import DEFAULTS, render
from workers.search.trace import NoTemplate, trace_problem

HEAD = """import torch
import torch.nn as nn
import torch.nn.functional as F

"""

PROBLEMS = {
    # statistics over (0, 2, 3): rows gathered by coordinates, one per channel
    "bn2d": HEAD
    + """b = 3
c = 5
h = 6
w = 7


class Model(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.bn = nn.BatchNorm2d(c)
        with torch.no_grad():
            self.bn.running_mean.copy_(torch.linspace(-1.0, 1.0, c))
            self.bn.running_var.copy_(torch.linspace(0.5, 2.0, c))
            self.bn.weight.copy_(torch.linspace(0.5, 1.5, c))

    def forward(self, x):
        return torch.relu(self.bn(x))


def get_inputs():
    return [torch.randn(b, c, h, w) * 2.0 + 0.5]


def get_init_inputs():
    return [c]
""",
    # a product, then statistics over the batch (dim 0): rows along a leading dimension
    "linear-bn1d": HEAD
    + """rows = 12
features = 16
width = 24


class Model(nn.Module):
    def __init__(self, features, width):
        super().__init__()
        self.proj = nn.Linear(features, width)
        self.scale = nn.Parameter(torch.linspace(0.5, 2.0, width))
        self.bn = nn.BatchNorm1d(width, momentum=0.3, eps=1e-3)

    def forward(self, x):
        return F.gelu(self.bn(self.proj(x) * self.scale))


def get_inputs():
    return [torch.randn(rows, features)]


def get_init_inputs():
    return [features, width]
""",
    # [batch, channels, length]: statistics over (0, 2), no affine
    "bn1d-3d": HEAD
    + """b = 4
c = 6
n = 10


class Model(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.bn = nn.BatchNorm1d(c, affine=False)

    def forward(self, x):
        return self.bn(x) * 0.5


def get_inputs():
    return [torch.randn(b, c, n)]


def get_init_inputs():
    return [c]
""",
}

# Each plan rendered with every variant, run twice at each size on the interpreter against the
# reference in training mode: the largest error of the outputs and of every buffer after each
# call, relative to 1 + |reference|.
_TRAINED = r"""
import json, sys, torch
from workers.contract import problem as P
from workers.search.generators.template import DEFAULTS, render
from workers.search.trace import trace_problem

problems, variants, sizes = (json.loads(a) for a in sys.argv[1:4])
folder = sys.argv[4]
out = {}
for name, src in problems.items():
    plan = trace_problem(src, train=True)
    body = plan.stages[-1] if plan.stages else plan
    fam = body.family
    errs = []
    for i, v in enumerate(variants):
        for j, overrides in enumerate(sizes.get(name) or [{}]):
            code = render(plan, {**DEFAULTS[plan.family], **{f"{k}": x for k, x in v.items()}})
            cand = P.load_module(code, f"c_{name}_{i}_{j}", folder)
            prob = P.load_module(src, f"p_{name}_{i}_{j}", folder)
            _, ref, new = P.make_models(
                prob, cand, overrides, torch.float32, 0, "cpu", None, train=True
            )
            worst = {"out": 0.0}
            for call in range(2):
                x = P.make_inputs(prob, overrides, torch.float32, call, "cpu")
                with torch.no_grad():
                    got, want = new(*x), ref(*x)
                assert got.shape == want.shape, (got.shape, want.shape)
                err = ((got.double() - want.double()).abs() / (1 + want.double().abs())).max()
                worst["out"] = max(worst["out"], float(err))
                mine = dict(new.named_buffers())
                for key, b in ref.named_buffers():
                    d = (mine[key].double() - b.double()).abs() / (1 + b.double().abs())
                    worst[key] = max(worst.get(key, 0.0), float(d.max()))
            errs.append(worst)
    out[name] = {"family": plan.family, "summary": plan.summary, "errs": errs}
print("RESULTS" + json.dumps(out))
"""

VARIANTS = [
    {},  # one pass
    {"strategy": "looped", "block_n": 16},
    # few long rows cut into segments (each writes its part; segment 0 the running statistics)
    {"strategy": "looped", "block_n": 16, "max_one_pass": 64, "seg_programs": 64},
]
SIZES = {
    "bn2d": [{}, {"b": 1, "c": 3, "h": 9, "w": 11}],
    "linear-bn1d": [{}, {"rows": 5, "width": 7}],
    "bn1d-3d": [{}, {"c": 1, "n": 33}],
}


def test_batch_norm_in_training_mode_updates_the_running_statistics_as_torch_does(tmp_path):
    """Outputs and every buffer (running mean, running variance, the batch counter) match the
    reference after each of two calls, for every launch strategy and at other sizes than the
    traced ones."""
    variants = [dict(v) for v in VARIANTS]
    results = run_child(
        _TRAINED, json.dumps(PROBLEMS), json.dumps(variants), json.dumps(SIZES), str(tmp_path)
    )
    for name, result in results.items():
        assert "updates" in result["summary"] and "running_var" in result["summary"], result
        assert result["family"] == ("matmul+row" if name == "linear-bn1d" else "row"), result
        for worst in result["errs"]:
            assert set(worst) >= {"out", "bn.running_mean", "bn.running_var"}, worst
            assert worst["bn.num_batches_tracked"] == 0.0, (name, worst)
            assert max(worst.values()) < 1e-5, (name, worst)


def test_eval_is_the_default_and_the_trace_runs_the_module_as_the_gates_do():
    """A module left in training mode by its constructor (as KernelBench's are) is traced in
    eval mode unless the workload trains: an inference BatchNorm is elementwise."""
    plan = trace_problem(PROBLEMS["bn2d"])
    assert plan.family == "elementwise", plan.summary
    assert "updates" not in plan.summary
    trained = trace_problem(PROBLEMS["bn2d"], train=True)
    assert trained.family == "row"
    assert trained.extra["state_outputs"] == {
        "1": "self.bn.running_mean",
        "2": "self.bn.running_var",
    }
    assert trained.extra["counters"] == [["self.bn.num_batches_tracked", 1]]


def test_what_training_mode_still_refuses_is_said_in_one_line():
    cumulative = PROBLEMS["bn1d-3d"].replace("affine=False)", "affine=False, momentum=None)")
    with pytest.raises(NoTemplate, match=r"counter self.bn.num_batches_tracked .*momentum=None"):
        trace_problem(cumulative, train=True)


def test_the_workload_says_which_mode_and_refuses_any_other():
    assert parse_workload(None).mode == "eval"
    assert parse_workload({"mode": "train"}).to_dict()["mode"] == "train"
    with pytest.raises(WorkloadError, match=r"mode: must be one of eval, train"):
        parse_workload({"mode": "training"})


def _evaluate(tmp_path, candidate: str) -> dict:
    problem = tmp_path / "bn.py"
    problem.write_text(PROBLEMS["bn2d"])
    workload = tmp_path / "train.json"
    workload.write_text(json.dumps({"mode": "train", "cases": [{"name": "small"}]}))
    path = tmp_path / f"cand{abs(hash(candidate))}.py"
    path.write_text(candidate)
    proc = subprocess.run(
        [sys.executable, "-m", "workers", "evaluate", "--problem", str(problem), "--workload",
         str(workload), "--candidate", str(path), "--platform", "interpret", "--json"],
        capture_output=True, text=True, cwd=ROOT, timeout=400,
    )  # fmt: skip
    assert proc.stdout, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    return {g["name"]: g for g in report["gates"]}


def test_the_gate_rejects_a_kernel_that_leaves_the_running_statistics_behind(tmp_path):
    """Through ``python -m workers evaluate`` as a user runs it: the generated kernel passes
    every gate in training mode; the same kernel with the counter's bump, or the running mean's
    store, taken out gets the right outputs and is still rejected, naming the buffer."""
    plan = trace_problem(PROBLEMS["bn2d"], train=True)
    good = render(plan, dict(DEFAULTS["row"]))
    gates = _evaluate(tmp_path, good)
    assert gates["correctness"]["status"] == "passed", gates["correctness"]

    no_count = good.replace("        _ke_bump[(1,)](self.bn.num_batches_tracked, 1)\n", "")
    assert no_count != good
    gates = _evaluate(tmp_path, no_count)
    assert gates["correctness"]["status"] == "failed", gates["correctness"]
    assert gates["correctness"]["rule"] == "state_mismatch"
    assert "bn.num_batches_tracked is left as it was" in gates["correctness"]["reason"]

    twice = good.replace("(self.bn.num_batches_tracked, 1)", "(self.bn.num_batches_tracked, 2)")
    assert twice != good
    gates = _evaluate(tmp_path, twice)
    assert gates["correctness"]["rule"] == "state_mismatch", gates["correctness"]
    said = gates["correctness"]["reason"]
    assert "buffer bn.num_batches_tracked after the forward: differs bitwise" in said, said

    stale = good.replace("out1 = self.bn.running_mean", "out1 = torch.empty_like(in2)")
    assert stale != good
    gates = _evaluate(tmp_path, stale)
    assert gates["correctness"]["rule"] == "state_mismatch", gates["correctness"]
    assert "bn.running_mean is left as it was" in gates["correctness"]["reason"]


def test_dropout_in_training_mode_is_refused_as_random_in_one_line():
    """In eval mode dropout is the identity and the rest is lowered; in training mode it draws
    random numbers, and the refusal says so."""
    dropout = PROBLEMS["bn1d-3d"].replace(
        "return self.bn(x) * 0.5", "return F.dropout(self.bn(x), 0.2, self.training)"
    )
    assert trace_problem(dropout).family == "elementwise"
    with pytest.raises(NoTemplate, match=r"random numbers \(dropout in training mode"):
        trace_problem(dropout, train=True)
