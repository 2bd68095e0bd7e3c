"""Celery tasks of the control side. Tasks take ids and plain data and call one service."""

import logging
import platform
import socket

from celery import Task, shared_task
from celery.signals import worker_ready
from django.db import InterfaceError, OperationalError

from workers.contract.tasks import (
    CONTROL_QUEUE,
    QUEUES_WATCH_TASK,
    RECORD_BASELINE_TASK,
    RECORD_TASK,
    STEP_TASK,
    WATCHDOG_TASK,
    WORKER_INFO_TASK,
)

logger = logging.getLogger(__name__)

# Database errors that pass (`database is locked` under load, a dropped connection, a
# deadlock victim): the control tasks roll back whole, so running them again is safe.
TRANSIENT_DB_ERRORS = (OperationalError, InterfaceError)
# https://docs.celeryq.dev/en/stable/userguide/tasks.html#automatic-retry-for-known-exceptions
RETRY_ON_TRANSIENT_DB_ERRORS = {
    "autoretry_for": TRANSIENT_DB_ERRORS,
    "retry_backoff": 2,
    "retry_backoff_max": 60,
    "retry_jitter": True,
    "max_retries": 5,
}


class CampaignStepTask(Task):
    """A step that failed for good leaves its error on the campaign, for the stall watchdog."""

    def on_failure(self, exc, task_id, args, kwargs, einfo):
        from apps.campaigns.services.watchdog import campaign_step_error_record

        campaign_id = args[0] if args else kwargs.get("campaign_id")
        try:
            campaign_step_error_record(
                campaign_id=campaign_id, error=f"{type(exc).__name__}: {exc}"
            )
        except TRANSIENT_DB_ERRORS:
            logger.exception("campaign %s: could not record the step's error", campaign_id)


@shared_task(name=WORKER_INFO_TASK, soft_time_limit=30, time_limit=60)
def worker_info() -> dict:
    """What this worker is: host, Python, torch and triton versions, whether it sees a GPU."""
    import torch
    import triton

    return {
        "host": socket.gethostname(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cuda_available": torch.cuda.is_available(),
    }


@shared_task(
    name=STEP_TASK,
    base=CampaignStepTask,
    acks_late=True,
    soft_time_limit=120,
    time_limit=180,
    **RETRY_ON_TRANSIENT_DB_ERRORS,
)
def campaign_step(campaign_id: int, watchdog: bool = False) -> str:
    from apps.campaigns.services.search import campaign_step as step

    return step(campaign_id=campaign_id, watchdog=watchdog)


@shared_task(name=WATCHDOG_TASK, acks_late=True, soft_time_limit=60, time_limit=90)
def campaigns_watchdog() -> dict[int, str]:
    """Sent every WATCHDOG_SWEEP_S by each control worker (kernelevolve_site.celery)."""
    from apps.campaigns.services.watchdog import campaigns_watchdog as sweep

    return sweep()


@shared_task(name=QUEUES_WATCH_TASK, soft_time_limit=30, time_limit=60)
def eval_queues_watch() -> dict[str, list[str]]:
    """Sent every QUEUE_WATCH_S by each control worker (kernelevolve_site.celery)."""
    from apps.campaigns.services.queues import eval_queues_watch as watch

    return watch()


@shared_task(
    name=RECORD_TASK,
    acks_late=True,
    soft_time_limit=60,
    time_limit=90,
    **RETRY_ON_TRANSIENT_DB_ERRORS,
)
def record_evaluation(node_id: int, evaluation_key: str, report: dict) -> bool:
    from apps.campaigns.services.search import evaluation_record

    return evaluation_record(node_id=node_id, evaluation_key=evaluation_key, report=report)


@shared_task(
    name=RECORD_BASELINE_TASK,
    acks_late=True,
    soft_time_limit=60,
    time_limit=90,
    **RETRY_ON_TRANSIENT_DB_ERRORS,
)
def record_baseline(campaign_id: int, report: dict, tuned: dict | None = None) -> bool:
    from apps.campaigns.services.search import baseline_record

    return baseline_record(campaign_id=campaign_id, report=report, tuned=tuned)


@worker_ready.connect
def resume_campaigns_on_start(sender=None, **kwargs) -> None:
    """A control worker that starts resumes running campaigns (after a restart of the stack)."""
    queues = {q.name for q in sender.app.amqp.queues.consume_from.values()} if sender else set()
    if CONTROL_QUEUE in queues:
        from apps.campaigns.services.search import campaigns_resume_all

        campaigns_resume_all()
