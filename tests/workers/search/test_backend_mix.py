"""The back-end crossover (issue 15): where the fastest candidates per case include a Triton one
and a CuTe DSL one, the search writes one candidate that runs each case shape on the back end
that measured faster on it, and the gates treat it as both."""

from __future__ import annotations

import pytest

from tests.workers.search.per_case import (
    PerCaseEvaluator,
    per_case_fitness,
    softmax_campaign,
)
from workers import constants as C
from workers.catalog import catalog_get
from workers.cute_dsl import declared_backend
from workers.evaluate import EvaluationRequest, Evaluator
from workers.gates.static import check_static
from workers.search.generators import backend_mix
from workers.search.generators.base import EDGE_CROSSOVER, GenerationContext
from workers.search.generators.cute import CuteGenerator
from workers.search.generators.template import TemplateGenerator

ENTRY = catalog_get("rms_norm")
PROBLEM = ENTRY.problem_path.read_text()
WORKLOAD = ENTRY.workload(smoke=True)
FP32, BF16 = (c["name"] for c in WORKLOAD["cases"])  # t6_h80 (fp32), t3_h64_bf16


@pytest.fixture(scope="module")
def sources() -> tuple:
    ctx = GenerationContext(PROBLEM, workload=WORKLOAD, platform="cuda")
    (tri,) = TemplateGenerator().propose(ctx, 1)
    (cut,) = CuteGenerator().propose(ctx, 1)
    return tri, cut


def _parents(sources, triton: dict, cute: dict) -> list[dict]:
    """The two parents as the engine shows them, with their per-case speedups."""
    return [
        {"id": "n1", "generator": "template", "params": sources[0].params,
         "source": sources[0].source, "fitness": {"per_case": triton}},
        {"id": "n2", "generator": "cute", "params": sources[1].params,
         "source": sources[1].source, "fitness": {"per_case": cute}},
    ]  # fmt: skip


def _crossover(parents, winners):
    ctx = GenerationContext(
        PROBLEM, workload=WORKLOAD, platform="cuda", mode=EDGE_CROSSOVER, parents=parents,
        feedback={"per_case": winners},
    )  # fmt: skip
    return CuteGenerator().propose(ctx, 2)


def test_each_case_runs_on_the_back_end_that_measured_faster_and_both_compile(sources):
    parents = _parents(sources, {FP32: 1.30, BF16: 0.90}, {FP32: 1.10, BF16: 1.05})
    (mix,) = _crossover(parents, {FP32: "n1", BF16: "n2"})
    assert mix.edge == EDGE_CROSSOVER and mix.params["mix"] == {"triton": "n1", "cute": "n2"}
    assert mix.params["backends"] == {"6,80,float32": "triton", "3,64,bfloat16": "cute"}
    assert f"{BF16} cute (0.900x vs 1.050x)" in mix.note

    static = check_static(mix.source, PROBLEM)
    assert static.passed, static.reason
    assert static.backend == declared_backend(mix.source) == C.BACKEND_MIXED
    assert "_ke_rms_kernel" in static.kernels and len(static.kernels) >= 2
    # The declaration asks for both: a mixed module without its Triton kernels is refused.
    alone = check_static(mix.source.replace("@triton.jit\n", ""), PROBLEM)
    assert not alone.passed and "defines no @triton.jit kernel" in alone.reason

    request = EvaluationRequest(
        problem_source=PROBLEM, candidate_source=mix.source, platform="interpret",
        workload=WORKLOAD, trials=1,
    )  # fmt: skip
    with Evaluator() as ev:
        report = ev.evaluate(request)
    gates = {g.name: g for g in report.gates}
    compiled = gates["compile"]
    assert compiled.status == C.PASSED, compiled.reason
    assert compiled.evidence["backend"] == C.BACKEND_MIXED
    artifacts = compiled.evidence["artifacts"]
    by_kernel = {a["kernel"]: a.get("backend", C.BACKEND_TRITON) for a in artifacts}
    assert set(by_kernel.values()) == {C.BACKEND_TRITON, C.BACKEND_CUTE}, by_kernel
    assert gates["correctness"].rule == C.RULE_NEEDS_GPU


