"""The back-end crossover (issue 15): where the fastest candidates per case include a Triton one
and a CuTe DSL one, the search writes one candidate that runs each case shape on the back end
that measured faster on it, and the gates treat it as both."""

from __future__ import annotations

import pytest

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


def test_no_mix_when_one_back_end_is_faster_on_every_case(sources):
    # The CuTe parent was timed on the fp32 case only (the performance gate stopped early):
    # an untimed case never goes to it.
    parents = _parents(sources, {FP32: 1.30, BF16: 0.90}, {FP32: 1.10})
    assert _crossover(parents, {FP32: "n1", BF16: "n1"}) == []
    # nor without a parent of each back end
    assert _crossover(parents[:1], {FP32: "n1", BF16: "n1"}) == []


def test_sources_that_define_a_name_differently_are_not_composed(sources):
    tri, cut = sources[0].source, sources[1].source
    clash = cut.replace("def _ke_plan(", "def _ke_config(")
    assert backend_mix.collisions(tri, cut) == ["ModelNew"]  # which compose renames
    with pytest.raises(backend_mix.CannotCompose, match="_ke_config"):
        backend_mix.compose(tri, clash, {"6,80,float32": "cute"}, ["x"], "x")
