"""The search insight page over HTTP: the seeded demo's GPU searches show every plot, a campaign
with nothing to relate says why, and the campaign page links to it."""

import json
import re

import pytest

from apps.campaigns.constants import NodeStatus
from apps.campaigns.models import Campaign
from apps.campaigns.services.demo import demo_campaigns_seed
from tests.campaigns.support.builders import build_campaign

pytestmark = pytest.mark.django_db


def figure(html: str, script_id: str) -> dict:
    match = re.search(rf'<script id="{script_id}" type="application/json">(.*?)</script>', html)
    assert match, f"{script_id} missing"
    return json.loads(match.group(1))


def test_seeded_demo_search_shows_every_plot(client, users, django_assert_max_num_queries):
    demo_campaigns_seed()
    campaign = Campaign.objects.get(name="rms-norm on cuda (imported)")
    client.force_login(users["viewer"])
    detail = client.get(f"/campaigns/{campaign.pk}/").content.decode()
    assert f'href="/campaigns/{campaign.pk}/insight/"' in detail
    with django_assert_max_num_queries(8):
        response = client.get(f"/campaigns/{campaign.pk}/insight/")
    assert response.status_code == 200
    html = response.content.decode()
    assert 'id="insight-empty"' not in html
    # 14 template candidates, all timed on the H200: 12 accepted, 2 rejected after timing.
    assert 'id="insight-timed-count">14<' in html and 'id="insight-rejected-count">2<' in html
    importance = figure(html, "figure-importance")["data"][0]
    assert set(importance["y"]) >= {"strategy", "block_n", "tile", "vec"}
    assert all(0 <= share <= 100 for share in importance["x"])
    parallel = figure(html, "figure-parallel")
    titles = [a["text"] for a in parallel["layout"]["annotations"] if a.get("name")]
    ticks = {a["text"] for a in parallel["layout"]["annotations"] if not a.get("name")}
    # max_one_pass took 8192 once: varied, so it has an axis, as has every other parameter.
    assert titles == [f"<b>{name}</b>" for name in importance["y"]] + [
        "<b>verdict</b>",
        "<b>fitness (×)</b>",
    ]
    assert {"auto", "looped", "one_pass", "rejected", "accepted", "8192", "16384"} <= ticks
    lines = [t for t in parallel["data"] if t["mode"] == "lines+markers"]
    assert sum(t["x"].count(None) for t in lines) == 14  # one line per timed candidate
    slices = [figure(html, f"figure-slice-{i}") for i in range(1, len(importance["y"]) + 1)]
    assert {s["layout"]["xaxis"]["title"]["text"] for s in slices} == set(importance["y"])
    history = figure(html, "figure-history")["data"]
    names = [t["name"] for t in history]
    assert names[:3] == ["accepted", "rejected after timing", "campaign's best so far"]
    assert history[0]["marker"]["symbol"] == "circle" and history[1]["marker"]["symbol"] == (
        "circle-open"
    )
    # The line follows the campaign's own rule: n5's 7.61× overlaps n1's interval, so n1 stays.
    best = history[2]
    assert set(best["text"]) == {campaign.best_node.key}
    assert best["y"][-1] == pytest.approx(campaign.best_fitness)


def test_llm_only_campaign_says_why_it_has_no_parameter_plots(client, users):
    campaign = build_campaign(nodes=6, user=users["engineer"])
    campaign.nodes.update(generator="llm", params={"model": "m"})
    client.force_login(users["viewer"])
    html = client.get(f"/campaigns/{campaign.pk}/insight/").content.decode()
    assert 'id="insight-empty"' in html
    assert "LLM-written candidates carry no parameters" in html
    assert 'id="chart-parallel"' not in html and 'id="chart-importance"' not in html
    assert 'id="chart-history"' in html  # their fitness history still reads


def test_unevaluated_campaign_shows_empty_states(client, users):
    campaign = build_campaign(nodes=1, user=users["engineer"])
    campaign.nodes.update(status=NodeStatus.PENDING, fitness=None, evaluated_at=None)
    client.force_login(users["viewer"])
    html = client.get(f"/campaigns/{campaign.pk}/insight/").content.decode()
    assert "No candidate has been evaluated yet (1 waiting for an evaluation worker)" in html
    assert 'id="chart-history-empty"' in html


def test_rejected_and_untimed_candidates_are_counted_apart(client, users):
    campaign = build_campaign(nodes=40, user=users["engineer"])
    client.force_login(users["viewer"])
    html = client.get(f"/campaigns/{campaign.pk}/insight/").content.decode()
    timed = campaign.nodes.filter(fitness__isnull=False)
    untimed = campaign.nodes.filter(fitness__isnull=True).count()
    rejected = timed.filter(status=NodeStatus.REJECTED).count()
    assert f'id="insight-timed-count">{timed.count()}<' in html
    assert f'id="insight-rejected-count">{rejected}<' in html
    assert f"{untimed} template candidates without a fitness (" in html
    assert re.search(r"\d+ stopped at compile, \d+ stopped at correctness", html)
    lines = [t for t in figure(html, "figure-parallel")["data"] if t["mode"] == "lines+markers"]
    assert sum(t["x"].count(None) for t in lines) == timed.count()