@pytest.mark.parametrize(
    "triton, cute, bf16",
    [
        # timed on both: the faster
        ({FP32: 1.30, BF16: 0.90}, {FP32: 1.10, BF16: 0.50}, None),
        # the CuTe parent untimed there (the performance gate stopped early), and Triton
        # beat the baseline: Triton keeps it, so one back end takes every case: no mix
        ({FP32: 1.30, BF16: 1.10}, {FP32: 1.10}, None),
        # ... but where the timed side lost to the baseline, the untimed side is tried
        ({FP32: 1.30, BF16: 0.90}, {FP32: 1.10}, C.BACKEND_CUTE),
        ({FP32: 1.30}, {FP32: 1.10, BF16: 0.70}, None),
    ],
)
def test_which_back_end_each_case_takes(sources, triton, cute, bf16):
    (mix,) = _crossover(_parents(sources, triton, cute), {FP32: "n1", BF16: "n1"}) or (None,)
    if bf16 is None:
        assert mix is None
    else:
        assert mix.params["backends"] == {"6,80,float32": "triton", "3,64,bfloat16": bf16}


def test_no_mix_without_a_parent_of_each_back_end(sources):
    parents = _parents(sources, {FP32: 1.30, BF16: 0.90}, {FP32: 1.10, BF16: 1.05})
    assert _crossover(parents[:1], {FP32: "n1", BF16: "n1"}) == []


def test_sources_that_define_a_name_differently_are_not_composed(sources):
    tri, cut = sources[0].source, sources[1].source
    clash = cut.replace("def _ke_plan(", "def _ke_config(")
    assert backend_mix.collisions(tri, cut) == ["ModelNew"]  # which compose renames
    with pytest.raises(backend_mix.CannotCompose, match="_ke_config"):
        backend_mix.compose(tri, clash, {"6,80,float32": "cute"}, ["x"], "x")


class _BackEndEvaluator(PerCaseEvaluator):
    """On this fake GPU, Triton is fast on short rows and CuTe on long ones: no candidate of
    either back end wins both cases, a mix that sends each to its back end does."""

    keys = {"short": "64,128,float32", "long": "8,8192,float32"}

    def evaluate(self, req):
        import json
        import re

        backend = declared_backend(req.candidate_source)
        table = re.search(r"_KE_BACKENDS = (\{.*?\})", req.candidate_source, re.S)
        runs = json.loads(table.group(1)) if table else {}
        on = {case: runs.get(key, backend) for case, key in self.keys.items()}
        per_case = {
            "short": 1.5 if on["short"] == C.BACKEND_TRITON else 1.0,
            "long": 1.5 if on["long"] == C.BACKEND_CUTE else 0.9,
        }
        fitness = per_case_fitness(per_case)
        if fitness["regresses"]:
            return self.report("rejected", "fitness", "a case regresses", fitness=fitness)
        return self.report(fitness=fitness)


def test_a_campaign_of_both_back_ends_combines_them_per_case(fake_report):
    """A cuda campaign with both generators: each back end wins one case, the per-case
    crossover goes to the cute generator too, and its mix wins both."""
    summary = softmax_campaign(_BackEndEvaluator(fake_report), 14, ["template", "cute"])
    mixed = [n for n in summary["nodes"] if n["note"].startswith("back-end crossover")]
    assert mixed, [n["note"] for n in summary["nodes"]]
    assert mixed[0]["edge"] == "crossover" and mixed[0]["generator"] == "cute"
    assert mixed[0]["fitness"]["per_case"] == {"short": 1.5, "long": 1.5}
    assert summary["best"]["id"] == mixed[0]["id"]
