"""Which workers serve the evaluation queues, as the control side last saw them.

A campaign whose platform's queue has no worker waits for good ("running, 0 evaluated"). A
control worker sends `campaigns.eval_queues_watch` every QUEUE_WATCH_S
(kernelevolve_site.celery); `eval_queues_watch` asks Celery which queues its workers consume
(a broadcast with a short timeout, so never under a campaign's row lock), keeps the answer in
EvalQueueWatch rows, and when a queue becomes unserved or served again refreshes the progress
of its running campaigns, whose pages then say so (selectors.campaign_worker_notice).
"""

import logging
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from apps.campaigns.constants import CampaignStatus, Platform, eval_queue
from apps.campaigns.models import EvalQueueWatch
from apps.campaigns.services.events import campaign_changed

logger = logging.getLogger(__name__)
INSPECT_TIMEOUT_S = 1.0


def _active_queues() -> dict[str, list[dict]]:
    """{worker name: the queues it consumes} from the workers that answered within the timeout
    (empty when none did)."""
    from kernelevolve_site.celery import app

    return app.control.inspect(timeout=INSPECT_TIMEOUT_S).active_queues() or {}


def eval_queues_watch(*, now: datetime | None = None) -> dict[str, list[str]]:
    """Record which workers consume each platform's evaluation queue; returns {queue: workers}."""
    answer = _active_queues()  # before the transaction: no lock is held while workers answer
    now = now or timezone.now()
    consumers: dict[str, list[str]] = {eval_queue(p): [] for p in Platform.values}
    for worker, queues in answer.items():
        for queue in queues or []:
            if queue.get("name") in consumers:
                consumers[queue["name"]].append(worker)
    flipped = []
    with transaction.atomic():
        for queue, workers in consumers.items():
            watch = EvalQueueWatch.objects.select_for_update().filter(queue=queue).first()
            if watch is None:
                watch = EvalQueueWatch(queue=queue)
                was_served = None
            else:
                was_served = bool(watch.workers)
            watch.workers = sorted(workers)
            watch.checked_at = now
            if workers:
                watch.last_seen_at, watch.unserved_since = now, None
            elif watch.unserved_since is None:
                watch.unserved_since = now
                logger.warning("no worker consumes %s", queue)
            watch.save()
            if was_served is None or was_served != bool(workers):
                flipped.append(queue)
        _refresh_running_campaigns(flipped)
    return consumers


def _refresh_running_campaigns(queues: list[str]) -> None:
    """Their pages show or drop the notice at once (a live progress event each)."""
    from apps.campaigns.selectors import campaign_list

    platforms = [p for p in Platform.values if eval_queue(p) in queues]
    if not platforms:
        return
    for campaign in campaign_list().filter(status=CampaignStatus.RUNNING, platform__in=platforms):
        campaign_changed(campaign)
