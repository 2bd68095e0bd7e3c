"""`campaign_start` runs a queued campaign: it is running from then on, its first step goes to
the control queue once, and that step proposes the seeds and sends each to its platform's
evaluation queue. Only a queued campaign starts, once."""

import pytest
from django.core.exceptions import ValidationError

from apps.campaigns.constants import CONTROL_QUEUE, CampaignStatus, NodeStatus, eval_queue
from apps.campaigns.models import Campaign
from apps.campaigns.services.campaigns import campaign_cancel, campaign_create, campaign_start
from apps.campaigns.services.search import campaign_step
from workers.contract.tasks import EVALUATE_TASK, STEP_TASK

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def queued(gelu, engineer):
    campaign = campaign_create(problem=gelu, created_by=engineer, start=False)
    yield campaign
    campaign.refresh_from_db()
    if campaign.status not in (CampaignStatus.CANCELLED, CampaignStatus.COMPLETED):
        campaign_cancel(campaign=campaign)


def _steps(broker, campaign: Campaign) -> list:
    return [m for m in broker.sent(CONTROL_QUEUE, task=STEP_TASK) if m.args == [campaign.pk]]


def test_a_started_campaign_runs_and_its_seeds_are_sent_to_its_platforms_queue(queued, broker):
    assert queued.status == CampaignStatus.QUEUED and not _steps(broker, queued)

    started = campaign_start(campaign=queued)

    assert started.status == CampaignStatus.RUNNING
    queued.refresh_from_db()
    assert queued.status == CampaignStatus.RUNNING
    assert queued.started_at is not None and queued.heartbeat_at == queued.started_at
    steps = _steps(broker, queued)
    assert len(steps) == 1, "one first step, sent after the start committed"
    assert steps[0].kwargs == {} and steps[0].eta is None, "now, not a watchdog's later step"
    assert queued.nodes.count() == 0, "the step proposes, not the start"

    # What the control worker does with that message.
    assert campaign_step(campaign_id=steps[0].args[0]).startswith("round 1: dispatched")

    nodes = list(queued.nodes.order_by("id"))
    assert nodes, "the first round has seeds"
    assert {n.round for n in nodes} == {1}
    assert {n.status for n in nodes} == {NodeStatus.EVALUATING}
    assert {n.dispatch_count for n in nodes} == {1}
    sent = {m.id: m for m in broker.sent(eval_queue("interpret"), task=EVALUATE_TASK)}
    assert len(sent) == len(nodes), "each seed sent once"
    for node in nodes:
        message = sent[node.task_id]
        node_id, key, request = message.args
        assert (node_id, key) == (node.pk, node.evaluation_key)
        assert request["candidate_source"] == node.source, "the worker evaluates this seed"
        assert request["platform"] == "interpret"
    assert not broker.sent(eval_queue("cuda")), "nothing reaches the GPU queue"
    queued.refresh_from_db()
    assert queued.funnel["generated"] == queued.funnel["pending"] == len(nodes)
    assert queued.candidates_evaluated == 0


def test_a_campaign_starts_once(queued, broker):
    campaign_start(campaign=queued)
    queued.refresh_from_db()
    started_at = queued.started_at

    with pytest.raises(ValidationError, match="only a queued one can start"):
        campaign_start(campaign=queued)

    queued.refresh_from_db()
    assert queued.status == CampaignStatus.RUNNING and queued.started_at == started_at
    assert len(_steps(broker, queued)) == 1, "a refused start queues no second step"


def test_a_cancelled_campaign_cannot_be_started(queued, broker):
    campaign_cancel(campaign=queued)

    with pytest.raises(ValidationError, match="campaign is cancelled"):
        campaign_start(campaign=queued)

    queued.refresh_from_db()
    assert queued.status == CampaignStatus.CANCELLED and queued.started_at is None
    assert not _steps(broker, queued)


def test_a_cute_campaign_must_run_where_its_kernels_can_be_checked(gelu, engineer):
    """CuTe DSL kernels have no CPU interpreter: a campaign with the cute generator on
    interpret is refused, saying why, and nothing is created; on cuda it is accepted."""
    with pytest.raises(ValidationError, match="only the cuda platform can check them"):
        campaign_create(problem=gelu, created_by=engineer, generators=["template", "cute"],
                        start=False)  # fmt: skip
    assert not Campaign.objects.exists()
    campaign = campaign_create(problem=gelu, created_by=engineer, generators=["template", "cute"],
                               platform="cuda", start=False)  # fmt: skip
    assert campaign.generators == ["template", "cute"]
