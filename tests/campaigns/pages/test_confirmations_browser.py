"""In a real browser: Cancel asks first (dismissed, the campaign runs on); "Continue a new
campaign from here" opens a small form with the new campaign's budget and platform and creates
nothing until Start is pressed."""

import pytest
from django.contrib.auth.models import User

from apps.campaigns.constants import CampaignStatus, NodeStatus
from apps.campaigns.models import Campaign
from tests.campaigns.support.builders import build_campaign
from tests.conftest import login

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_cancel_asks_first(asgi_server, demo_users, page):
    campaign = build_campaign(nodes=3, user=User.objects.get(username="engineer"), timed=False)
    Campaign.objects.filter(pk=campaign.pk).update(status=CampaignStatus.RUNNING, outcome="")
    login(page, asgi_server, "engineer", demo_users["engineer"])
    page.goto(f"{asgi_server}/campaigns/{campaign.pk}/")
    asked = []
    page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.dismiss()))
    page.click("#campaign-actions button:has-text('Cancel')")
    page.wait_for_timeout(500)
    assert asked and asked[0].startswith(f"Cancel {campaign.name}?")
    assert Campaign.objects.get(pk=campaign.pk).status == CampaignStatus.RUNNING
    assert page.inner_text("#campaign-status") == "running"

    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#campaign-actions button:has-text('Cancel')")
    page.wait_for_selector("#campaign-status.cancelled")
    assert Campaign.objects.get(pk=campaign.pk).status == CampaignStatus.CANCELLED


def test_continue_opens_a_form_with_budget_and_platform(asgi_server, demo_users, page):
    engineer = User.objects.get(username="engineer")
    source = build_campaign(nodes=4, user=engineer, timed=True)
    node = source.nodes.filter(status=NodeStatus.ACCEPTED).order_by("id").first()
    login(page, asgi_server, "engineer", demo_users["engineer"])
    page.goto(f"{asgi_server}/campaigns/{source.pk}/nodes/{node.key}/")
    assert not page.locator("#continue-form").is_visible()

    page.click("#continue-box summary")
    assert page.locator("#continue-form").is_visible()
    assert Campaign.objects.count() == 1, "opening the form creates nothing"
    assert page.input_value("#id_budget_candidates") == str(source.budget_candidates)
    assert page.input_value("#id_platform") == "cuda"
    page.fill("#id_budget_candidates", "3")
    page.select_option("#id_platform", "interpret")
    page.click("#continue-start")
    page.wait_for_url(f"**/campaigns/{source.pk + 1}/")
    created = Campaign.objects.get(pk=source.pk + 1)
    assert (created.budget_candidates, created.platform) == (3, "interpret")
    assert created.warm_start_node_id == node.pk
