"""The broker as the campaign service tests read it: which tasks a service put on which queue,
with which arguments (what a worker would receive), read from the real Redis lists."""

import base64
import json
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
def broker():
    broker = Broker()
    yield broker
    broker.forget()


@pytest.fixture
def engineer(demo_users):
    return User.objects.get(username="engineer")


@pytest.fixture
def gelu(demo_users):
    return next(p for p in catalog_sync() if p.name == "gelu")
