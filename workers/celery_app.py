"""A Django-free Celery app for evaluation hosts (`celery -A workers.celery_app worker -Q ...`).

A GPU host needs only the compute core, torch, triton and this: it reads REDIS_URL, consumes
its platform's queue, and sends each report back to the control queue by task name. Queue
semantics come from workers.celery_config, as the site's do.
"""

import os

from celery import Celery

from workers.celery_config import CELERY_OPTIONS

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")

app = Celery("kernelevolve_workers", broker=REDIS_URL, backend=REDIS_URL)
app.conf.update(CELERY_OPTIONS, include=["workers.celery_tasks"])
