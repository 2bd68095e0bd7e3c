"""What `evaluation_record` costs the control side as a campaign grows (CPU, SQLite).

Builds a running cuda campaign of N nodes in a fresh SQLite database (real H200 reports and
sources of docs/demo/h200-rms_norm.json), all recorded but the last TAIL + 1, then times
`evaluation_record` (the whole service: the campaign's row lock, the engine, the rows, the
evidence, the live events' rendering) on TAIL of them, and prints the medians (with and without
the live events) and the size of the saved `engine_state`.

    PYTHONPATH=. .venv/bin/python scripts/bench_evaluation_record.py --nodes 40 2000
"""

import argparse
import atexit
import copy
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "docs" / "demo" / "h200-rms_norm.json"
TAIL = 20


def _setup() -> None:
    folder = tempfile.mkdtemp(prefix="ke-bench-record-")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    os.environ["KERNELEVOLVE_DATA_DIR"] = folder
    os.environ.pop("DATABASE_URL", None)
    os.environ["REDIS_URL"] = "redis://127.0.0.1:1/0"  # never reached: events go in memory
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kernelevolve_site.settings.dev")
    sys.path.insert(0, str(ROOT))
    import django
    from django.conf import settings

    django.setup()
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def _build(n_nodes: int, demo: dict):
    """A running campaign whose first n_nodes - TAIL - 1 nodes are recorded, the rest
    dispatched (evaluating, with their evaluation keys)."""
    from django.contrib.auth.models import User
    from django.db import transaction

    from apps.campaigns.graph_store import RowGraphStore
    from apps.campaigns.models import Campaign, Problem
    from apps.campaigns.services.campaigns import campaign_create
    from apps.campaigns.services.evaluations import node_record_evidence
    from workers.search.engine import SearchEngine
    from workers.search.graph import Node as GraphNode

    reports = [node["report"] for node in demo["nodes"] if node.get("report")]
    sources = [node["source"] for node in demo["nodes"]]
    user, _ = User.objects.get_or_create(username=f"bench{n_nodes}")
    problem = Problem.objects.create(
        name=f"bench-rms-{n_nodes}", title="rms", source=demo["config"]["problem_source"]
    )
    campaign = campaign_create(
        problem=problem,
        created_by=user,
        platform="cuda",
        budget_candidates=n_nodes + 10,
        start=False,
    )
    Campaign.objects.filter(pk=campaign.pk).update(status="running")
    campaign.refresh_from_db()
    state = campaign.engine_state
    store = RowGraphStore(campaign)
    engine = SearchEngine.from_state(state, store=store, generators={}, keep_reports=False)
    engine.record_baseline(state, demo["baseline"])  # as services.search.baseline_record
    with transaction.atomic():
        for i in range(n_nodes):
            source = f"{sources[i % len(sources)]}\n# candidate {i}\n"
            store.add(GraphNode(id=f"n{i}", source=source, generator="template", edge="seed"))
        recorded = n_nodes - TAIL - 1
        rows = {row.key: row for row in campaign.nodes.all()}
        for i in range(recorded):
            report = copy.deepcopy(reports[i % len(reports)])
            engine.record(state, f"n{i}", report)
            node_record_evidence(node=rows[f"n{i}"], report=report)
        campaign.engine_state = state
        campaign.save()
        for i in range(recorded, n_nodes):
            rows[f"n{i}"].status = "evaluating"
            rows[f"n{i}"].evaluation_key = f"bench-{i}"
            rows[f"n{i}"].save(update_fields=["status", "evaluation_key"])
    return campaign, rows, reports


def _time_records(rows, reports, indices) -> list[float]:
    from apps.campaigns.services.search import evaluation_record

    times = []
    for i in indices:
        report = copy.deepcopy(reports[i % len(reports)])
        start = time.perf_counter()
        assert evaluation_record(
            node_id=rows[f"n{i}"].pk, evaluation_key=f"bench-{i}", report=report
        )
        times.append((time.perf_counter() - start) * 1e3)
    return times


def measure(n_nodes: int, demo: dict) -> dict:
    """Half the tail timed as it runs, half with the live events' rendering left out (what the
    record itself costs: the lock, the engine over the rows, the evidence, the counters)."""
    from apps.campaigns.models import Campaign
    from apps.campaigns.services import search

    campaign, rows, reports = _build(n_nodes, demo)
    first = n_nodes - TAIL - 1
    whole = _time_records(rows, reports, range(first, first + TAIL // 2))
    events = search.node_changed, search.campaign_changed
    search.node_changed = search.campaign_changed = lambda *a, **k: None
    try:
        bare = _time_records(rows, reports, range(first + TAIL // 2, n_nodes - 1))
    finally:
        search.node_changed, search.campaign_changed = events
    state = Campaign.objects.get(pk=campaign.pk).engine_state
    return {
        "nodes": n_nodes,
        "record_ms_median": round(statistics.median(whole), 1),
        "record_ms_without_live_events": round(statistics.median(bare), 1),
        "engine_state_kb": round(len(json.dumps(state)) / 1e3, 1),
        "engine_state_without_baseline_kb": round(
            len(json.dumps({k: v for k, v in state.items() if not k.startswith("baseline")})) / 1e3,
            1,
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[40, 2000])
    args = parser.parse_args()
    _setup()
    demo = json.loads(DEMO.read_text())
    for n_nodes in args.nodes:
        print(json.dumps(measure(n_nodes, demo)), flush=True)


if __name__ == "__main__":
    main()
