"""The watchdog re-dispatches only evaluations that are really lost, not ones still queued or
held by a worker, and asks the broker and the workers without holding the campaign's lock."""

from datetime import timedelta

import pytest
import redis
from django.conf import settings
from django.db import connection
from django.utils import timezone

from apps.campaigns.constants import NodeStatus
from apps.campaigns.models import Node
from apps.campaigns.services import search
from apps.campaigns.services.campaigns import campaign_cancel, campaign_create
from apps.campaigns.services.problems import catalog_sync

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]
QUEUE = "eval.interpret"


@pytest.fixture
def broker():
    client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    client.delete(QUEUE)
    yield client
    client.delete(QUEUE)


@pytest.fixture
def stale(demo_users, broker):
    """A running campaign whose round 1 was dispatched two minutes ago and not recorded."""
    from django.contrib.auth.models import User

    problem = next(p for p in catalog_sync() if p.name == "gelu")
    campaign = campaign_create(
        problem=problem, created_by=User.objects.get(username="engineer"), start=False
    )
    campaign.status = "running"
    campaign.save(update_fields=["status"])
    search.campaign_step(campaign_id=campaign.pk)  # proposes and dispatches round 1
    dispatched = Node.objects.filter(campaign=campaign, status=NodeStatus.EVALUATING)
    assert dispatched.count() >= 1
    assert broker.llen(QUEUE) == dispatched.count()
    Node.objects.filter(campaign=campaign).update(
        dispatched_at=timezone.now() - timedelta(seconds=120)
    )
    campaign.refresh_from_db()
    yield campaign
    campaign_cancel(campaign=campaign)


def _redispatch(campaign) -> int:
    return search._redispatch_orphans(
        campaign, campaign.engine_state, search._broker_view(campaign.pk)
    )


def test_queued_evaluations_are_left_alone_and_lost_ones_sent_again(stale, broker):
    dispatched = Node.objects.filter(campaign=stale, status=NodeStatus.EVALUATING)

    # Waiting in the queue for a busy worker is not lost: nothing is sent twice.
    assert _redispatch(stale) == 0
    assert broker.llen(QUEUE) == dispatched.count()

    # The broker lost them (e.g. restarted without persistence): each is sent again, once.
    broker.delete(QUEUE)
    lost = dispatched.count()
    assert _redispatch(stale) == lost
    assert broker.llen(QUEUE) == lost
    assert all(n.dispatch_count == 2 for n in Node.objects.filter(campaign=stale))


def test_the_broker_and_the_workers_are_asked_before_the_campaigns_lock(stale, broker, monkeypatch):
    nodes = list(Node.objects.filter(campaign=stale, status=NodeStatus.EVALUATING))
    held_by_a_worker = nodes[0]
    asked = []

    def queued(queue):
        asked.append(("queue", connection.in_atomic_block))
        return set()  # the broker lost every message

    def held():
        asked.append(("workers", connection.in_atomic_block))
        return {held_by_a_worker.task_id}

    monkeypatch.setattr(search, "_queued_task_ids", queued)
    monkeypatch.setattr(search, "_held_task_ids", held)

    action = search.campaign_step(campaign_id=stale.pk, watchdog=True)

    assert asked == [("queue", False), ("workers", False)], "no transaction, so no lock held"
    assert action == f"waiting for {len(nodes)} evaluations ({len(nodes) - 1} re-dispatched)"
    counts = dict(Node.objects.filter(campaign=stale).values_list("pk", "dispatch_count"))
    assert counts[held_by_a_worker.pk] == 1, "the one a worker holds is left to it"
    assert all(counts[n.pk] == 2 for n in nodes[1:])


def test_an_evaluation_sent_again_while_the_workers_answered_is_not_sent_a_third_time(
    stale, broker, monkeypatch
):
    """Another step re-dispatched a node between the question and the lock: the answer was
    about its old task, so this step leaves the node to its new one."""
    nodes = list(Node.objects.filter(campaign=stale, status=NodeStatus.EVALUATING))
    moved = nodes[0]

    def held():
        Node.objects.filter(pk=moved.pk).update(
            task_id="sent-again", dispatch_count=2, dispatched_at=timezone.now()
        )
        return set()

    monkeypatch.setattr(search, "_queued_task_ids", lambda queue: set())
    monkeypatch.setattr(search, "_held_task_ids", held)

    search.campaign_step(campaign_id=stale.pk, watchdog=True)

    moved.refresh_from_db()
    assert (moved.task_id, moved.dispatch_count) == ("sent-again", 2)
    assert all(n.dispatch_count == 2 for n in Node.objects.filter(pk__in=[n.pk for n in nodes]))
