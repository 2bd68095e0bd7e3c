"""The watchdog re-dispatches only evaluations that are really lost, not ones still queued."""

from datetime import timedelta

import pytest
import redis
from django.conf import settings
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


def test_queued_evaluations_are_left_alone_and_lost_ones_sent_again(demo_users, broker):
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
    state = campaign.engine_state

    # Waiting in the queue for a busy worker is not lost: nothing is sent twice.
    assert search._redispatch_orphans(campaign, state) == 0
    assert broker.llen(QUEUE) == dispatched.count()

    # The broker lost them (e.g. restarted without persistence): each is sent again, once.
    broker.delete(QUEUE)
    lost = dispatched.count()
    assert search._redispatch_orphans(campaign, state) == lost
    assert broker.llen(QUEUE) == lost
    assert all(n.dispatch_count == 2 for n in Node.objects.filter(campaign=campaign))
    campaign_cancel(campaign=campaign)
