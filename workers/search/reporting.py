"""Reporting on a campaign: the funnel (counts per stage, device time per gate) and the
summary document (what the CLI writes and ``import_campaign`` reads)."""

from __future__ import annotations

import time

from workers.search.graph import STATUS_ACCEPTED, STATUS_PENDING, Graph
from workers.search.graph_store import GraphStore, StateGraphStore

FUNNEL_STAGES = (
    "generated",
    "pending",
    "static_rejected",
    "compile_failed",
    "incorrect",
    "slower",
    "errored",
    "accepted",
)
GATE_TO_STAGE = {
    "static": "static_rejected",
    "compile": "compile_failed",
    "correctness": "incorrect",
    "performance": "slower",
    "fitness": "slower",
}


def _total_device_s(graph: Graph) -> float:
    return sum(n.device_s for n in graph.nodes.values())


def funnel(state: dict, store: GraphStore | None = None) -> dict:
    """Counts per stage (they add up to ``generated``), device-seconds per gate, cost."""
    graph = (store or StateGraphStore(state)).graph(full=False)
    counts = dict.fromkeys(FUNNEL_STAGES, 0)
    device_by_gate: dict[str, float] = {}
    wall_by_gate: dict[str, float] = {}
    for node in graph.nodes.values():
        counts["generated"] += 1
        if node.status == STATUS_PENDING:
            counts["pending"] += 1
        elif node.status == STATUS_ACCEPTED:
            counts["accepted"] += 1
        else:
            counts[GATE_TO_STAGE.get(node.failed_gate or "", "errored")] += 1
        for gate in node.gates:
            name = gate.get("name") or "?"
            device_by_gate[name] = device_by_gate.get(name, 0.0) + float(gate.get("device_s") or 0)
            wall_by_gate[name] = wall_by_gate.get(name, 0.0) + float(gate.get("wall_s") or 0)
    device_total = _total_device_s(graph) + state.get("baseline_device_s", 0.0)
    return {
        **counts,
        "device_s_by_gate": device_by_gate,
        "wall_s_by_gate": wall_by_gate,
        "baseline_device_s": state.get("baseline_device_s", 0.0),
        "device_s_total": device_total,
        "device_s_per_accepted": device_total / counts["accepted"] if counts["accepted"] else None,
        "duplicates_dropped": state.get("duplicates", 0),
        # The baseline and tuner were a start kept on the same GPU host (start_cache).
        "start_reused": state.get("start_reused"),
    }


def campaign_summary(
    state: dict, *, with_sources: bool = True, store: GraphStore | None = None
) -> dict:
    """The campaign as one JSON document (what the CLI writes and ``import_campaign`` reads)."""
    store = store or StateGraphStore(state)
    graph = store.graph(full=with_sources)
    best = graph.nodes.get(state["best_id"]) if state["best_id"] else None
    best_dict = None
    if best is not None:
        best_dict = best.to_dict(with_report=False)
        best_dict["verdict"] = best.status
    cfg = {k: v for k, v in state["config"].items()}
    evaluated = sum(1 for n in graph.nodes.values() if n.status != STATUS_PENDING)
    wall = time.time() - state["started_at"]
    fun = funnel(state, store)
    device_min = fun["device_s_total"] / 60.0
    return {
        "outcome": state["outcome"],
        "stop_reason": state["stop_reason"],
        "message": state["message"],
        "platform": cfg["platform"],
        "rounds": state["round"],
        "funnel": fun,
        "best": best_dict,
        "best_history": state["best_history"],
        "first_accepted": state["first_accepted"],
        "candidates_evaluated": evaluated,
        "candidates_per_device_minute": evaluated / device_min if device_min > 0 else None,
        # The device is held for the whole campaign on a GPU host: evaluations per minute of
        # it, the start and parallel evaluations counted once (device_s adds each one's time).
        "candidates_per_wall_minute": evaluated / (wall / 60.0) if wall > 0 else None,
        "start_reused": state.get("start_reused"),
        "wall_s": wall,
        "device_s": fun["device_s_total"],
        "generators": state["generator_fit"],
        "generator_stats": state["generator_stats"],
        "fingerprint": state["fingerprint"],
        "harness_hash": state["harness_hash"],
        "baseline": state.get("baseline"),
        "config": cfg,
        "nodes": [n.to_dict(with_source=with_sources) for n in graph.nodes.values()],
        "edges": graph.edges,
    }
