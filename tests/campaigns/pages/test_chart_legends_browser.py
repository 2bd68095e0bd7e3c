"""In a real browser: no chart draws its legend over its x axis's title, and no axis label is
cut off at the figure's edge (the legends sat at a fixed fraction under the plot area, over
"candidates evaluated", "ms" and "candidate number"; found in the screenshot pass, issue 12)."""

import pytest
from django.contrib.auth.models import User

from tests.campaigns.support.builders import build_campaign
from tests.conftest import login, wait_for_js

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Per chart: its legend's box, its axis titles' boxes and its tick labels' boxes against the
# chart's own box (page coordinates).
LAYOUT = """() => Array.from(document.querySelectorAll('.js-plotly-plot')).map(el => {
  const box = e => { const r = e.getBoundingClientRect();
                     return {l: r.left, r: r.right, t: r.top, b: r.bottom, w: r.width}; };
  const legend = el.querySelector('.legend .bg');
  return {
    id: el.id,
    chart: box(el.querySelector('.main-svg')),
    legend: legend ? box(legend) : null,
    titles: Array.from(el.querySelectorAll('.g-xtitle text, .g-ytitle text'),
                       t => [t.textContent, box(t)]),
    ticks: Array.from(el.querySelectorAll('.xtick text, .ytick text'),
                      t => [t.textContent, box(t)]),
  };
})"""


def _overlap(a: dict, b: dict) -> bool:
    return a["l"] < b["r"] and b["l"] < a["r"] and a["t"] < b["b"] and b["t"] < a["b"]


def _inside(inner: dict, outer: dict) -> bool:
    return (
        inner["l"] >= outer["l"] - 1
        and inner["r"] <= outer["r"] + 1
        and inner["t"] >= outer["t"] - 1
        and inner["b"] <= outer["b"] + 1
    )


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_legends_clear_of_axis_titles_and_labels_not_clipped(
    asgi_server, demo_users, browser, artifacts_dir, scheme
):
    campaign = build_campaign(nodes=80, user=User.objects.get(username="engineer"))
    node = campaign.best_node
    context = browser.new_context(viewport={"width": 1440, "height": 900}, color_scheme=scheme)
    page = context.new_page()
    try:
        login(page, asgi_server, "viewer", demo_users["viewer"])
        seen = set()
        for path, charts in (
            (f"/campaigns/{campaign.pk}/", 4),  # graph, funnel, fitness over time, device-s
            (f"/campaigns/{campaign.pk}/nodes/{node.key}/", 2),  # latency box and ECDF
            (f"/campaigns/{campaign.pk}/insight/", 4),  # importance?, parallel, slices, history
        ):
            page.goto(asgi_server + path)
            wait_for_js(
                page,
                f"document.querySelectorAll('.js-plotly-plot .main-svg').length >= {charts}",
            )
            page.wait_for_timeout(300)
            name = path.strip("/").replace("/", "-")
            page.screenshot(path=str(artifacts_dir / f"charts-{name}-{scheme}.png"), full_page=True)
            for chart in page.evaluate(LAYOUT):
                seen.add(chart["id"])
                if chart["legend"]:
                    over = [t for t, b in chart["titles"] if t and _overlap(chart["legend"], b)]
                    assert not over, f"{path} #{chart['id']}: legend drawn over {over}"
                clipped = [
                    t for t, b in chart["ticks"] if b["w"] and not _inside(b, chart["chart"])
                ]
                assert not clipped, f"{path} #{chart['id']}: labels cut off: {clipped}"
        assert {"chart-fitness", "chart-latency-ecdf", "chart-history"} <= seen, seen
    finally:
        context.close()
