"""A campaign's state: the outcomes it can end with, a fresh state, and the seeds a host brings.

The state is one small JSON-serialisable dict of scalars and bookkeeping; the search graph is the
store's (see :mod:`workers.search.engine`, whose docstring says what each outcome means).
"""

from __future__ import annotations

import time

from workers.search.generators.base import EDGE_SEED
from workers.search.graph import Node
from workers.search.graph_store import GraphStore, StateGraphStore

OUTCOME_IMPROVED = "improved"
OUTCOME_NO_SAFE_IMPROVEMENT = "no_safe_improvement"
OUTCOME_BUDGET_EXHAUSTED = "budget_exhausted"
OUTCOME_FAILED = "failed"
OUTCOMES = (
    OUTCOME_IMPROVED,
    OUTCOME_NO_SAFE_IMPROVEMENT,
    OUTCOME_BUDGET_EXHAUSTED,
    OUTCOME_FAILED,
)


def campaign_new(
    *,
    problem_source: str,
    workload: dict | None = None,
    platform: str = "interpret",
    generators: list[str] | tuple[str, ...] = ("template",),
    policy: str = "best_first",
    policy_args: dict | None = None,
    max_candidates: int = 40,
    max_device_s: float | None = None,
    max_wall_s: float | None = None,
    branches: int = 3,
    children_per_branch: int = 2,
    seeds: int = 4,
    repairs_per_round: int = 1,
    saturation_rounds: int = 3,
    target_speedup: float | None = None,
    baseline: str = "eager",
    incumbent_source: str | None = None,
    trials: int = 3,
    seed: int = 0,
    regression_tolerance: float = 0.02,
    time_limit_s: float = 120.0,
    problem_name: str = "",
    tune: bool = True,
) -> dict:
    """A fresh campaign state (plain JSON data; the graph is the store's, see the module doc).
    ``tune``: a cuda campaign runs the per-case tuner on the GPU host beside its baseline, and
    the template generator's first seed is its table (``workers.search.tuning``)."""
    return {
        "version": 1,
        "config": {
            "problem_name": problem_name,
            "problem_source": problem_source,
            "workload": workload,
            "platform": platform,
            "generators": list(generators),
            "policy": policy,
            "policy_args": dict(policy_args or {}),
            "budget": {
                "max_candidates": max_candidates,
                "max_device_s": max_device_s,
                "max_wall_s": max_wall_s,
            },
            "branches": branches,
            "children_per_branch": children_per_branch,
            "seeds": seeds,
            "repairs_per_round": repairs_per_round,
            "saturation_rounds": saturation_rounds,
            "target_speedup": target_speedup,
            "baseline": baseline,
            "incumbent_source": incumbent_source,
            "trials": trials,
            "seed": seed,
            "regression_tolerance": regression_tolerance,
            "time_limit_s": time_limit_s,
            "tune": tune,
        },
        "round": 0,
        "next_id": 1,
        "best_id": None,
        "best_history": [],
        "rounds_without_improvement": 0,
        "improved_in_round": False,
        "started_at": time.time(),
        "baseline": None,
        "baseline_device_s": 0.0,
        "first_accepted": None,
        "generator_stats": {},
        "generator_fit": {},
        "duplicates": 0,
        "outcome": None,
        "stop_reason": None,
        "message": "",
        "fingerprint": None,
        "harness_hash": None,
    }


def seed_add(
    state: dict,
    *,
    source: str,
    generator: str,
    params: dict | None = None,
    note: str = "",
    store: GraphStore | None = None,
) -> str:
    """Add a seed the host brings (a warm start from an earlier campaign's node) as a pending
    node before the first round; returns its id. Its evaluation is the campaign's first."""
    node_id = f"n{state['next_id']}"
    (store or StateGraphStore(state)).add(
        Node(
            id=node_id,
            source=source,
            generator=generator,
            edge=EDGE_SEED,
            params=dict(params or {}),
            note=note,
            round=state["round"],
        )
    )
    state["next_id"] += 1
    return node_id
