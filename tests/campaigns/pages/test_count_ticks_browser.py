"""In a real browser: every chart axis that counts (campaigns on the portfolio, candidates in
the funnel, candidates evaluated, candidate number, round) is ticked in whole numbers. Plotly's
own ticks put 0.5, 1.5 between small counts (issue 12)."""

import re

import pytest
from django.contrib.auth.models import User

from tests.campaigns.support.builders import build_campaign
from tests.conftest import login, wait_for_js

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Per page: the charts, which of their axes counts, and how many ticks it shows at least (three
# candidates, all in round 0: the graph has one column).
COUNT_AXES = {
    "portfolio": [("chart-portfolio", "y", 2)],
    "detail": [("search-graph", "x", 1), ("chart-funnel", "x", 2), ("chart-fitness", "x", 2)],
    "insight": [("chart-history", "x", 2)],
}
TICKS = """([id, axis]) => Array.from(
  document.querySelectorAll(`#${id} .${axis}axislayer-above .${axis}tick text`),
  t => t.textContent)"""


def test_count_axes_have_whole_number_ticks(asgi_server, demo_users, page, artifacts_dir):
    campaign = build_campaign(nodes=3, user=User.objects.get(username="engineer"))
    login(page, asgi_server, "viewer", demo_users["viewer"])
    for name, path in (
        ("portfolio", "/campaigns/portfolio/"),
        ("detail", f"/campaigns/{campaign.pk}/"),
        ("insight", f"/campaigns/{campaign.pk}/insight/"),
    ):
        page.goto(asgi_server + path)
        for chart, axis, least in COUNT_AXES[name]:
            wait_for_js(page, f"document.querySelector('#{chart} .main-svg .{axis}tick')")
            ticks = page.evaluate(TICKS, [chart, axis])
            assert len(ticks) >= least, (path, chart, ticks)
            fractional = [t for t in ticks if not re.fullmatch(r"−?[\d,]+", t)]
            assert not fractional, f"{path} #{chart}: {axis} ticks {ticks}"
        page.screenshot(path=str(artifacts_dir / f"count-ticks-{name}.png"), full_page=True)
