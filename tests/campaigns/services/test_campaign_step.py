"""`campaign_step` advances a running campaign by one step: it proposes a round only when the
last one is fully recorded, sends each candidate once, keeps one watchdog step pending, asks a
GPU campaign's baseline once before any candidate, ends the campaign with its outcome and reason
when the budget is spent, and does nothing to a campaign that is not running."""

import pytest
from django.utils import timezone

from apps.campaigns.constants import CONTROL_QUEUE, CampaignStatus, NodeStatus, eval_queue
from apps.campaigns.models import Campaign
from apps.campaigns.services.campaigns import (
    campaign_cancel,
    campaign_create,
    campaign_pause,
    campaign_resume,
)
from apps.campaigns.services.search import baseline_record, campaign_step, evaluation_record
from workers.contract.tasks import BASELINE_TASK, EVALUATE_TASK, STEP_TASK

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


def _report(verdict: str = "accepted", failed_gate: str | None = None) -> dict:
    return {
        "verdict": verdict,
        "failed_gate": failed_gate,
        "reason": "ok" if verdict == "accepted" else f"{failed_gate} failed",
        "gates": [
            {"name": "static", "status": "passed", "wall_s": 0.1, "device_s": 0.0},
            {
                "name": "compile",
                "status": "failed" if failed_gate else "passed",
                "reason": "ptxas died" if failed_gate else "ok",
                "wall_s": 1.0,
                "device_s": 0.0,
            },
        ],
        "cases": [],
        "fitness": None,
        "device_s": 0.0,
        "wall_s": 1.1,
    }


def _running(problem, user, **kwargs) -> Campaign:
    """A campaign that is running and whose first step has not run yet."""
    campaign = campaign_create(problem=problem, created_by=user, start=False, **kwargs)
    Campaign.objects.filter(pk=campaign.pk).update(
        status=CampaignStatus.RUNNING, started_at=timezone.now()
    )
    campaign.refresh_from_db()
    return campaign


def _record_all(campaign: Campaign, report: dict) -> None:
    for node in campaign.nodes.filter(status=NodeStatus.EVALUATING):
        assert evaluation_record(node_id=node.pk, evaluation_key=node.evaluation_key, report=report)


def _steps(broker, campaign: Campaign, *, watchdog: bool = False) -> list:
    return [
        m
        for m in broker.sent(CONTROL_QUEUE, task=STEP_TASK)
        if m.args == [campaign.pk] and bool(m.kwargs.get("watchdog")) == watchdog
    ]


@pytest.fixture
def running(gelu, engineer):
    campaign = _running(gelu, engineer, budget_candidates=40)
    yield campaign
    campaign.refresh_from_db()
    if campaign.status in (CampaignStatus.RUNNING, CampaignStatus.PAUSED):
        campaign_cancel(campaign=campaign)


def test_a_step_while_a_round_is_in_flight_sends_nothing_twice(running, broker):
    assert campaign_step(campaign_id=running.pk).startswith("round 1: dispatched")
    nodes = list(running.nodes.order_by("id"))
    keys = {n.pk: n.evaluation_key for n in nodes}

    # A redelivered step, and the watchdog's: the round is still out, nothing is sent again.
    for watchdog in (False, True):
        action = campaign_step(campaign_id=running.pk, watchdog=watchdog)
        assert action == f"waiting for {len(nodes)} evaluations (0 re-dispatched)"

    assert running.nodes.count() == len(nodes), "no second round while the first is out"
    for node in running.nodes.all():
        assert node.dispatch_count == 1 and node.evaluation_key == keys[node.pk]
    assert len(broker.sent(eval_queue("interpret"), task=EVALUATE_TASK)) == len(nodes)
    running.refresh_from_db()
    assert running.funnel["generated"] == running.funnel["pending"] == len(nodes)


def test_one_watchdog_step_is_kept_pending_while_the_campaign_runs(running, broker):
    before = timezone.now()
    campaign_step(campaign_id=running.pk)
    campaign_step(campaign_id=running.pk)

    watchdogs = _steps(broker, running, watchdog=True)
    assert len(watchdogs) == 1, "a step finds the watchdog pending and sends no second"
    assert watchdogs[0].eta is not None, "it runs later, a lease from now"
    running.refresh_from_db()
    assert running.watchdog_at > before
    assert running.heartbeat_at >= before, "a committed step is the control side's heartbeat"


def test_the_next_round_is_proposed_once_the_last_is_recorded(running, broker):
    campaign_step(campaign_id=running.pk)
    first = list(running.nodes.order_by("id"))
    _record_all(running, _report("rejected", "compile"))
    # The last report of the round queues the next step (the campaign goes on by itself).
    assert _steps(broker, running)

    assert campaign_step(campaign_id=running.pk).startswith("round 2: dispatched")

    second = list(running.nodes.exclude(pk__in=[n.pk for n in first]).order_by("id"))
    assert second and {n.round for n in second} == {2}
    assert {n.status for n in second} == {NodeStatus.EVALUATING}
    for node in running.nodes.filter(pk__in=[n.pk for n in first]):
        assert node.status == NodeStatus.REJECTED and node.dispatch_count == 1
    sent = broker.sent(eval_queue("interpret"), task=EVALUATE_TASK)
    assert sorted(m.args[0] for m in sent) == sorted(n.pk for n in first + second)
    running.refresh_from_db()
    assert running.funnel["compile_failed"] == len(first)
    assert running.funnel["pending"] == len(second)
    assert running.candidates_evaluated == len(first), "round 1 counted once"


