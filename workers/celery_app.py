"""A Django-free Celery app for evaluation hosts (`celery -A workers.celery_app worker -Q ...`).

A GPU host needs only the compute core, torch, triton and this: it reads REDIS_URL, consumes
its platform's queue, and sends each report back to the control queue by task name. Its
settings mirror the site's (JSON only, late acks, time limits, visibility timeout).
"""

import os

from celery import Celery

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")

app = Celery("kernelevolve_workers", broker=REDIS_URL, backend=REDIS_URL)
app.conf.update(
    task_serializer="json",
    result_serializer="json",
    accept_content=["json"],
    task_acks_late=True,
    task_reject_on_worker_lost=True,
    worker_prefetch_multiplier=1,
    task_soft_time_limit=900,
    task_time_limit=960,
    broker_transport_options={"visibility_timeout": 3600},
    broker_connection_retry_on_startup=True,
    include=["workers.celery_tasks"],
)
