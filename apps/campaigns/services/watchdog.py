"""The stall watchdog: a running campaign whose control side shows no life is restarted, then
failed.

A step can fail for good (its retries spent on `database is locked`, a worker killed mid-step, a
message lost with the broker); nothing would step the campaign again and it would stay "running"
with nothing happening. Every control worker sends `campaigns.watchdog` every WATCHDOG_SWEEP_S
(kernelevolve_site.celery); `campaigns_watchdog` restarts the step of each running campaign
whose heartbeat (start, resume or a committed step) is older than CAMPAIGN_STALL_S, once per
CAMPAIGN_STALL_S, and after CAMPAIGN_STALL_RESTARTS restarts without a heartbeat marks it failed
with the reason on its page and in the API. Two workers sweeping at once restart a campaign once.
"""

import logging
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models.functions import Coalesce
from django.utils import timezone

from apps.campaigns.constants import (
    CAMPAIGN_STALL_RESTARTS,
    CAMPAIGN_STALL_S,
    CampaignStatus,
    Outcome,
)
from apps.campaigns.models import Campaign
from apps.campaigns.services.events import campaign_changed
from apps.campaigns.services.schedule import campaign_step_send
from apps.campaigns.services.search import campaign_nodes_settle

logger = logging.getLogger(__name__)
STEP_ERROR_MAX_CHARS = 500


def campaigns_watchdog(
    *,
    now: datetime | None = None,
    stall_s: float = CAMPAIGN_STALL_S,
    max_restarts: int = CAMPAIGN_STALL_RESTARTS,
) -> dict[int, str]:
    """Restart or fail every stalled running campaign; returns {campaign id: what was done}."""
    now = now or timezone.now()
    stalled = (
        Campaign.objects.filter(status=CampaignStatus.RUNNING)
        .alias(heartbeat=Coalesce("heartbeat_at", "started_at", "created_at"))
        .filter(heartbeat__lt=now - timedelta(seconds=stall_s))
        .values_list("pk", flat=True)
    )
    done = {}
    for campaign_id in stalled:
        action = campaign_stall_check(
            campaign_id=campaign_id, now=now, stall_s=stall_s, max_restarts=max_restarts
        )
        if action:
            done[campaign_id] = action
    return done


@transaction.atomic
def campaign_stall_check(
    *,
    campaign_id: int,
    now: datetime | None = None,
    stall_s: float = CAMPAIGN_STALL_S,
    max_restarts: int = CAMPAIGN_STALL_RESTARTS,
) -> str:
    """Restart one campaign's step when it is due, or fail it; "" when nothing is due."""
    now = now or timezone.now()
    campaign = Campaign.objects.select_for_update().get(pk=campaign_id)
    if campaign.status != CampaignStatus.RUNNING:
        return ""
    heartbeat = campaign.heartbeat_at or campaign.started_at or campaign.created_at
    silent_s = (now - heartbeat).total_seconds()
    # The n-th restart is due n stall periods after the heartbeat: each restart has one period
    # (more than a step's time limit and its retries) to show a heartbeat.
    if silent_s < stall_s * (campaign.stall_restarts + 1):
        return ""
    if campaign.stall_restarts >= max_restarts:
        _fail_stalled(campaign, now=now, silent_s=silent_s)
        return "failed"
    campaign.stall_restarts += 1
    # The restarted step schedules a fresh watchdog step (the old chain may be the one broken).
    campaign.watchdog_at = None
    campaign.save(update_fields=["stall_restarts", "watchdog_at"])
    logger.warning(
        "campaign %s: no step for %.0f s; restarting its step (%d/%d)",
        campaign.pk,
        silent_s,
        campaign.stall_restarts,
        max_restarts,
    )
    transaction.on_commit(lambda: campaign_step_send(campaign_id, watchdog=True))
    return f"restarted ({campaign.stall_restarts}/{max_restarts})"


def _fail_stalled(campaign: Campaign, *, now: datetime, silent_s: float) -> None:
    in_flight = campaign_nodes_settle(
        campaign=campaign, reason="cancelled: its campaign failed (stalled) before it was evaluated"
    )
    reason = (
        f"stalled: no search step completed for {silent_s / 60:.0f} min although the watchdog "
        f"restarted it {campaign.stall_restarts} times"
    )
    if campaign.step_error:
        reason += f"; last error: {campaign.step_error}"
    campaign.status = CampaignStatus.FAILED
    campaign.outcome = Outcome.FAILED
    campaign.outcome_reason = reason
    campaign.finished_at = now
    campaign.watchdog_at = None
    campaign.save(
        update_fields=[
            "status",
            "outcome",
            "outcome_reason",
            "finished_at",
            "watchdog_at",
            "funnel",
            "candidates_evaluated",
            "device_seconds",
        ]
    )
    logger.error("campaign %s: %s", campaign.pk, reason)
    campaign_changed(campaign)
    if in_flight:
        from kernelevolve_site.celery import app

        transaction.on_commit(lambda: app.control.revoke(in_flight))


def campaign_step_error_record(*, campaign_id: int, error: str) -> bool:
    """Keep the error a step failed with for good (its retries spent), for the stall reason."""
    updated = Campaign.objects.filter(pk=campaign_id, status=CampaignStatus.RUNNING).update(
        step_error=error[:STEP_ERROR_MAX_CHARS]
    )
    return bool(updated)
