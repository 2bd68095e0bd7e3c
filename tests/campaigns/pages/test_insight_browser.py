"""In a real browser: the insight page of the demo's H200 search, reached from the campaign's
toolbar, draws every plot (the parallel coordinates too) and follows the light/dark toggle;
screenshots of both themes, and of the empty state, go to test-artifacts/."""

import json
import time
from pathlib import Path

import pytest
from django.contrib.auth.models import User

from apps.campaigns.services.imports import campaign_import
from tests.conftest import login, wait_for_js

pytestmark = [pytest.mark.browser, pytest.mark.services, pytest.mark.django_db(transaction=True)]

DEMO = Path(__file__).resolve().parents[3] / "docs" / "demo"
# The page's --fg and --line in each theme (static/css/app.css), as the SVG reports them.
THEMES = {
    "light": {"fg": "rgb(29, 35, 48)", "line": "rgb(221, 225, 232)"},
    "dark": {"fg": "rgb(227, 231, 238)", "line": "rgb(44, 50, 60)"},
}
COLOURS = """() => Array.from(document.querySelectorAll('.js-plotly-plot')).map(el => {
  const tick = el.querySelector('.xtick text, .ytick text');
  const label = el.querySelector('.annotation-text');
  const grid = el.querySelector('.gridlayer path');
  return {
    id: el.id,
    tick: tick ? getComputedStyle(tick).fill : null,
    label: label ? getComputedStyle(label).fill : null,
    grid: grid ? getComputedStyle(grid).stroke : null,
  };
})"""


def _theme(page) -> str:
    return page.evaluate(
        "getComputedStyle(document.documentElement).colorScheme.includes('dark') ? 'dark' : 'light'"
    )


def _assert_follows(page, theme: str) -> list[dict]:
    want = THEMES[theme]
    deadline = time.monotonic() + 3
    while True:
        charts = page.evaluate(COLOURS)
        wrong = [
            c
            for c in charts
            if c["tick"] not in (None, want["fg"])
            or c["label"] not in (None, want["fg"])
            or c["grid"] not in (None, want["line"])
        ]
        if not wrong or time.monotonic() > deadline:
            break
        page.wait_for_timeout(50)
    assert not wrong, (theme, want, wrong)
    return charts


def test_insight_page_draws_every_plot_in_light_and_dark(
    asgi_server, demo_users, page, artifacts_dir
):
    summary = json.loads((DEMO / "h200-rms_norm.json").read_text())
    campaign = campaign_import(summary=summary, created_by=User.objects.get(username="engineer"))
    login(page, asgi_server, "viewer", demo_users["viewer"])
    page.goto(f"{asgi_server}/campaigns/{campaign.pk}/")
    page.click("#campaign-insight-link")
    page.wait_for_url(f"**/campaigns/{campaign.pk}/insight/")
    slices = page.locator("[data-figure^='figure-slice-']").count()
    assert slices >= 5
    wait_for_js(page, f"document.querySelectorAll('.js-plotly-plot').length === {3 + slices}")
    wait_for_js(page, "document.querySelectorAll('#chart-parallel .annotation-text').length")
    # Parallel coordinates: an axis per varied parameter, the verdict and the fitness, and a
    # line per timed candidate (SVG: the portal's CSP leaves WebGL traces undrawn).
    axes = page.evaluate(
        "Array.from(document.querySelectorAll('#chart-parallel .annotation-text'),"
        " e => e.textContent)"
    )
    assert {"strategy", "block_n", "verdict", "fitness (×)", "looped", "accepted"} <= set(axes)
    assert page.locator("#chart-parallel .scatterlayer .trace .js-line").count() >= 2
    assert "WebGL" not in page.inner_text("#chart-parallel")
    importance = page.evaluate(
        "Array.from(document.querySelectorAll('#chart-importance .ytick text'), e => e.textContent)"
    )
    assert "strategy" in importance
    history = page.evaluate(
        "Array.from(document.querySelectorAll('#chart-history .legendtext'), e => e.textContent)"
    )
    assert {"accepted", "rejected after timing", "campaign's best so far"} <= set(history)
    assert page.locator("#importance-table tbody tr").count() == len(importance)

    start = _theme(page)
    _assert_follows(page, start)
    page.evaluate("window.__marker = 'no reload'")
    for theme in ("dark", "light") if start == "light" else ("light", "dark"):
        page.click("[data-theme-toggle]")
        assert _theme(page) == theme
        charts = _assert_follows(page, theme)
        assert any(c["id"] == "chart-parallel" and c["label"] for c in charts)
        page.screenshot(path=str(artifacts_dir / f"campaign-insight-{theme}.png"), full_page=True)
    assert page.evaluate("window.__marker") == "no reload"


def test_empty_insight_page_in_dark(asgi_server, demo_users, page, artifacts_dir):
    from tests.campaigns.support.builders import build_campaign

    campaign = build_campaign(nodes=4, timed=False, user=User.objects.get(username="engineer"))
    login(page, asgi_server, "viewer", demo_users["viewer"])
    page.goto(f"{asgi_server}/campaigns/{campaign.pk}/insight/")
    if _theme(page) == "light":
        page.click("[data-theme-toggle]")
    assert "checks correctness only" in page.inner_text("#insight-empty")
    assert "4 template candidates without a fitness (4 correct, not timed)" in page.inner_text(
        "#insight-left-out"
    )
    assert page.locator("#chart-parallel").count() == 0
    page.screenshot(path=str(artifacts_dir / "campaign-insight-empty-dark.png"), full_page=True)
