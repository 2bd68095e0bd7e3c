"""The Celery app. Queues: `control` (Django side: search steps, bookkeeping) and one per
evaluation platform (`eval.interpret`, `eval.cuda.sm90`, ...), consumed by workers that need only
the compute core. Configuration lives in settings under the CELERY_ prefix."""

import os

from celery import Celery

from workers.celery_config import CELERY_OPTIONS

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kernelevolve_site.settings.dev")

app = Celery("kernelevolve_site")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.update(CELERY_OPTIONS)
app.autodiscover_tasks()
# Evaluation tasks live in the Django-free core so GPU hosts can run them without Django.
app.conf.include = ["workers.celery_tasks"]
