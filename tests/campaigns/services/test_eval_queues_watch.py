"""A running campaign whose evaluation queue no worker consumes says so on its page: which
queue, since when, and the command that starts a worker for it; the notice goes when one comes."""

import time
from datetime import timedelta

import pytest
import redis
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from apps.campaigns.constants import CONTROL_QUEUE, CampaignStatus, eval_queue
from apps.campaigns.models import Campaign, EvalQueueWatch
from apps.campaigns.services import queues
from apps.campaigns.services.campaigns import campaign_cancel, campaign_create
from apps.campaigns.services.problems import catalog_sync

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]
CUDA = "eval.cuda.sm90"
GPU_WORKER = {"h200-1@gpu": [{"name": CUDA}], "control@portal": [{"name": CONTROL_QUEUE}]}


@pytest.fixture
def cuda_campaign(demo_users):
    problem = next(p for p in catalog_sync() if p.name == "gelu")
    campaign = campaign_create(
        problem=problem,
        created_by=User.objects.get(username="engineer"),
        platform="cuda",
        start=False,
    )
    Campaign.objects.filter(pk=campaign.pk).update(
        status=CampaignStatus.RUNNING, started_at=timezone.now()
    )
    campaign.refresh_from_db()
    yield campaign
    campaign.refresh_from_db()
    if campaign.status == CampaignStatus.RUNNING:
        campaign_cancel(campaign=campaign)
    redis.Redis.from_url(settings.CELERY_BROKER_URL).delete(eval_queue("cuda"), CONTROL_QUEUE)


def _page(campaign) -> str:
    client = Client()
    client.force_login(User.objects.get(username="engineer"))
    return client.get(f"/campaigns/{campaign.pk}/").content.decode()


def _answer(monkeypatch, answer: dict) -> None:
    monkeypatch.setattr(queues, "_active_queues", lambda: answer)


def test_the_real_broker_with_no_gpu_worker_reports_the_cuda_queue_unserved(db):
    found = queues.eval_queues_watch()
    assert found[CUDA] == []
    watch = EvalQueueWatch.objects.get(queue=CUDA)
    assert (watch.workers, watch.last_seen_at) == ([], None)
    assert watch.unserved_since is not None


def test_the_page_says_no_worker_serves_the_queue_since_when_and_what_to_start(
    control_paused, cuda_campaign, monkeypatch
):
    refreshed = []
    monkeypatch.setattr(queues, "campaign_changed", lambda c: refreshed.append(c.pk))
    assert "campaign-worker-notice" not in _page(cuda_campaign), "nothing known: nothing said"

    _answer(monkeypatch, {"control@portal": [{"name": CONTROL_QUEUE}]})
    queues.eval_queues_watch()
    html = _page(cuda_campaign)
    assert 'id="campaign-worker-notice"' in html
    assert f"No worker serves <code>{CUDA}</code>" in html
    assert "none has since the portal began checking" in html
    assert f"-Q {CUDA} --concurrency 1" in html and "NVIDIA sm90 GPU" in html
    assert refreshed == [cuda_campaign.pk], "the open page is told at once"

    # A GPU worker comes: the notice goes, live.
    seen_at = timezone.now() - timedelta(minutes=5)
    _answer(monkeypatch, GPU_WORKER)
    queues.eval_queues_watch(now=seen_at)
    assert "campaign-worker-notice" not in _page(cuda_campaign)
    assert refreshed == [cuda_campaign.pk] * 2

    # It goes away again: the page says since when it was last seen.
    _answer(monkeypatch, {})
    queues.eval_queues_watch()
    html = _page(cuda_campaign)
    assert f"No worker serves <code>{CUDA}</code> since" in html
    assert "when one was last seen" in html
    assert timezone.localtime(seen_at).strftime("%Y-%m-%d %H:%M") in html


def test_a_worker_seen_moments_ago_or_a_stale_check_says_nothing(
    control_paused, cuda_campaign, monkeypatch
):
    _answer(monkeypatch, GPU_WORKER)
    queues.eval_queues_watch(now=timezone.now() - timedelta(seconds=10))
    _answer(monkeypatch, {})
    queues.eval_queues_watch()
    assert "campaign-worker-notice" not in _page(cuda_campaign), "a busy worker may miss a ping"

    # No control worker has checked for minutes: nothing is known, nothing is claimed.
    EvalQueueWatch.objects.filter(queue=CUDA).update(
        checked_at=timezone.now() - timedelta(minutes=10), last_seen_at=None
    )
    assert "campaign-worker-notice" not in _page(cuda_campaign)


def test_the_control_worker_watches_the_queues_on_its_own(control_worker):
    # Nothing here calls the service: the worker's timer sends the task every QUEUE_WATCH_S.
    EvalQueueWatch.objects.all().delete()
    deadline = time.monotonic() + 60
    while not EvalQueueWatch.objects.filter(queue=CUDA).exists():
        assert time.monotonic() < deadline, "no control worker checked the queues within 60 s"
        time.sleep(0.5)
    watch = EvalQueueWatch.objects.get(queue=CUDA)
    assert watch.workers == [] and watch.unserved_since is not None
