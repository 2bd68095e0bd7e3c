"""In a real browser: a campaign without candidates shows "No candidates yet" and what happens
next where the search graph goes, never empty axes with meaningless ticks; the first candidate
replaces it with the graph, without a reload. A campaign that ended without any says so
(issue 12)."""

import pytest
from django.contrib.auth.models import User

from apps.campaigns.constants import CampaignStatus, NodeStatus, Platform
from apps.campaigns.models import Campaign, Edge, Node, Problem
from tests.campaigns.support.builders import PROBLEM_SOURCE, build_campaign
from tests.campaigns.support.graph_browser import graph_settled, graph_watch_socket
from tests.conftest import login, wait_for_js

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

GRAPH = "document.getElementById('search-graph')"
# What the graph's box shows: axes (Plotly's ticks), points, and whether each box is visible.
SHOWN = f"""() => ({{
  ticks: {GRAPH}.querySelectorAll('.xtick, .ytick').length,
  points: {GRAPH}.querySelectorAll('.scatterlayer .point').length,
  graphVisible: !!{GRAPH}.offsetParent,
  empty: document.getElementById('graph-empty')?.offsetParent
    ? document.getElementById('graph-empty').innerText : null,
}})"""


def _campaign(status: str) -> Campaign:
    problem, _ = Problem.objects.get_or_create(
        name="empty-softmax",
        defaults={"title": "softmax", "family": "softmax", "source": PROBLEM_SOURCE},
    )
    return Campaign.objects.create(
        name=f"{status} campaign",
        problem=problem,
        platform=Platform.INTERPRET,
        generators=["template"],
        status=status,
        created_by=User.objects.get(username="engineer"),
        budget_candidates=12,
    )


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_no_candidates_shows_what_comes_next_not_axes(
    asgi_server, demo_users, browser, artifacts_dir, scheme
):
    campaign = _campaign(CampaignStatus.RUNNING)
    context = browser.new_context(viewport={"width": 1440, "height": 900}, color_scheme=scheme)
    page = context.new_page()
    try:
        graph_watch_socket(page)
        login(page, asgi_server, "viewer", demo_users["viewer"])
        page.goto(f"{asgi_server}/campaigns/{campaign.pk}/")
        graph_settled(page)
        shown = page.evaluate(SHOWN)
        assert shown["ticks"] == 0 and not shown["graphVisible"], shown
        assert shown["empty"] and "No candidates yet" in shown["empty"], shown
        assert "first round" in shown["empty"] and "interpret" in shown["empty"], shown
        page.screenshot(path=str(artifacts_dir / f"graph-empty-{scheme}.png"), full_page=True)

        # The first candidate arrives (what a live event's redraw fetches): the graph replaces
        # the empty state in place.
        node = Node.objects.create(
            campaign=campaign, key="n1", round=0, generator="template", source="",
            status=NodeStatus.PENDING,
        )  # fmt: skip
        Edge.objects.create(campaign=campaign, parent=None, child=node, kind="seed")
        page.evaluate("window.__marker = 'no reload'")
        page.evaluate("window.keGraph.reload()")
        wait_for_js(page, f"{GRAPH}.dataset.nodeCount === '1' && window.keGraph.idle()")
        shown = page.evaluate(SHOWN)
        assert shown["graphVisible"] and shown["points"] == 1 and shown["empty"] is None, shown
        assert page.evaluate("window.__marker") == "no reload"
    finally:
        context.close()


def test_campaign_that_ended_without_candidates_says_so(asgi_server, demo_users, page):
    campaign = _campaign(CampaignStatus.CANCELLED)
    login(page, asgi_server, "viewer", demo_users["viewer"])
    page.goto(f"{asgi_server}/campaigns/{campaign.pk}/")
    wait_for_js(page, f"+({GRAPH}.dataset.renders || 0) > 0")
    shown = page.evaluate(SHOWN)
    assert shown["ticks"] == 0 and not shown["graphVisible"], shown
    assert "ended (cancelled) before the search proposed any candidate" in shown["empty"], shown


def test_campaign_with_candidates_shows_the_graph(asgi_server, demo_users, page):
    campaign = build_campaign(nodes=3, user=User.objects.get(username="engineer"))
    login(page, asgi_server, "viewer", demo_users["viewer"])
    page.goto(f"{asgi_server}/campaigns/{campaign.pk}/")
    wait_for_js(page, f"{GRAPH}.dataset.nodeCount === '3'")
    shown = page.evaluate(SHOWN)
    assert shown["graphVisible"] and shown["points"] == 3 and shown["empty"] is None, shown