@pytest.mark.parametrize(
    ("report", "outcome", "reason"),
    [
        (
            _report("rejected", "compile"),
            "budget_exhausted",
            "budget spent (budget_candidates) with no accepted improvement",
        ),
        (
            _report("accepted"),
            "no_safe_improvement",
            "2 of 2 candidates passed every gate on interpret, which has no performance gate: "
            "correctness only, nothing can be shown faster",
        ),
    ],
    ids=["nothing-accepted", "correct-on-interpret"],
)
def test_a_step_after_the_budget_ends_the_campaign_with_its_reason(
    gelu, engineer, broker, report, outcome, reason
):
    campaign = _running(gelu, engineer, budget_candidates=2)
    campaign_step(campaign_id=campaign.pk)
    assert campaign.nodes.count() == 2, "the round is cut to the budget"
    _record_all(campaign, report)

    assert campaign_step(campaign_id=campaign.pk) == f"finished: {outcome}"

    campaign.refresh_from_db()
    assert campaign.status == CampaignStatus.COMPLETED
    assert (campaign.outcome, campaign.outcome_reason) == (outcome, reason)
    assert campaign.finished_at is not None and campaign.watchdog_at is None
    assert campaign.nodes.count() == 2, "nothing proposed past the budget"
    assert campaign.candidates_evaluated == 2
    if outcome == "no_safe_improvement":
        assert campaign.best_node == campaign.nodes.order_by("id").first()
    else:
        assert campaign.best_node is None
    # A step that arrives late (the watchdog's) leaves the finished campaign as it is.
    assert campaign_step(campaign_id=campaign.pk, watchdog=True) == "not running (completed)"
    assert Campaign.objects.get(pk=campaign.pk).outcome_reason == reason


def test_a_cancelled_campaigns_step_does_nothing(running, broker):
    campaign_step(campaign_id=running.pk)
    campaign_cancel(campaign=running)
    running.refresh_from_db()
    reason, revision, nodes = running.outcome_reason, running.revision, running.nodes.count()
    sent = len(broker.sent(eval_queue("interpret")))

    assert campaign_step(campaign_id=running.pk) == "not running (cancelled)"
    assert campaign_step(campaign_id=running.pk, watchdog=True) == "not running (cancelled)"

    running.refresh_from_db()
    assert running.status == CampaignStatus.CANCELLED and running.outcome_reason == reason
    assert running.revision == revision, "the page is sent nothing"
    assert running.nodes.count() == nodes
    assert set(running.nodes.values_list("status", flat=True)) == {NodeStatus.CANCELLED}
    assert len(broker.sent(eval_queue("interpret"))) == sent, "nothing dispatched"


def test_a_round_with_nothing_new_ends_the_campaign_as_the_engine_rules(
    running, broker, monkeypatch
):
    """The step carries out the engine's rule (`SearchEngine.step`): no proposals, no round."""
    from workers.search.generators.template import TemplateGenerator

    campaign_step(campaign_id=running.pk)
    first = running.nodes.count()
    _record_all(running, _report("rejected", "compile"))
    monkeypatch.setattr(TemplateGenerator, "propose", lambda self, ctx, n: [])

    assert campaign_step(campaign_id=running.pk) == "finished: failed (no proposals)"

    running.refresh_from_db()
    assert running.status == CampaignStatus.FAILED and running.outcome == "failed"
    assert (
        running.outcome_reason == "stopped (no_proposals): no candidate passed the correctness gate"
    )
    assert running.nodes.count() == first and running.engine_state["round"] == 2


def test_a_paused_campaign_waits_and_goes_on_where_it_was_when_resumed(running, broker):
    campaign_step(campaign_id=running.pk)
    first = running.nodes.count()
    _record_all(running, _report("rejected", "compile"))
    campaign_pause(campaign=running)

    assert campaign_step(campaign_id=running.pk) == "not running (paused)"
    assert running.nodes.count() == first, "no round proposed while paused"

    campaign_resume(campaign=running)
    assert campaign_step(campaign_id=running.pk).startswith("round 2: dispatched")
    assert running.nodes.filter(round=1, dispatch_count=1).count() == first


def test_a_gpu_campaign_measures_its_baseline_once_before_any_candidate(gelu, engineer, broker):
    campaign = _running(gelu, engineer, platform="cuda", budget_candidates=40)
    gpu = eval_queue("cuda")
    try:
        assert campaign_step(campaign_id=campaign.pk) == "baseline requested with the tuner"
        assert campaign_step(campaign_id=campaign.pk) == "waiting for the baseline and the tuner"

        asked = broker.sent(gpu, task=BASELINE_TASK)
        assert [m.args[0] for m in asked] == [campaign.pk], "asked once, on the GPU queue"
        assert asked[0].args[1]["platform"] == "cuda"
        assert campaign.nodes.count() == 0, "no candidate before the baseline"

        times = {"n=4096": {"median_ms": 0.25}}
        baseline = {
            "status": "ok",
            "platform": "cuda",
            "cases": [{"name": "n=4096", "timings": times["n=4096"]}],
            "device_s": 3.0,
        }
        assert baseline_record(campaign_id=campaign.pk, report=baseline)
        assert not baseline_record(campaign_id=campaign.pk, report=baseline), "kept once"
        assert _steps(broker, campaign), "the baseline's arrival queues the next step"

        assert campaign_step(campaign_id=campaign.pk).startswith("round 1: dispatched")
        nodes = list(campaign.nodes.all())
        sent = broker.sent(gpu, task=EVALUATE_TASK)
        assert sorted(m.args[0] for m in sent) == sorted(n.pk for n in nodes)
        assert all(m.args[2]["baseline_times"] == times for m in sent), "compared to it"
        assert not broker.sent(eval_queue("interpret"), task=EVALUATE_TASK)
        campaign.refresh_from_db()
        assert campaign.funnel["baseline_device_s"] == 3.0, "its device time is counted"
    finally:
        campaign_cancel(campaign=campaign)
