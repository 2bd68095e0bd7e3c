"""Page timings: every page a user sees, server time and SQL queries per page (issue 12).

Seeds the demo (`manage.py seed_demo`) on a fresh SQLite database in a temporary data folder
(its own embedded Redis for the cache), optionally adds a finished campaign of `--nodes` nodes
(the 2,000-node campaign of the portal benchmark, built as the tests build it), logs in with
Django's test Client and requests each page `--warmup` times untimed, then `--runs` times
timed. Time is the full Django request stack in-process (middleware, session, permissions,
view, template), no network. Prints page -> median / p95 ms, queries, and the response size.

    .venv/bin/python scripts/bench_pages.py --runs 30 --warmup 3 --nodes 2000

Object ids come from the seeded database: the campaign with the most nodes (or the big one),
its best node (else its newest), an artifact, its operator, a knowledge entry with versions.
Exits 1 if any page answers other than 200 or (with `--budget-ms`) a p95 is over budget.
"""

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def _setup(data_dir: Path) -> None:
    """Django on a fresh SQLite database under `data_dir`, DEBUG off, the test Client's host
    allowed. Must run before anything imports Django settings."""
    for name in ("DATABASE_URL", "REDIS_URL"):
        os.environ.pop(name, None)
    os.environ["KERNELEVOLVE_DATA_DIR"] = str(data_dir)
    os.environ["DJANGO_SETTINGS_MODULE"] = "kernelevolve_site.settings.dev"
    os.environ["DEBUG"] = "0"
    os.environ["ALLOWED_HOSTS"] = "testserver,127.0.0.1,localhost"
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()


def _seed(nodes: int) -> str:
    """Migrate, seed the demo and (if `nodes`) a big finished campaign; return the summary."""
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    call_command("seed_demo", stdout=open(os.devnull, "w"))
    if nodes:
        # The portal benchmark's builder (bulk_create: edges, gates, timed cases). A script,
        # not a production module, so it may borrow the tests' builder.
        from django.contrib.auth.models import User

        from tests.campaigns.support.builders import build_campaign

        build_campaign(nodes=nodes, user=User.objects.get(username="engineer"), name="big")
    return _summary()


def _summary() -> str:
    from apps.campaigns.models import Campaign, Node
    from apps.knowledge.models import Entry
    from apps.registry.models import Artifact

    return (
        f"{Campaign.objects.count()} campaigns, {Node.objects.count()} nodes, "
        f"{Artifact.objects.count()} artifacts, {Entry.objects.count()} knowledge entries"
    )


def _pages() -> dict[str, str]:
    """Page name -> URL, with real ids from the database."""
    from django.db.models import Count

    from apps.campaigns.models import Campaign
    from apps.knowledge.models import Entry
    from apps.registry.models import Artifact

    campaigns = Campaign.objects.annotate(n=Count("nodes")).order_by("-n", "pk")
    big = campaigns.first()
    node = big.best_node or big.nodes.order_by("-pk").first()
    other = big.nodes.exclude(pk=node.pk).order_by("-pk").first() or node
    pages = {
        "home (redirect)": "/",
        "healthz (no worker: 503)": "/healthz",
        "profile": "/accounts/profile/",
        "team": "/accounts/team/",
        "campaign list": "/campaigns/",
        "campaign new (form)": "/campaigns/new/",
        "inbox": "/campaigns/inbox/",
        "to freeze": "/campaigns/to-freeze/",
        "portfolio": "/campaigns/portfolio/",
        f"campaign detail ({big.n} nodes)": f"/campaigns/{big.pk}/",
        "campaign graph.json": f"/campaigns/{big.pk}/graph.json",
        "campaign reviews": f"/campaigns/{big.pk}/reviews/",
        "campaign charts": f"/campaigns/{big.pk}/charts/",
        "campaign insight": f"/campaigns/{big.pk}/insight/",
        "compare two candidates": f"/campaigns/{big.pk}/compare/?a={other.key}&b={node.key}",
        "candidate (review, diffs)": f"/campaigns/{big.pk}/nodes/{node.key}/",
        "registry index": "/registry/",
        "registry freeze list": "/registry/artifacts/",
        "knowledge index": "/knowledge/",
        "knowledge search": "/knowledge/?q=softmax",
        "knowledge curation": "/knowledge/curation/",
        "knowledge new (form)": "/knowledge/new/",
        "api campaigns": "/api/campaigns/",
        "api nodes": f"/api/campaigns/{big.pk}/nodes/",
    }
    artifact = Artifact.objects.select_related("region").order_by("-pk").first()
    if artifact:
        pages["artifact"] = f"/registry/artifacts/{artifact.pk}/"
        pages["registry operator"] = f"/registry/{artifact.region.operator}/"
    entry = Entry.objects.annotate(v=Count("versions")).order_by("-v", "pk").first()
    if entry:
        pages["knowledge entry"] = f"/knowledge/{entry.pk}/"
        pages["knowledge history"] = f"/knowledge/{entry.pk}/history/"
        pages["knowledge version"] = f"/knowledge/{entry.pk}/versions/1/"
    return pages


