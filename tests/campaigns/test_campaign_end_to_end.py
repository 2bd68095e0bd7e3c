"""Campaigns on `interpret` run end to end through real Celery workers and Redis."""

import time

import pytest

from apps.campaigns.constants import CampaignStatus, NodeStatus
from apps.campaigns.models import Campaign, Node
from apps.campaigns.services.campaigns import campaign_create
from apps.campaigns.services.problems import catalog_sync

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


def wait_for(predicate, timeout: float, what: str, poll: float = 1.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(poll)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def finished(campaign_id: int) -> Campaign | None:
    campaign = Campaign.objects.get(pk=campaign_id)
    return (
        campaign if campaign.status not in (CampaignStatus.RUNNING, CampaignStatus.QUEUED) else None
    )


@pytest.mark.parametrize("problem_name", ["softmax", "rms-norm", "gelu"])
def test_catalog_campaign_runs_to_an_outcome(problem_name, demo_users, control_worker, eval_worker):
    from django.contrib.auth.models import User

    problems = {p.name: p for p in catalog_sync()}
    campaign = campaign_create(
        problem=problems[problem_name],
        created_by=User.objects.get(username="engineer"),
        budget_candidates=4,
    )
    done = wait_for(lambda: finished(campaign.pk), 600, f"{problem_name} campaign to finish")
    nodes = list(Node.objects.filter(campaign=done))
    assert done.status == CampaignStatus.COMPLETED, done.outcome_reason
    assert done.outcome == "no_safe_improvement", "interpret has no performance gate"
    assert "no performance gate" in done.outcome_reason
    assert 1 <= len(nodes) <= 4
    assert all(n.status in (NodeStatus.ACCEPTED, NodeStatus.REJECTED) for n in nodes)
    assert any(n.status == NodeStatus.ACCEPTED for n in nodes)
    funnel = done.funnel
    stages = ["static_rejected", "compile_failed", "incorrect", "slower", "errored", "accepted"]
    assert sum(funnel[s] for s in stages) + funnel["pending"] == funnel["generated"] == len(nodes)
    accepted = next(n for n in nodes if n.status == NodeStatus.ACCEPTED)
    assert [g.name for g in accepted.gates.all()][:3] == ["static", "compile", "correctness"]
    assert accepted.measurements.filter(kind="workload").exists()
