"""`campaigns.step` retries a step that hit a transient database error (`database is locked`
under load) and the campaign goes on; a step rolled back half-way leaves nothing behind."""

import pytest
import redis
from django.conf import settings
from django.contrib.auth.models import User
from django.db import OperationalError
from django.utils import timezone

from apps.campaigns.constants import CONTROL_QUEUE, CampaignStatus, NodeStatus, eval_queue
from apps.campaigns.models import Campaign
from apps.campaigns.services import search
from apps.campaigns.services.campaigns import campaign_cancel, campaign_create
from apps.campaigns.services.problems import catalog_sync
from apps.campaigns.tasks import campaign_step

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def running(demo_users):
    """A running campaign whose first step has not run (as if its message was the one lost)."""
    problem = next(p for p in catalog_sync() if p.name == "gelu")
    campaign = campaign_create(
        problem=problem, created_by=User.objects.get(username="engineer"), start=False
    )
    Campaign.objects.filter(pk=campaign.pk).update(
        status=CampaignStatus.RUNNING, started_at=timezone.now()
    )
    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    yield campaign
    campaign.refresh_from_db()
    if campaign.status == CampaignStatus.RUNNING:
        campaign_cancel(campaign=campaign)
    broker.delete(eval_queue(campaign.platform), CONTROL_QUEUE)


def _locked_after_writes(monkeypatch, failures: int) -> list[int]:
    """The first `failures` steps fail with SQLite's lock error after they created node rows
    and marked them dispatched."""
    real = search._dispatch
    calls = []

    def dispatch(campaign, state, nodes):
        real(campaign, state, nodes)
        if nodes:
            calls.append(len(nodes))
            if len(calls) <= failures:
                raise OperationalError("database is locked")

    monkeypatch.setattr(search, "_dispatch", dispatch)
    return calls


def test_a_step_that_hit_a_locked_database_is_retried_and_the_campaign_goes_on(
    running, monkeypatch
):
    attempts = _locked_after_writes(monkeypatch, failures=2)

    result = campaign_step.apply(args=[running.pk])

    assert result.successful(), result.traceback
    assert result.result.startswith("round 1: dispatched"), result.result
    assert len(attempts) == 3, "two failed attempts, then the one that committed"
    running.refresh_from_db()
    nodes = list(running.nodes.all())
    # The failed attempts rolled back whole: one row per proposal, each dispatched once.
    assert len(nodes) == attempts[-1] > 0
    assert {n.status for n in nodes} == {NodeStatus.EVALUATING}
    assert {n.dispatch_count for n in nodes} == {1}
    assert running.status == CampaignStatus.RUNNING
    assert running.heartbeat_at is not None and running.step_error == ""


def test_a_step_that_keeps_failing_gives_up_and_leaves_its_error_for_the_watchdog(
    running, monkeypatch
):
    attempts = _locked_after_writes(monkeypatch, failures=100)

    result = campaign_step.apply(args=[running.pk])

    assert result.failed() and isinstance(result.result, OperationalError)
    assert len(attempts) == 1 + campaign_step.max_retries == 6
    running.refresh_from_db()
    assert running.nodes.count() == 0
    assert running.status == CampaignStatus.RUNNING, "the stall watchdog decides what next"
    assert running.step_error == "OperationalError: database is locked"


def test_sqlite_waits_for_a_lock_in_wal_mode_shared_with_the_workers():
    from django.db import connection

    if connection.vendor != "sqlite":
        pytest.skip("SQLite's journal and lock settings")
    with connection.cursor() as cursor:
        assert cursor.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert cursor.execute("PRAGMA busy_timeout").fetchone()[0] >= 30_000
    assert connection.settings_dict["NAME"].endswith("test-kernelevolve.sqlite3")
    assert connection.transaction_mode == "IMMEDIATE", "writers queue up at BEGIN, not mid-way"
