"""In a real browser: the light/dark toggle re-themes every chart on the page at once (no
reload), both ways, and highlighted source stays readable on the dark theme."""

import time

import pytest
from django.contrib.auth.models import User

from tests.campaigns.support.builders import build_campaign
from tests.campaigns.support.graph_browser import graph_redraw, graph_settled, graph_watch_socket
from tests.conftest import login, wait_for_js
from tests.support.contrast import contrast

pytestmark = [pytest.mark.browser, pytest.mark.services, pytest.mark.django_db(transaction=True)]

# The page's --fg and --line in each theme (static/css/app.css), as the SVG reports them.
THEMES = {
    "light": {"fg": "rgb(29, 35, 48)", "line": "rgb(221, 225, 232)"},
    "dark": {"fg": "rgb(227, 231, 238)", "line": "rgb(44, 50, 60)"},
}

CHART_COLOURS = """() => Array.from(document.querySelectorAll('.js-plotly-plot')).map(el => {
  const tick = el.querySelector('.xtick text, .ytick text');
  const grid = el.querySelector('.gridlayer path');
  return {
    id: el.id,
    tick: tick ? getComputedStyle(tick).fill : null,
    grid: grid ? getComputedStyle(grid).stroke : null,
  };
})"""


def _theme(page) -> str:
    return page.evaluate(
        "getComputedStyle(document.documentElement).colorScheme.includes('dark') ? 'dark' : 'light'"
    )


def _assert_charts_follow(page, theme: str, expected_ids: set[str]) -> None:
    """Every chart's tick labels and grid lines in `theme`'s colours (within 2 s: no reload)."""
    want = THEMES[theme]
    deadline = time.monotonic() + 2
    while True:
        charts = page.evaluate(CHART_COLOURS)
        wrong = [
            c
            for c in charts
            if c["tick"] not in (None, want["fg"]) or c["grid"] not in (None, want["line"])
        ]
        if not wrong or time.monotonic() > deadline:
            break
        page.wait_for_timeout(50)
    assert expected_ids <= {c["id"] for c in charts}
    assert not wrong, (theme, want, wrong)


def test_toggle_rethemes_every_chart_both_ways(asgi_server, demo_users, page, artifacts_dir):
    campaign = build_campaign(nodes=60, user=User.objects.get(username="engineer"))
    graph_watch_socket(page)
    login(page, asgi_server, "viewer", demo_users["viewer"])
    page.goto(f"{asgi_server}/campaigns/{campaign.pk}/")
    wait_for_js(page, "document.getElementById('search-graph').dataset.nodeCount === '60'")
    graph_settled(page)  # the socket's catch-up redraw is not the one asserted below
    wait_for_js(page, "document.querySelectorAll('.js-plotly-plot .main-svg').length >= 3")
    ids = set(page.evaluate("Array.from(document.querySelectorAll('.js-plotly-plot'), e => e.id)"))
    assert "search-graph" in ids and len(ids) >= 3
    start = _theme(page)
    _assert_charts_follow(page, start, ids)
    page.evaluate("window.__marker = 'no reload'")
    for theme in ("dark", "light") if start == "light" else ("light", "dark"):
        page.click("[data-theme-toggle]")
        assert _theme(page) == theme
        _assert_charts_follow(page, theme, ids)
        page.screenshot(path=str(artifacts_dir / f"campaign-detail-{theme}.png"), full_page=True)
    assert page.evaluate("window.__marker") == "no reload"
    # A live redraw of the graph after the toggle keeps the new theme.
    graph_redraw(page)
    _assert_charts_follow(page, _theme(page), {"search-graph"})


def test_highlighted_source_is_readable_in_dark(asgi_server, demo_users, page, artifacts_dir):
    campaign = build_campaign(nodes=3, user=User.objects.get(username="engineer"))
    node = campaign.nodes.order_by("id").first()
    login(page, asgi_server, "viewer", demo_users["viewer"])
    page.goto(f"{asgi_server}/campaigns/{campaign.pk}/nodes/{node.key}/")
    page.wait_for_selector("#node-source")
    if _theme(page) == "light":
        page.click("[data-theme-toggle]")
    assert _theme(page) == "dark"
    background = page.evaluate(
        "getComputedStyle(document.getElementById('node-source')).backgroundColor"
    )
    spans = page.evaluate(
        """() => Array.from(document.querySelectorAll('#node-source td.code span[class]'),
            s => [s.className, s.textContent, getComputedStyle(s).color])"""
    )
    assert {"kn", "nn"} <= {cls for cls, _, _ in spans}, "imports are highlighted"
    unreadable = [
        (c, t, rgb) for c, t, rgb in spans if t.strip() and contrast(rgb, background) < 4.5
    ]
    assert not unreadable, unreadable[:10]
    page.screenshot(path=str(artifacts_dir / "candidate-source-dark.png"), full_page=True)