def _measure(client, url: str, runs: int, warmup: int) -> dict:
    from django.db import connection, reset_queries
    from django.test.utils import CaptureQueriesContext

    # The request resets the connection's query log when it starts; a log left from the last
    # page would make the context count from the wrong place.
    reset_queries()
    with CaptureQueriesContext(connection) as queries:
        answer = client.get(url)
    # Counted now: the next request empties the log the context reads from.
    n_queries = len(queries)
    size = len(answer.content) if not answer.streaming else 0
    for _ in range(warmup):
        client.get(url)
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        client.get(url)
        times.append((time.perf_counter() - t0) * 1e3)
    return {
        "status": answer.status_code,
        "median": statistics.median(times),
        "p95": _pct(times, 0.95),
        "queries": n_queries,
        "kb": size / 1e3,
    }


def _environment() -> str:
    import platform

    import django
    from django.db import connection

    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (
        f"{cpu}, {os.cpu_count()} cores, load {load:.2f}; Python {platform.python_version()}, "
        f"Django {django.get_version()}, {connection.vendor} {connection.Database.sqlite_version}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--nodes", type=int, default=0, help="add a campaign of N nodes")
    parser.add_argument("--user", default="admin", help="demo user to log in as")
    parser.add_argument("--only", default="", help="pages whose name contains this")
    parser.add_argument("--budget-ms", type=float, default=0, help="fail if a p95 is above")
    parser.add_argument(
        "--data-dir",
        type=Path,
        help="keep the seeded data here; reused without seeding if it holds a database",
    )
    args = parser.parse_args()

    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="ke-bench-pages-"))
    reuse = (data_dir / "kernelevolve.sqlite3").exists()
    _setup(data_dir)
    from django.conf import settings

    from kernelevolve_site.embedded_redis import ensure_embedded_redis, stop_embedded_redis

    started = ensure_embedded_redis(settings.DATA_DIR)
    try:
        t0 = time.perf_counter()
        summary = _summary() if reuse else _seed(args.nodes)
        print(summary, f"({'reused' if reuse else 'seeded'} in {time.perf_counter() - t0:.1f} s)")
        print(_environment())
        from django.contrib.auth.models import User
        from django.test import Client

        client = Client()
        client.force_login(User.objects.get(username=args.user))
        print(f"as {args.user}: {args.warmup} warm-up + {args.runs} timed requests per page\n")
        print("| page | median ms | p95 ms | queries | kB |\n|---|--:|--:|--:|--:|")
        failed = []
        # The home page redirects to the campaign list; health answers 503 here (no Celery
        # worker beside this process) after checking everything else, which is what is timed.
        expected = {"home (redirect)": 302, "healthz (no worker: 503)": 503}
        for name, url in _pages().items():
            if args.only and args.only not in name:
                continue
            r = _measure(client, url, args.runs, args.warmup)
            if r["status"] != expected.get(name, 200):
                failed.append(name)
                name = f"{name} (HTTP {r['status']})"
            over = args.budget_ms and r["p95"] > args.budget_ms
            if over:
                failed.append(name)
            print(
                f"| {name} | {r['median']:.1f} | {r['p95']:.1f}{' (over)' if over else ''} "
                f"| {r['queries']} | {r['kb']:.0f} |",
                flush=True,
            )
        return 1 if failed else 0
    finally:
        if started:
            stop_embedded_redis(settings.DATA_DIR)
        if not args.data_dir:
            shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
