"""The Celery app. Queues: `control` (Django side: search steps, bookkeeping) and one per
evaluation platform (`eval.interpret`, `eval.cuda.sm90`, ...), consumed by workers that need only
the compute core. Configuration lives in settings under the CELERY_ prefix.

Periodic control tasks need no beat process: every worker that consumes the control queue sends
them from its own timer (`ControlPeriodicTasks`); they are idempotent, so two such workers are
harmless.
"""

import logging
import os

from celery import Celery, bootsteps
from celery.signals import worker_init

from workers.celery_config import CELERY_OPTIONS

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kernelevolve_site.settings.dev")

logger = logging.getLogger(__name__)

app = Celery("kernelevolve_site")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.update(CELERY_OPTIONS)
app.autodiscover_tasks()
# Evaluation tasks live in the Django-free core so GPU hosts can run them without Django.
app.conf.include = ["workers.celery_tasks"]


class ControlPeriodicTasks(bootsteps.StartStopStep):
    """Sends each periodic control task every so often from a control worker's timer.

    The worker's own timer (the one its event heartbeats use) only publishes a message; the
    task runs in the pool like any other. An unconsumed one expires instead of piling up.
    https://docs.celeryq.dev/en/stable/userguide/extending.html#consumer-bootsteps
    """

    requires = {"celery.worker.consumer.tasks:Tasks"}

    def __init__(self, c, **kwargs):
        self.timers = []
        super().__init__(c, **kwargs)

    def start(self, c):
        from apps.campaigns.constants import QUEUE_WATCH_S, WATCHDOG_SWEEP_S
        from workers.contract.tasks import CONTROL_QUEUE, QUEUES_WATCH_TASK, WATCHDOG_TASK

        consumed = {q.name for q in c.app.amqp.queues.consume_from.values()}
        if CONTROL_QUEUE not in consumed or self.timers:
            return
        periodic = (
            (WATCHDOG_TASK, WATCHDOG_SWEEP_S),
            (QUEUES_WATCH_TASK, QUEUE_WATCH_S),
        )
        for name, every_s in periodic:
            self.timers.append(
                c.timer.call_repeatedly(every_s, self.send, (c.app, name, every_s, CONTROL_QUEUE))
            )

    @staticmethod
    def send(celery_app, name: str, every_s: float, queue: str) -> None:
        try:
            celery_app.send_task(name, queue=queue, expires=2 * every_s)
        except Exception:  # noqa: BLE001 - a broker hiccup must not stop the worker's timer
            logger.exception("could not send the periodic task %s", name)

    def stop(self, c):
        for timer in self.timers:
            timer.cancel()
        self.timers = []

    shutdown = stop


app.steps["consumer"].add(ControlPeriodicTasks)


@worker_init.connect
def hold_embedded_redis_for_a_worker(sender=None, **kwargs) -> None:
    """A worker started on its own, without REDIS_URL, starts the embedded Redis it needs and
    stops it when it exits (the launcher and the tests pass REDIS_URL to their workers)."""
    if os.environ.get("REDIS_URL"):
        return
    from django.conf import settings

    from kernelevolve_site.embedded_redis import hold_embedded_redis

    hold_embedded_redis(settings.DATA_DIR)
