"""The stall watchdog: a running campaign whose steps stopped is restarted, and failed with the
reason after repeated restarts; the control worker sweeps on its own, with no beat process."""

import time
from datetime import timedelta

import pytest
import redis
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from apps.campaigns.constants import (
    CAMPAIGN_STALL_RESTARTS,
    CAMPAIGN_STALL_S,
    CONTROL_QUEUE,
    CampaignStatus,
    Outcome,
    eval_queue,
)
from apps.campaigns.models import Campaign
from apps.campaigns.services import watchdog
from apps.campaigns.services.campaigns import campaign_cancel, campaign_create
from apps.campaigns.services.problems import catalog_sync
from apps.campaigns.services.watchdog import campaign_step_error_record, campaigns_watchdog

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def stalled(demo_users):
    """A running campaign with no nodes whose control side went quiet ten minutes ago."""
    problem = next(p for p in catalog_sync() if p.name == "gelu")
    campaign = campaign_create(
        problem=problem, created_by=User.objects.get(username="engineer"), start=False
    )
    quiet_since = timezone.now() - timedelta(minutes=10)
    Campaign.objects.filter(pk=campaign.pk).update(
        status=CampaignStatus.RUNNING, started_at=quiet_since, heartbeat_at=quiet_since
    )
    campaign.refresh_from_db()
    yield campaign
    campaign.refresh_from_db()
    if campaign.status == CampaignStatus.RUNNING:
        campaign_cancel(campaign=campaign)
    redis.Redis.from_url(settings.CELERY_BROKER_URL).delete(
        eval_queue(campaign.platform), CONTROL_QUEUE
    )


def test_a_stalled_campaign_is_restarted_once_per_period_then_failed_with_the_reason(
    stalled, monkeypatch
):
    sent = []
    monkeypatch.setattr(watchdog, "campaign_step_send", lambda cid, **_: sent.append([cid]))
    campaign_step_error_record(campaign_id=stalled.pk, error="OperationalError: database is locked")
    # The sweeps below run at chosen times after a heartbeat of now, so a control worker left
    # running by another test (it sweeps at the real time) finds nothing stalled meanwhile.
    quiet_since = timezone.now()
    Campaign.objects.filter(pk=stalled.pk).update(heartbeat_at=quiet_since)
    period = timedelta(seconds=CAMPAIGN_STALL_S)

    assert campaigns_watchdog(now=quiet_since + period / 2) == {}, "not stalled yet"
    for restart in range(1, CAMPAIGN_STALL_RESTARTS + 1):
        at = quiet_since + restart * period + timedelta(seconds=1)
        assert campaigns_watchdog(now=at) == {stalled.pk: f"restarted ({restart}/3)"}
        # A second sweep in the same period (another control worker) restarts nothing more.
        assert campaigns_watchdog(now=at + timedelta(seconds=5)) == {}
    assert sent == [[stalled.pk]] * CAMPAIGN_STALL_RESTARTS

    end = quiet_since + (CAMPAIGN_STALL_RESTARTS + 1) * period + timedelta(seconds=1)
    assert campaigns_watchdog(now=end) == {stalled.pk: "failed"}
    stalled.refresh_from_db()
    assert (stalled.status, stalled.outcome) == (CampaignStatus.FAILED, Outcome.FAILED)
    assert stalled.outcome_reason == (
        "stalled: no search step completed for 8 min although the watchdog restarted it "
        "3 times; last error: OperationalError: database is locked"
    )
    assert campaigns_watchdog(now=end + period) == {}, "a failed campaign is left alone"

    # The reason is where the user looks: the campaign page and the API.
    client = Client()
    client.force_login(User.objects.get(username="engineer"))
    assert stalled.outcome_reason in client.get(f"/campaigns/{stalled.pk}/").content.decode()
    api = client.get(f"/api/campaigns/{stalled.pk}/").json()
    assert (api["status"], api["outcome_reason"]) == ("failed", stalled.outcome_reason)


def test_a_campaign_with_a_fresh_heartbeat_is_left_alone(stalled, monkeypatch):
    sent = []
    monkeypatch.setattr(watchdog, "campaign_step_send", lambda *a, **k: sent.append(a))
    Campaign.objects.filter(pk=stalled.pk).update(heartbeat_at=timezone.now())
    assert campaigns_watchdog() == {}
    assert sent == []


def test_the_control_worker_restarts_a_stalled_campaign_on_its_own(control_worker, stalled):
    # Nothing here calls the watchdog: the worker's timer sends the sweep, the sweep restarts
    # the step, the step proposes round 1.
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and not stalled.nodes.exists():
        time.sleep(0.5)
    assert stalled.nodes.exists(), control_worker.log()[-3000:]
    stalled.refresh_from_db()
    assert stalled.status == CampaignStatus.RUNNING
    assert stalled.stall_restarts == 0, "a committed step resets the restarts"
    assert timezone.now() - stalled.heartbeat_at < timedelta(seconds=90)
    assert "restarting its step (1/3)" in control_worker.log()
