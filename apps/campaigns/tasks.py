"""Celery tasks of the control side. Tasks take ids and plain data and call one service."""

import platform
import socket

from celery import shared_task
from celery.signals import worker_ready

from apps.campaigns.constants import CONTROL_QUEUE


@shared_task(name="campaigns.worker_info", soft_time_limit=30, time_limit=60)
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


@shared_task(name="campaigns.step", acks_late=True, soft_time_limit=120, time_limit=180)
def campaign_step(campaign_id: int, watchdog: bool = False) -> str:
    from apps.campaigns.services.search import campaign_step as step

    return step(campaign_id=campaign_id, watchdog=watchdog)


@shared_task(name="campaigns.record_evaluation", acks_late=True, soft_time_limit=60, time_limit=90)
def record_evaluation(node_id: int, evaluation_key: str, report: dict) -> bool:
    from apps.campaigns.services.search import evaluation_record

    return evaluation_record(node_id=node_id, evaluation_key=evaluation_key, report=report)


@shared_task(name="campaigns.record_baseline", acks_late=True, soft_time_limit=60, time_limit=90)
def record_baseline(campaign_id: int, report: dict) -> bool:
    from apps.campaigns.services.search import baseline_record

    return baseline_record(campaign_id=campaign_id, report=report)


@worker_ready.connect
def resume_campaigns_on_start(sender=None, **kwargs) -> None:
    """A control worker that starts resumes running campaigns (after a restart of the stack)."""
    queues = {q.name for q in sender.app.amqp.queues.consume_from.values()} if sender else set()
    if CONTROL_QUEUE in queues:
        from apps.campaigns.services.search import campaigns_resume_all

        campaigns_resume_all()
