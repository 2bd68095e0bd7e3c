"""In a real browser: a campaign named with 200 unbroken characters (the most its name holds)
wraps or is clipped; no page that shows it gets wider than the window."""

import pytest
from django.contrib.auth.models import User

from tests.campaigns.support.builders import build_campaign
from tests.conftest import login

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LONG = "very-long-campaign-name-" + "x" * 176


def _page_width(page) -> tuple[int, int]:
    return page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")


def test_a_long_campaign_name_does_not_widen_the_pages(asgi_server, demo_users, page):
    campaign = build_campaign(nodes=3, user=User.objects.get(username="engineer"), name=LONG)
    assert len(campaign.name) == 200
    login(page, asgi_server, "reviewer", demo_users["reviewer"])
    for path in (
        "/campaigns/",
        "/campaigns/inbox/",
        "/registry/",
        f"/campaigns/{campaign.pk}/",
        f"/campaigns/{campaign.pk}/nodes/n1/",
        f"/campaigns/{campaign.pk}/compare/",
    ):
        page.goto(asgi_server + path)
        page.wait_for_load_state("load")
        width, viewport = _page_width(page)
        assert width <= viewport, f"{path} is {width} px wide in a {viewport} px window"
    page.goto(asgi_server + "/campaigns/")
    name = page.locator(f"#campaign-row-{campaign.pk} a.long-name")
    assert name.get_attribute("title") == LONG, "the whole name is on hover"
