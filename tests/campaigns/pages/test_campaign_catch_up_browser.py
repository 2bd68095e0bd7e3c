"""In a real browser: changes made while the campaign page's socket was down (or before it first
opened) reach the charts too when it reconnects, not only the live section below them: the
funnel card never says "No candidate has been generated yet" above a table counting them."""

import re

import pytest
from django.contrib.auth.models import User

from apps.campaigns.constants import CampaignStatus, Outcome
from apps.campaigns.models import Campaign
from tests.campaigns.support.builders import build_campaign
from tests.conftest import login

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_charts_catch_up_when_the_socket_reopens(asgi_server, demo_users, page):
    campaign = build_campaign(nodes=4, user=User.objects.get(username="engineer"), timed=False)
    funnel = campaign.funnel
    Campaign.objects.filter(pk=campaign.pk).update(
        status=CampaignStatus.RUNNING, outcome="", funnel={}, candidates_evaluated=0
    )
    sockets = []

    def through(ws):
        ws.connect_to_server()
        sockets.append(ws)

    page.route_web_socket(re.compile(r".*/ws/campaigns/\d+/$"), through)
    login(page, asgi_server, "engineer", demo_users["engineer"])
    page.goto(f"{asgi_server}/campaigns/{campaign.pk}/")
    page.wait_for_selector("#chart-funnel-empty:has-text('No candidate has been generated yet')")
    page.wait_for_timeout(600)  # connected, the first catch-up done
    assert len(sockets) == 1

    # The socket drops; meanwhile the campaign generates and evaluates its four candidates.
    sockets[0].close(code=1011, reason="server restarted")
    Campaign.objects.filter(pk=campaign.pk).update(
        status=CampaignStatus.COMPLETED,
        outcome=Outcome.NO_SAFE_IMPROVEMENT,
        funnel=funnel,
        candidates_evaluated=4,
    )
    page.wait_for_selector("#campaign-status.completed", timeout=15_000)  # reconnected
    assert len(sockets) == 2
    page.wait_for_selector("#chart-funnel .main-svg", timeout=5_000)
    assert "No candidate has been generated yet" not in page.inner_text("#campaign-charts")
    assert page.inner_text("#campaign-funnel tbody td >> nth=0") == "4"
