"""Portal benchmarks (docs/benchmarks.md, "Portal (issue 5)"): they print, they assert no time.

    KERNELEVOLVE_DATA_DIR=/tmp/ke-portal .venv/bin/python -m pytest benchmarks/bench_portal.py -q -s

Server time is measured in-process through Django's full request stack (middleware, session,
permissions, view, template), with a warm cache, on a 2,000-node campaign built with bulk_create
whose engine state is the size a real one of 2,000 nodes has.
"""

import json
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.test import Client

from tests.campaigns.support.builders import build_campaign
from tests.campaigns.support.graph_browser import graph_redraw, graph_watch_socket
from tests.conftest import login, wait_for_js

ROOT = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.django_db(transaction=True)]
RUNS = 40


def _pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def _engine_state_of(n_nodes: int) -> dict:
    """What the control side keeps for a finished cuda campaign of `n_nodes`: the search's
    scalars and the real H200 baseline from docs/demo, recorded as the portal records it
    (without raw samples; the graph is the rows)."""
    from workers.search.engine import campaign_new
    from workers.search.recording import _without_samples

    demo = json.loads((ROOT / "docs" / "demo" / "h200-rms_norm.json").read_text())
    state = campaign_new(
        problem_source=demo["config"]["problem_source"], workload=None, platform="cuda"
    )
    state["baseline"] = _without_samples(demo["baseline"])
    state["round"] = n_nodes // 20
    state["next_id"] = n_nodes + 1
    return state


def test_page_server_times(demo_users):
    engineer = User.objects.get(username="engineer")
    campaign = build_campaign(nodes=2000, user=engineer)
    campaign.engine_state = _engine_state_of(2000)
    campaign.save(update_fields=["engine_state"])
    print(f"\nengine state: {len(json.dumps(campaign.engine_state)) / 1e3:.1f} kB")
    for i in range(30):  # a list of realistic length around it
        build_campaign(nodes=3, user=engineer, seed=100 + i, timed=False, name=f"small {i}")
    client = Client()
    client.force_login(User.objects.get(username="viewer"))
    best = campaign.best_node.key
    pages = {
        "campaign list": "/campaigns/",
        "campaign detail (2,000 nodes)": f"/campaigns/{campaign.pk}/",
        "graph page JSON (1,000 nodes)": f"/campaigns/{campaign.pk}/graph.json",
        "candidate review": f"/campaigns/{campaign.pk}/nodes/{best}/",
        "API campaign list": "/api/campaigns/",
        "API nodes page": f"/api/campaigns/{campaign.pk}/nodes/",
    }
    print("\n| page | p50 ms | p95 ms |\n|---|---|---|")
    for name, url in pages.items():
        assert client.get(url).status_code == 200
        times = []
        for _ in range(RUNS):
            t0 = time.perf_counter()
            client.get(url)
            times.append((time.perf_counter() - t0) * 1000)
        print(f"| {name} | {statistics.median(times):.1f} | {_pct(times, 0.95):.1f} |")


@pytest.mark.services
@pytest.mark.browser
def test_event_to_browser_latency(asgi_server, demo_users, page):
    from django.template.loader import render_to_string

    from kernelevolve_site.events import send_event

    campaign = build_campaign(nodes=20, user=User.objects.get(username="engineer"), timed=False)
    login(page, asgi_server, "viewer", demo_users["viewer"])
    page.goto(f"{asgi_server}/campaigns/{campaign.pk}/")
    wait_for_js(page, "document.getElementById('search-graph').dataset.nodeCount === '20'")
    page.wait_for_timeout(500)
    node = campaign.nodes.first()
    latencies, graph_latencies = [], []
    for i in range(20):
        node.reason = f"bench {i}"
        html = render_to_string("campaigns/partials/node_row.html", {"node": node, "oob": True})
        page.evaluate(
            """(text) => new Promise((resolve) => {
                window.__seen = null; window.__graphAt = null;
                const renders = document.getElementById('search-graph').dataset.renders;
                const obs = new MutationObserver(() => {
                  if (document.body.innerText.includes(text) && !window.__seen) {
                    window.__seen = Date.now();
                  }
                });
                obs.observe(document.body, {subtree: true, childList: true, characterData: true});
                const poll = setInterval(() => {
                  if (document.getElementById('search-graph').dataset.renders !== renders) {
                    window.__graphAt = Date.now(); clearInterval(poll);
                  }
                }, 5);
                resolve();
            })""",
            f"bench {i}",
        )
        sent = time.time() * 1000
        # Playwright's loop owns this thread: send from a thread of its own, as a worker would.
        with ThreadPoolExecutor(max_workers=1) as pool:
            pool.submit(send_event, f"campaign-{campaign.pk}", "campaign.node", html=html).result()
        wait_for_js(page, "window.__seen !== null && window.__graphAt !== null")
        latencies.append(page.evaluate("window.__seen") - sent)
        graph_latencies.append(page.evaluate("window.__graphAt") - sent)
        page.wait_for_timeout(400)
    print(
        f"\nevent -> row swapped: p50 {statistics.median(latencies):.0f} ms, "
        f"p95 {_pct(latencies, 0.95):.0f} ms; event -> graph redrawn: p50 "
        f"{statistics.median(graph_latencies):.0f} ms, p95 {_pct(graph_latencies, 0.95):.0f} ms"
    )


@pytest.mark.services
@pytest.mark.browser
def test_graph_render_of_2000_nodes(asgi_server, demo_users, page):
    campaign = build_campaign(nodes=2000, user=User.objects.get(username="engineer"))
    graph_watch_socket(page)
    login(page, asgi_server, "viewer", demo_users["viewer"])
    t0 = time.perf_counter()
    page.goto(f"{asgi_server}/campaigns/{campaign.pk}/")
    graph = "document.getElementById('search-graph')"
    wait_for_js(page, f"{graph}.dataset.nodeCount === '2000'", timeout=30_000)
    open_ms = (time.perf_counter() - t0) * 1000
    renders = [int(page.get_attribute("#search-graph", "data-render-ms"))]
    for _ in range(5):  # live redraws: both pages fetched again, merged, Plotly.react
        graph_redraw(page)
        renders.append(int(page.get_attribute("#search-graph", "data-render-ms")))
    print(
        f"\ngraph of 2,000 nodes: fetch+merge+render first {renders[0]} ms, redraws p50 "
        f"{statistics.median(renders[1:]):.0f} ms; page open to drawn {open_ms:.0f} ms"
    )
