"""In a real browser: upload a problem with a trace, watch the graph fill in live while a real
worker runs on the interpreter, review a candidate (diff, evidence, shortcuts), comment, and find
the comment in a colleague's inbox. Upload errors show next to their field and create nothing."""

import pytest

from apps.campaigns.models import Campaign, Problem
from tests.campaigns.support.builders import PROBLEM_SOURCE, build_campaign
from tests.campaigns.support.graph_browser import graph_redraw, graph_settled, graph_watch_socket
from tests.conftest import login, wait_for_js

pytestmark = [pytest.mark.browser, pytest.mark.services, pytest.mark.django_db(transaction=True)]

TRACE = "batch_size,dim,count\n16,1024,300\n4,256,100\n16,1024,50\n"


def _files(tmp_path, source=PROBLEM_SOURCE, trace=TRACE):
    problem = tmp_path / "row_softmax.py"
    problem.write_text(source)
    trace_file = tmp_path / "trace.csv"
    trace_file.write_text(trace)
    return str(problem), str(trace_file)


def test_upload_watch_review_comment_inbox(
    asgi_server, demo_users, control_worker, eval_worker, page, artifacts_dir, tmp_path
):
    problem_path, trace_path = _files(tmp_path)
    login(page, asgi_server, "engineer", demo_users["engineer"])
    page.goto(asgi_server + "/campaigns/new/")
    page.set_input_files("#id_problem_file", problem_path)
    page.set_input_files("#id_trace_file", trace_path)
    page.fill("#id_budget_candidates", "3")
    page.click("#preview-button")
    # The trace became weights (repeated shapes merged), shown as a table and a chart.
    page.wait_for_selector("#workload-cases")
    rows = page.locator("#workload-cases tbody tr")
    assert rows.count() == 2
    assert "350" in rows.nth(0).inner_text() and "78%" in rows.nth(0).inner_text()
    page.wait_for_selector("#chart-weights .main-svg")
    assert "ran case" in page.inner_text("#reference-check")
    page.screenshot(path=str(artifacts_dir / "portal-upload-preview.png"), full_page=True)
    assert not Problem.objects.exists(), "a preview saves nothing"

    page.click("text=Start campaign")
    page.wait_for_url("**/campaigns/*/")
    campaign = Campaign.objects.get()
    assert campaign.problem.name == "row-softmax"
    page.evaluate("window.__marker = 'same page'")
    graph = page.locator("#search-graph")
    # Nodes appear on the graph as the worker's events arrive (no reload).
    wait_for_js(
        page,
        "parseInt(document.getElementById('search-graph').dataset.nodeCount || '0') >= 1",
        timeout=120_000,
    )
    page.wait_for_selector("#campaign-status.completed", timeout=300_000)
    wait_for_js(page, "document.querySelectorAll('#search-graph .scatterlayer .point').length >= 1")
    assert page.evaluate("window.__marker") == "same page"
    assert int(graph.get_attribute("data-renders")) >= 2, "the graph redrew from live events"
    assert "No timings: the interpret platform" in page.inner_text("#campaign-charts")
    page.screenshot(path=str(artifacts_dir / "portal-campaign-graph.png"), full_page=True)

    # Click a node on the graph to open the candidate.
    node = campaign.nodes.order_by("id").first()
    page.goto(f"{asgi_server}/campaigns/{campaign.pk}/nodes/{node.key}/")
    page.wait_for_selector("#node-source")
    page.keyboard.press("d")  # toggle to the first diff
    page.wait_for_selector("#code-tabs [aria-selected=true][data-view^=diff]")
    assert page.locator(".code-view:not([hidden]) table.diff").count() == 1
    assert page.locator(".code-view:not([hidden]) ins").count() >= 1
    page.keyboard.press("?")
    assert page.locator("#shortcuts-help").is_visible()
    page.keyboard.press("Escape")
    page.keyboard.press("e")
    assert page.locator("#gate-static").count() == 1
    page.click("#code-tabs [data-view=source]")
    page.click("[data-comment-line='5']")
    page.fill("#id_body", "@reviewer is the row max needed here?")
    page.click("#comment-form button[type=submit]")
    page.wait_for_selector("#comment-list .comment")
    assert "line 5" in page.inner_text("#comment-list")
    page.screenshot(path=str(artifacts_dir / "portal-candidate-review.png"), full_page=True)

    page.context.clear_cookies()
    login(page, asgi_server, "reviewer", demo_users["reviewer"])
    page.goto(asgi_server + "/campaigns/inbox/")
    assert "is the row max needed here?" in page.inner_text("#inbox-mentions")
    if campaign.nodes.filter(status="accepted").exists():
        assert campaign.name in page.inner_text("#inbox-review")
    page.screenshot(path=str(artifacts_dir / "portal-inbox.png"), full_page=True)


@pytest.mark.parametrize(
    ("source", "trace", "field", "message"),
    [
        (
            PROBLEM_SOURCE.replace("torch.softmax(x, dim=-1)", "torch.softmax(x, dim=-1) + y"),
            TRACE,
            "problem_file",
            "NameError: name 'y' is not defined",
        ),
        (PROBLEM_SOURCE, "batch_size,dimm,count\n16,1024,3\n", "trace_file", "dimm"),
        (PROBLEM_SOURCE, "batch_size,dim,count\n16,1024,3\n8,64,-2\n", "trace_file", "trace[1]"),
    ],
    ids=["broken-problem", "bad-field", "negative-count"],
)
def test_upload_errors_show_next_to_the_field(
    asgi_server, demo_users, page, tmp_path, source, trace, field, message
):
    problem_path, trace_path = _files(tmp_path, source, trace)
    login(page, asgi_server, "engineer", demo_users["engineer"])
    page.goto(asgi_server + "/campaigns/new/")
    page.set_input_files("#id_problem_file", problem_path)
    page.set_input_files("#id_trace_file", trace_path)
    page.click("text=Start campaign")
    page.wait_for_selector(f"#error-{field}")
    assert message in page.inner_text(f"#error-{field}")
    assert not Problem.objects.exists() and not Campaign.objects.exists()


def test_graph_of_2000_nodes_renders_and_keeps_zoom(asgi_server, demo_users, page, artifacts_dir):
    from django.contrib.auth.models import User

    campaign = build_campaign(nodes=2000, user=User.objects.get(username="engineer"))
    graph_watch_socket(page)
    login(page, asgi_server, "viewer", demo_users["viewer"])
    page.goto(f"{asgi_server}/campaigns/{campaign.pk}/")
    # Every node arrives (two pages merged); its time is in test_portal_benchmarks.py.
    wait_for_js(
        page, "document.getElementById('search-graph').dataset.nodeCount === '2000'", timeout=30_000
    )
    # The socket's catch-up redraw is over before the user zooms.
    graph_settled(page)
    # Zoom (mouse wheel) and pan (drag) like a user; a live redraw keeps the view.
    box = page.locator("#search-graph .nsewdrag").bounding_box()
    cx, cy = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    page.mouse.move(cx, cy)
    page.mouse.wheel(0, -400)
    page.mouse.down()
    page.mouse.move(cx - 150, cy, steps=5)
    page.mouse.up()
    page.wait_for_timeout(300)
    script = "document.getElementById('search-graph')._fullLayout.xaxis.range"
    zoomed = page.evaluate(script)
    assert zoomed != [-0.6, 100.6]
    graph_redraw(page)
    assert page.evaluate(script) == zoomed
    page.screenshot(path=str(artifacts_dir / "portal-graph-2000.png"), full_page=True)
