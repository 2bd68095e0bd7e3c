"""The timed calls are checked, not only the calls the correctness gate makes.

A candidate can tell when it is timed: ``torch.cuda.is_current_stream_capturing()`` is true
while the performance gate captures its graph, and a counter in the module passes the
correctness gate's few calls before it changes. Such a candidate computes the right answer for
the correctness gate and less (half the rows, a stale buffer) when timed, and wins. The
performance gate now holds the outputs of its last timed calls (the graph's last; each input
set's last under KernelBench timing) and checks them against the reference once the case is
timed (``performance.check_timed``).

The gate itself runs only on the cuda platform; these tests fill a side's held outputs the way
its timed calls do (``Side._keep``) with CPU tensors, so the check is what runs."""

from __future__ import annotations

import types
from pathlib import Path

import torch

from workers import constants as C
from workers.contract import problem as P
from workers.gates import performance
from workers.gates.performance import TIMED_CALL, TIMED_GRAPH

SILU = Path(__file__).parent / "fixtures" / "problems" / "silu.py"
CASE = {"name": "w", "kind": C.CASE_WORKLOAD, "overrides": {"batch_size": 4, "dim": 64}}


def _side(folder, mode=C.SERVING_KERNELBENCH, sets=3):
    problem = P.load_module(SILU.read_text(), "silu_timed", str(folder))
    job = types.SimpleNamespace(
        problem=problem, device="cpu", train=False, candidate=None,
        state=types.SimpleNamespace(recorder=None),
    )  # fmt: skip
    inputs = [P.make_inputs(problem, CASE["overrides"], None, k, "cpu") for k in range(sets)]
    side = performance.Side("candidate", None, inputs, None, mode, None)
    return job, side


def _silu(x):
    return x * torch.sigmoid(x)


def _call(side, how, i, out):
    side._keep(how, i, out)


def test_honest_timed_outputs_pass(tmp_path):
    job, side = _side(tmp_path)
    for i in range(7):
        _call(side, TIMED_CALL, i, _silu(side.sets[i % 3][0]))
    assert performance.check_timed(job, CASE, {}, side) is None


def test_a_candidate_that_computes_less_when_timed_fails_naming_the_set_and_the_error(tmp_path):
    job, side = _side(tmp_path)
    for i in range(3):
        out = _silu(side.sets[i][0])
        if i == 1:  # half the rows, on one input set only
            out[2:] = 0
        _call(side, TIMED_CALL, i, out)
    failure = performance.check_timed(job, CASE, {}, side)
    assert failure["rule"] == C.RULE_TIMED_MISMATCH
    said = "the outputs of the timed calls are not what the correctness gate saw"
    assert said in failure["reason"]
    assert "input set 1" in failure["reason"]
    assert "128 of 256 elements outside" in failure["reason"]


def test_a_timed_output_of_another_shape_fails(tmp_path):
    job, side = _side(tmp_path)
    for i in range(3):
        _call(side, TIMED_CALL, i, _silu(side.sets[i][0])[:2])
    failure = performance.check_timed(job, CASE, {}, side)
    assert failure["rule"] == C.RULE_TIMED_MISMATCH
    assert "has shape (2, 64), expected (4, 64)" in failure["reason"]


def test_a_buffer_the_candidate_reuses_is_judged_as_its_last_call_wrote_it(tmp_path):
    job, side = _side(tmp_path)
    buffer = torch.empty(4, 64)
    for i in range(5):  # sets 0, 1, 2, 0, 1: the last call's is set 1
        buffer.copy_(_silu(side.sets[i % 3][0]))
        _call(side, TIMED_CALL, i, buffer)
    assert performance.check_timed(job, CASE, {}, side) is None


def test_the_graphs_calls_decide_in_graph_mode_and_a_stale_one_fails(tmp_path):
    job, side = _side(tmp_path, mode=C.SERVING_GRAPH)
    _call(side, TIMED_CALL, 0, torch.zeros(4, 64))  # a host-overhead call: not what decides
    assert side.kept == {}, "graph mode holds only the graph's calls"
    for i in range(3):  # the graph returns set 0's answer for every set: a stale result
        _call(side, TIMED_GRAPH, i, _silu(side.sets[0][0]))
    failure = performance.check_timed(job, CASE, {}, side)
    assert failure["rule"] == C.RULE_TIMED_MISMATCH
    assert "the captured graph's calls, replayed, input set" in failure["reason"]


def test_a_forward_that_updates_its_buffers_is_not_checked(tmp_path):
    """Timed calls follow one another without a reset: a running statistic has moved on by
    the last one, so no single reference call can judge its output."""
    job, side = _side(tmp_path)
    stateful = tmp_path / "stateful.py"
    stateful.write_text(
        SILU.read_text()
        .replace(
            "        return x * torch.sigmoid(x)",
            "        self.calls += 1\n        return x * torch.sigmoid(x) + self.calls",
        )
        .replace(
            "        super().__init__()",
            '        super().__init__()\n        self.register_buffer("calls", torch.zeros(()))',
        )
    )
    job.problem = P.load_module(stateful.read_text(), "stateful_timed", str(tmp_path))
    _call(side, TIMED_CALL, 0, _silu(side.sets[0][0]) + 50)  # the 50th call's answer
    assert performance.check_timed(job, CASE, {}, side) is None
