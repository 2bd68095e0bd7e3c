"""In a real browser: a step's progress event sent before a Cancel but delivered after its
answer does not bring back "running" with Pause and Cancel (the page keeps the newest revision
it was shown, whichever way it came)."""

import pytest
from django.contrib.auth.models import User
from django.db import transaction

from apps.campaigns.constants import CampaignStatus
from apps.campaigns.consumers import campaign_group
from apps.campaigns.models import Campaign
from apps.campaigns.services import events
from kernelevolve_site.events import send_event
from tests.campaigns.support.builders import build_campaign
from tests.conftest import login
from tests.support.asyncio_thread import off_loop

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _step_event_held_back(campaign_id: int, monkeypatch) -> str:
    """What a step that commits now sends: its progress partial, held back instead of sent."""
    held = []
    monkeypatch.setattr(
        events, "send_event_on_commit", lambda group, kind, **kw: held.append((kind, kw))
    )
    with transaction.atomic():
        events.campaign_changed(Campaign.objects.get(pk=campaign_id))
    monkeypatch.undo()
    return next(kw["html"] for kind, kw in held if kind == "campaign.progress")


def test_a_late_running_event_does_not_undo_cancel(asgi_server, demo_users, page, monkeypatch):
    campaign = build_campaign(nodes=4, user=User.objects.get(username="engineer"), timed=False)
    Campaign.objects.filter(pk=campaign.pk).update(status=CampaignStatus.RUNNING, outcome="")
    login(page, asgi_server, "engineer", demo_users["engineer"])
    page.goto(f"{asgi_server}/campaigns/{campaign.pk}/")
    page.wait_for_selector("#campaign-status.running")
    page.wait_for_timeout(600)  # the websocket is open

    stale = off_loop(_step_event_held_back, campaign.pk, monkeypatch)
    assert 'class="badge running" id="campaign-status">running<' in stale
    page.on("dialog", lambda dialog: dialog.accept())
    page.click("#campaign-actions button:has-text('Cancel')")
    page.wait_for_selector("#campaign-status.cancelled")

    # The step's event reaches the page only now.
    off_loop(send_event, campaign_group(campaign.pk), "campaign.progress", html=stale)
    page.wait_for_timeout(1_000)
    assert page.inner_text("#campaign-status") == "cancelled"
    assert page.locator("#campaign-actions button").count() == 0
    assert Campaign.objects.get(pk=campaign.pk).status == CampaignStatus.CANCELLED
