"""A fake cuda evaluator for campaigns whose candidates score per case (the per-case and
back-end crossovers), and the fitness the gate would write from per-case speedups."""

from __future__ import annotations

import math


def per_case_fitness(per_case: dict) -> dict:
    """A fitness as the gate writes it, from per-case speedups over compile."""
    geo = math.exp(sum(math.log(v) for v in per_case.values()) / len(per_case))
    worst = min(per_case, key=per_case.get)
    return {
        "speedup": geo,
        "ci95": [geo * 0.995, geo * 1.005],
        "baseline": "compile",
        "worst_case": {"name": worst, "speedup": per_case[worst]},
        "regresses": per_case[worst] < 0.98,
        "per_case": per_case,
    }


class PerCaseEvaluator:
    """Stands in for the GPU: subclasses say what each candidate scores per case."""

    platform = "cuda"

    def __init__(self, report):
        self.report = report

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def baseline(self, req):
        return self.report(fitness=None)


def softmax_campaign(evaluator, budget: int, generators: list[str]) -> dict:
    """A cuda campaign over softmax with a short-row and a long-row case, run on ``evaluator``;
    its summary."""
    from workers.catalog import catalog_get
    from workers.search.engine import campaign_new, campaign_summary, run_campaign

    workload = {
        "cases": [
            {"name": "short", "overrides": {"batch_size": 64, "dim": 128}, "dtype": "float32"},
            {"name": "long", "overrides": {"batch_size": 8, "dim": 8192}, "dtype": "float32"},
        ]
    }
    state = campaign_new(
        problem_source=catalog_get("softmax").problem_source(),
        workload=workload,
        platform="cuda",
        max_candidates=budget,
        saturation_rounds=50,
        generators=generators,
    )
    run_campaign(state, evaluator=evaluator)
    return campaign_summary(state)
