"""Build large campaigns fast (bulk_create) for page, query-count and benchmark tests."""

import random

from django.utils import timezone

from apps.campaigns.constants import CampaignStatus, NodeStatus, Outcome, Platform
from apps.campaigns.models import Campaign, Edge, GateResult, Measurement, Node, Problem

PROBLEM_SOURCE = """import torch
import torch.nn as nn

batch_size = 16
dim = 1024


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
"""

CANDIDATE = """import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    tl.store(y_ptr + row * n_cols + cols, num / tl.sum(num, axis=0), mask=mask)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        softmax_kernel[(x.shape[0],)](x, y, x.shape[1], BLOCK={block}, num_warps={warps})
        return y
"""

GATES = ("static", "compile", "correctness", "performance", "fitness")
CASES = [("batch_size=16,dim=1024", 0.7), ("batch_size=64,dim=4096", 0.3)]


def _timing(rng, median):
    samples = sorted(round(median * rng.lognormvariate(0, 0.03), 5) for _ in range(40))
    return {
        "median_ms": median,
        "p10_ms": samples[4],
        "p90_ms": samples[36],
        "ci95_ms": [median * 0.98, median * 1.02],
        "samples": len(samples),
        "samples_ms": samples,
    }


def build_campaign(
    *,
    nodes: int = 2000,
    user=None,
    seed: int = 0,
    timed: bool = True,
    name: str = "big campaign",
    problem: Problem | None = None,
) -> Campaign:
    """A finished campaign with `nodes` candidates over rounds of 20, edges, gates and cases."""
    rng = random.Random(seed)
    if problem is None:
        problem, _ = Problem.objects.get_or_create(
            name=f"bench-softmax-{seed}",
            defaults={"title": "softmax", "family": "softmax", "source": PROBLEM_SOURCE},
        )
    now = timezone.now()
    campaign = Campaign.objects.create(
        name=name, problem=problem, platform=Platform.CUDA if timed else Platform.INTERPRET,
        status=CampaignStatus.COMPLETED, outcome=Outcome.IMPROVED, created_by=user,
        budget_candidates=nodes, started_at=now, finished_at=now,
        engine_state={"round": nodes // 20},
    )  # fmt: skip
    rows = []
    for i in range(nodes):
        fail = rng.random()
        if i < 5 or fail > 0.6:
            status, failed = NodeStatus.ACCEPTED, ""
        else:
            status = NodeStatus.REJECTED
            failed = GATES[min(4, int(fail / 0.15))]
        fitness = (
            round(rng.uniform(0.6, 1.6), 4)
            if timed and failed in ("", "performance", "fitness")
            else None
        )  # noqa: E501
        rows.append(
            Node(
                campaign=campaign,
                key=f"n{i + 1}",
                round=i // 20,
                generator="template",
                params={"BLOCK": 2 ** (6 + i % 5), "num_warps": 2 ** (i % 4)},
                source=CANDIDATE.format(block=2 ** (6 + i % 5), warps=2 ** (i % 4)),
                status=status,
                failed_gate=failed,
                reason=f"{failed} failed" if failed else "",
                fitness=fitness,
                fitness_ci_low=fitness and fitness * 0.97,
                fitness_ci_high=fitness and fitness * 1.03,
                device_seconds=0.05,
                wall_seconds=1.0,
                evaluated_at=now,
            )  # fmt: skip
        )
    Node.objects.bulk_create(rows, batch_size=500)
    rows = list(campaign.nodes.order_by("id"))
    edges, gates, measurements = [], [], []
    for i, node in enumerate(rows):
        parent = rows[rng.randrange(0, i)] if i >= 5 else None
        kind = (
            "seed"
            if parent is None
            else rng.choice(["mutation", "mutation", "repair", "crossover"])
        )  # noqa: E501
        edges.append(Edge(campaign=campaign, parent=parent, child=node, kind=kind))
        for order, gate in enumerate(GATES):
            state = "failed" if gate == node.failed_gate else "passed"
            gates.append(GateResult(node=node, order=order, name=gate, status=state,
                                    reason=f"{gate} {state}", evidence={"log": "ok"}))  # fmt: skip
            if state == "failed":
                break
        if node.fitness:
            for case, weight in CASES:
                median = rng.uniform(0.01, 0.2)
                t = _timing(rng, median)
                measurements.append(Measurement(
                    node=node, case=case, kind="workload", weight=weight, status="passed",
                    max_abs_err=1e-7, max_rel_err=1e-6, median_ms=median, p10_ms=t["p10_ms"],
                    p90_ms=t["p90_ms"], ci_low_ms=t["ci95_ms"][0], ci_high_ms=t["ci95_ms"][1],
                    samples_ms=t["samples_ms"],
                    baselines={"eager": _timing(rng, median * 1.3), "compile": _timing(rng, median * 1.1)},  # noqa: E501
                ))  # fmt: skip
    Edge.objects.bulk_create(edges, batch_size=500)
    GateResult.objects.bulk_create(gates, batch_size=1000)
    Measurement.objects.bulk_create(measurements, batch_size=500)
    best = max((n for n in rows if n.fitness), key=lambda n: n.fitness, default=rows[0])
    accepted = sum(1 for n in rows if n.status == NodeStatus.ACCEPTED)
    campaign.best_node, campaign.best_fitness = best, best.fitness
    campaign.candidates_evaluated = nodes
    campaign.device_seconds = 0.05 * nodes
    campaign.funnel = {
        "generated": nodes, "pending": 0, "accepted": accepted,
        "static_rejected": sum(1 for n in rows if n.failed_gate == "static"),
        "compile_failed": sum(1 for n in rows if n.failed_gate == "compile"),
        "incorrect": sum(1 for n in rows if n.failed_gate == "correctness"),
        "slower": sum(1 for n in rows if n.failed_gate in ("performance", "fitness")),
        "errored": 0, "device_s_by_gate": {"performance": 0.05 * nodes},
        "device_s_total": 0.05 * nodes, "device_s_per_accepted": 0.05 * nodes / accepted,
    }  # fmt: skip
    campaign.save()
    # The best node's report carries the timing cases, as a real evaluation's does.
    best.report = {
        "verdict": "accepted",
        "cases": [
            {"name": m.case, "kind": m.kind, "weight": m.weight, "status": m.status,
             "timing": {"median_ms": m.median_ms, "ci95_ms": [m.ci_low_ms, m.ci_high_ms],
                        "samples_ms": m.samples_ms}, "baselines": m.baselines}
            for m in best.measurements.all()
        ],
    }  # fmt: skip
    best.save(update_fields=["report"])
    return campaign
