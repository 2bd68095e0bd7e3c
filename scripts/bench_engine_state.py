"""What recording one evaluation costs the control side as a campaign grows (CPU only).

The portal saves the engine state after every evaluation. This builds a graph of N nodes with
the real H200 reports of docs/demo/h200-rms_norm.json, records them, and prints the time of
one ``SearchEngine.record`` near the end, the saved state's size and its ``json.dumps`` time,
with reports kept in the state (a standalone campaign) and without (the portal).

    PYTHONPATH=. .venv/bin/python scripts/bench_engine_state.py --nodes 300 2000
"""

import argparse
import copy
import json
import time
from pathlib import Path

from workers.search.engine import SearchEngine, campaign_new
from workers.search.graph import Graph, Node

DEMO = Path(__file__).resolve().parent.parent / "docs" / "demo" / "h200-rms_norm.json"
TAIL = 20


def measure(n_nodes: int, keep_reports: bool, demo: dict) -> dict:
    reports = [node["report"] for node in demo["nodes"] if node.get("report")]
    sources = [node["source"] for node in demo["nodes"]]
    state = campaign_new(
        problem_source=demo["config"]["problem_source"],
        workload=None,
        platform="cuda",
        max_candidates=n_nodes,
    )
    engine = SearchEngine.from_state(state, keep_reports=keep_reports)
    graph = Graph()
    for i in range(n_nodes):
        source = f"{sources[i % len(sources)]}\n# candidate {i}\n"
        graph.add(Node(id=f"n{i}", source=source, generator="template", edge="seed"))
    state["graph"] = graph.to_dict()
    for i in range(n_nodes - TAIL):
        engine.record(state, f"n{i}", copy.deepcopy(reports[i % len(reports)]))
    start = time.perf_counter()
    for i in range(n_nodes - TAIL, n_nodes):
        engine.record(state, f"n{i}", copy.deepcopy(reports[i % len(reports)]))
    record_ms = (time.perf_counter() - start) / TAIL * 1e3
    start = time.perf_counter()
    blob = json.dumps(state)
    dumps_ms = (time.perf_counter() - start) * 1e3
    return {
        "nodes": n_nodes,
        "keep_reports": keep_reports,
        "record_ms": round(record_ms, 1),
        "state_mb": round(len(blob) / 1e6, 2),
        "dumps_ms": round(dumps_ms, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[300, 2000])
    parser.add_argument(
        "--max-with-reports",
        type=int,
        default=500,
        help="skip keep_reports=True above this many nodes (hundreds of MB of state)",
    )
    args = parser.parse_args()
    demo = json.loads(DEMO.read_text())
    for n_nodes in args.nodes:
        for keep in (True, False):
            if keep and n_nodes > args.max_with_reports:
                continue
            print(json.dumps(measure(n_nodes, keep, demo)), flush=True)


if __name__ == "__main__":
    main()
