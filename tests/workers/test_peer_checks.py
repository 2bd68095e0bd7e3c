"""Peers are checked against the contract too (issue 11: acceptance against the strongest peer).

No other gate looks at a peer's output. A peer that is fast because it is less precise (compile's
float32 convolutions run cuDNN TF32 by default, about 1e-3 off where the contract asks 1e-4) or
an incumbent with a bug still sets the bar, but the verdict says so beside it: the user reading
"0.4x of compile" learns that compile's answer is not within their contract."""

from __future__ import annotations

import types

import torch
from torch import nn

from workers import constants as C
from workers.gates import performance
from workers.gates.fitness import fitness
from workers.gates.performance import summarize


class _Conv(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(8, 16, 3, padding=1)

    def forward(self, x):
        return self.conv(x)


def _low_precision(model):
    """The model's convolution with its operands rounded to bfloat16 first (a stand-in for a
    TF32 product: a shorter mantissa, float32 out)."""

    def run(x):
        w, b = model.conv.weight, model.conv.bias
        return torch.nn.functional.conv2d(x.bfloat16().float(), w.bfloat16().float(), b, padding=1)

    return run


def _case_job(peers: dict):
    """A job whose compile cache holds ``peers["compile"]`` for the case, the sides of every
    peer given, and the reference model they compute."""
    torch.manual_seed(0)
    model = _Conv()
    x = torch.randn(2, 8, 12, 12)
    case = {"name": "a", "kind": C.CASE_WORKLOAD, "overrides": {}, "dtype": "float32"}
    key = ("h", "{}", "float32", C.BASELINE_COMPILE, False)
    fns = {name: make(model) for name, make in peers.items()}
    state = types.SimpleNamespace(recorder=None, compiled={})
    if C.BASELINE_COMPILE in fns:
        state.compiled[key] = (model, fns[C.BASELINE_COMPILE])
    job = types.SimpleNamespace(device="cpu", state=state, problem_hash="h", train=False)
    sides = {name: types.SimpleNamespace(fn=fn, sets=[[x]]) for name, fn in fns.items()}
    sides[C.BASELINE_EAGER] = types.SimpleNamespace(fn=model, sets=[[x]])
    return job, case, model, sides


def test_a_peer_within_the_contract_passes_and_a_less_precise_one_is_named_with_its_error():
    def broken(model):
        def run(x):
            raise RuntimeError("the incumbent's kernel failed to launch")

        return run

    job, case, model, sides = _case_job(
        {C.BASELINE_COMPILE: _low_precision, C.BASELINE_INCUMBENT: broken}
    )
    checks = performance.check_peers(job, case, {}, model, sides)
    assert C.BASELINE_EAGER not in checks, "eager is the reference, not a peer"
    compile_check = checks[C.BASELINE_COMPILE]
    assert compile_check["passes"] is False
    assert compile_check["max_abs_err"] > 1e-3
    assert "outside atol=0.0001" in compile_check["reason"]
    assert checks[C.BASELINE_INCUMBENT] == {
        "passes": False,
        "max_abs_err": None,
        "reason": "RuntimeError: the incumbent's kernel failed to launch",
    }

    job, case, model, sides = _case_job({C.BASELINE_COMPILE: lambda m: m})
    assert performance.check_peers(job, case, {}, model, sides) == {
        C.BASELINE_COMPILE: {"passes": True, "max_abs_err": 0.0, "reason": None}
    }
    # A looser contract admits the lower precision (KernelBench's 1e-2).
    job, case, model, sides = _case_job({C.BASELINE_COMPILE: _low_precision})
    loose = {"tolerance": {"float32": {"atol": 1e-1, "rtol": 1e-1}}}
    assert performance.check_peers(job, case, loose, model, sides)[C.BASELINE_COMPILE]["passes"]


def test_a_peer_that_writes_into_its_input_does_not_fail_the_next_one():
    def in_place(model):
        def run(x):
            out = model(x)
            x.mul_(3.0)
            return out

        return run

    job, case, model, sides = _case_job(
        {C.BASELINE_COMPILE: in_place, C.BASELINE_INCUMBENT: lambda m: m}
    )
    checks = performance.check_peers(job, case, {}, model, sides)
    assert checks[C.BASELINE_COMPILE]["passes"] and checks[C.BASELINE_INCUMBENT]["passes"]


def test_a_contract_that_allows_nondeterminism_checks_no_peer():
    job, case, model, sides = _case_job({C.BASELINE_COMPILE: _low_precision})
    assert performance.check_peers(job, case, {"deterministic": False}, model, sides) == {}


def _perf_case(name, cand_ms, base_ms, checks):
    return {
        "name": name,
        "timing": summarize([cand_ms * (1 + 0.001 * i) for i in range(30)]),
        "baselines": {"compile": summarize([base_ms * (1 + 0.001 * i) for i in range(30)])},
        "peer_checks": checks,
    }


def test_the_verdict_says_when_its_judged_peer_misses_the_contract():
    miss = {"passes": False, "max_abs_err": 2.5e-3, "reason": "output 0: 90 of 2304 elements"}
    cases = [
        _perf_case("a", 2.0, 1.0, {"compile": miss}),
        _perf_case("b", 1.0, 1.0, {"compile": {"passes": True, "max_abs_err": 0.0}}),
    ]
    out = fitness(cases, {"a": 1, "b": 1}, "compile")
    # still judged against it: the peer is what the user runs today
    assert out["status"] == C.FAILED and out["rule"] == C.RULE_REGRESSION
    assert out["fitness"]["peer_misses"] == {"a": {"peer": "compile", **miss}}
    assert (
        "the judged peer misses the contract on 1 case(s), first a: compile max abs err "
        in (out["reason"])
    )
    clean = fitness([_perf_case("b", 1.0, 1.0, {})], {"b": 1}, "compile")
    assert "peer_misses" not in clean["fitness"] and "misses" not in clean["reason"]


def test_a_peer_is_checked_once_for_every_candidate_of_the_campaign():
    """Throughput (issue 11): the peers and the inputs are the same for the next candidate, so
    the check is not paid again; another seed or tolerance is checked anew."""
    calls = []

    def counted(model):
        def run(x):
            calls.append(1)
            return model(x)

        return run

    job, case, model, sides = _case_job({C.BASELINE_COMPILE: counted})
    first = performance.check_peers(job, case, {}, model, sides, seed=3)
    again = performance.check_peers(job, case, {}, model, sides, seed=3)
    assert first == again and first[C.BASELINE_COMPILE]["passes"] and len(calls) == 1
    performance.check_peers(job, case, {}, model, sides, seed=4)
    loose = {"tolerance": {"float32": {"atol": 1e-2, "rtol": 1e-2}}}
    performance.check_peers(job, case, loose, model, sides, seed=4)
    assert len(calls) == 3


def test_a_verdict_over_compile_says_where_eager_is_faster_still():
    """KernelBench 84 and 85 on an H100 (session 47): compile's depthwise convolutions take 2-5x
    eager's time, so a kernel 2x faster than compile is accepted and still slower than eager.
    Eager is not a peer (issue 11), but the verdict says so."""

    def case(name, eager_ratio):
        out = _perf_case(name, 1.0, 2.0, {})
        out["paired"] = {"eager": {"speedup": eager_ratio}}
        return out

    out = fitness([case("a", 0.42), case("b", 1.5)], {"a": 1, "b": 1}, "compile")
    assert out["status"] == C.PASSED
    assert out["fitness"]["behind_eager"] == {"a": 0.42}
    assert (
        "slower than eager on 1 case(s), worst a 0.420x (eager is shown, not judged)"
        in (out["reason"])
    )
    assert "eager" not in fitness([case("b", 1.5)], {"b": 1}, "compile")["reason"]
