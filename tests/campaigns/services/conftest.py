"""The broker as the campaign service tests read it: which tasks a service put on which queue,
with which arguments (what a worker would receive), read from the real Redis lists."""

import base64
import json
import time
from dataclasses import dataclass

import pytest
import redis
from django.conf import settings
from django.contrib.auth.models import User

from apps.campaigns.constants import CONTROL_QUEUE, eval_queue
from apps.campaigns.services.problems import catalog_sync

QUEUES = (CONTROL_QUEUE, eval_queue("interpret"), eval_queue("cuda"))


@dataclass(frozen=True)
class Sent:
    """One task message waiting on a queue."""

    task: str
    id: str
    args: list
    kwargs: dict
    eta: str | None


class Broker:
    def __init__(self) -> None:
        self.client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
        # Messages there before the test (another session's, on a shared Redis) stay there.
        self.before = {q: set(self.client.lrange(q, 0, -1)) for q in QUEUES}

    def sent(self, queue: str, *, task: str | None = None) -> list[Sent]:
        """The messages the test put on `queue` (oldest first), of `task` when given."""
        out = []
        for raw in reversed(self.client.lrange(queue, 0, -1)):  # kombu pushes on the left
            if raw in self.before[queue]:
                continue
            message = json.loads(raw)
            args, kwargs, _ = json.loads(base64.b64decode(message["body"]))
            headers = message["headers"]
            if task is None or headers["task"] == task:
                out.append(Sent(headers["task"], headers["id"], args, kwargs, headers["eta"]))
        return out

    def forget(self) -> None:
        for queue in QUEUES:
            for raw in set(self.client.lrange(queue, 0, -1)) - self.before[queue]:
                self.client.lrem(queue, 0, raw)


@pytest.fixture
def control_paused():
    """No control worker takes a message while the test runs: a session's control worker
    (started by an earlier test, alive until the session ends) would run the steps a test sends
    and then reads, and its periodic queue watch writes rows a test asserts are absent."""
    from kernelevolve_site.celery import app

    answer = app.control.inspect(timeout=0.5).active_queues() or {}
    workers = [w for w, qs in answer.items() if any(q["name"] == CONTROL_QUEUE for q in qs)]
    if workers:
        app.control.cancel_consumer(CONTROL_QUEUE, destination=workers, reply=True)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # a task it had taken finishes first
            active = app.control.inspect(destination=workers, timeout=0.5).active() or {}
            if not any(active.values()):
                break
    yield
    if workers:
        app.control.add_consumer(CONTROL_QUEUE, destination=workers, reply=True)


@pytest.fixture
def broker(control_paused):
    broker = Broker()
    yield broker
    broker.forget()


@pytest.fixture
def engineer(demo_users):
    return User.objects.get(username="engineer")


@pytest.fixture
def gelu(demo_users):
    return next(p for p in catalog_sync() if p.name == "gelu")
