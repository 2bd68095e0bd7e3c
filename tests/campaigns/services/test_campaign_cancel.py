"""Cancel settles every candidate, and the campaign's counts agree with its rows for good.

The rule: candidates still pending or being evaluated when a campaign is cancelled are marked
`cancelled` and their tasks revoked. A result that arrives for one afterwards (the device time
was spent) is kept on that candidate as evidence, with its device time, but it stays
`cancelled`: the funnel, the evaluated count, the best and the outcome never change after cancel.
"""

import pytest
import redis
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from apps.campaigns.constants import CampaignStatus, NodeStatus, eval_queue
from apps.campaigns.models import Campaign, Measurement
from apps.campaigns.services import search
from apps.campaigns.services.campaigns import campaign_cancel, campaign_create
from apps.campaigns.services.problems import catalog_sync
from kernelevolve_site.celery import app

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


def _report(verdict: str, *, failed_gate: str = "", device_s: float = 0.0) -> dict:
    return {
        "verdict": verdict,
        "failed_gate": failed_gate or None,
        "reason": "" if verdict == "accepted" else f"{failed_gate} failed",
        "gates": [{"name": "static", "status": "passed", "device_s": 0.0, "wall_s": 0.1}],
        "cases": [{"name": "n=4096", "kind": "workload", "weight": 1.0, "status": "passed"}],
        "fitness": None,
        "device_s": device_s,
        "wall_s": 1.0,
    }


@pytest.fixture
def mid_round(demo_users, monkeypatch):
    """A running campaign with budget 40 whose first round is dispatched and two of it recorded."""
    revoked: list[str] = []
    monkeypatch.setattr(app.control, "revoke", lambda ids, **_: revoked.extend(ids))
    problem = next(p for p in catalog_sync() if p.name == "gelu")
    campaign = campaign_create(
        problem=problem,
        created_by=User.objects.get(username="engineer"),
        budget_candidates=40,
        start=False,
    )
    Campaign.objects.filter(pk=campaign.pk).update(
        status=CampaignStatus.RUNNING, started_at=timezone.now()
    )
    search.campaign_step(campaign_id=campaign.pk)
    nodes = list(campaign.nodes.order_by("id"))
    assert len(nodes) >= 4 and all(n.status == NodeStatus.EVALUATING for n in nodes)
    search.evaluation_record(
        node_id=nodes[0].pk, evaluation_key=nodes[0].evaluation_key, report=_report("accepted")
    )
    search.evaluation_record(
        node_id=nodes[1].pk,
        evaluation_key=nodes[1].evaluation_key,
        report=_report("rejected", failed_gate="correctness"),
    )
    yield campaign, nodes, revoked
    redis.Redis.from_url(settings.CELERY_BROKER_URL).delete(
        eval_queue(campaign.platform), "control"
    )


def test_cancel_settles_every_node_and_the_counts_agree(mid_round):
    campaign, nodes, revoked = mid_round
    in_flight = nodes[2:]

    campaign_cancel(campaign=campaign, by=User.objects.get(username="engineer"))

    campaign.refresh_from_db()
    statuses = dict(campaign.nodes.values_list("key", "status"))
    assert statuses[nodes[0].key] == NodeStatus.ACCEPTED
    assert statuses[nodes[1].key] == NodeStatus.REJECTED
    assert {statuses[n.key] for n in in_flight} == {NodeStatus.CANCELLED}
    assert sorted(revoked) == sorted(n.task_id for n in in_flight)
    funnel = campaign.funnel
    assert (funnel["generated"], funnel["pending"], funnel["cancelled"]) == (
        len(nodes),
        0,
        len(in_flight),
    )
    assert (funnel["accepted"], funnel["incorrect"]) == (1, 1)
    assert campaign.candidates_evaluated == 2
    assert campaign.outcome_reason == (
        f"cancelled by engineer after 2 evaluations; {len(in_flight)} candidates in flight were "
        "cancelled unevaluated"
    )
    reason = campaign.nodes.get(key=in_flight[0].key).reason
    assert reason.startswith("cancelled with the campaign")


def test_a_result_after_cancel_is_kept_on_its_node_and_changes_no_count(mid_round):
    campaign, nodes, _ = mid_round
    campaign_cancel(campaign=campaign)
    campaign.refresh_from_db()
    before = (
        campaign.funnel["accepted"],
        campaign.funnel["cancelled"],
        campaign.candidates_evaluated,
        campaign.best_node_id,
        campaign.outcome_reason,
    )
    late = nodes[3]

    assert search.evaluation_record(
        node_id=late.pk,
        evaluation_key=late.evaluation_key,
        report=_report("accepted", device_s=2.5),
    )
    late.refresh_from_db()
    assert late.status == NodeStatus.CANCELLED, "a late result never revives a cancelled node"
    assert late.report["verdict"] == "accepted" and late.device_seconds == 2.5
    assert "arrived after it was cancelled (accepted)" in late.reason
    assert Measurement.objects.filter(node=late).count() == 1, "its evidence is kept"
    campaign.refresh_from_db()
    assert (
        campaign.funnel["accepted"],
        campaign.funnel["cancelled"],
        campaign.candidates_evaluated,
        campaign.best_node_id,
        campaign.outcome_reason,
    ) == before
    assert campaign.device_seconds == pytest.approx(2.5), "the device time it cost is counted"
    # Redelivered: stored once.
    assert not search.evaluation_record(
        node_id=late.pk, evaluation_key=late.evaluation_key, report=_report("accepted", device_s=9)
    )
    assert Measurement.objects.filter(node=late).count() == 1


def test_the_page_shows_no_node_evaluating_and_states_the_rule(mid_round):
    campaign, nodes, _ = mid_round
    campaign_cancel(campaign=campaign)
    client = Client()
    client.force_login(User.objects.get(username="engineer"))

    html = client.get(f"/campaigns/{campaign.pk}/").content.decode()

    assert '<span class="badge evaluating">' not in html
    assert html.count('<span class="badge cancelled">') == len(nodes) - 2
    assert "<th>cancelled</th>" in html
    assert "after 2 evaluations" in html
    assert "A result that arrives after cancel is kept on its candidate" in html


def test_a_report_from_a_superseded_dispatch_is_refused(mid_round):
    """A node dispatched again (the watchdog, a restart) takes only its current evaluation's
    report: a late one from the earlier dispatch is refused and changes nothing."""
    campaign, nodes, _ = mid_round
    node = nodes[2]
    old_key = node.evaluation_key
    campaign.refresh_from_db()
    search._dispatch(campaign, campaign.engine_state, [node])  # dispatched again
    node.refresh_from_db()
    assert node.evaluation_key != old_key and node.dispatch_count == 2

    stale = search.evaluation_record(
        node_id=node.pk, evaluation_key=old_key, report=_report("accepted")
    )
    assert stale is False
    node.refresh_from_db()
    assert node.status == NodeStatus.EVALUATING and not node.report

    assert search.evaluation_record(
        node_id=node.pk,
        evaluation_key=node.evaluation_key,
        report=_report("rejected", failed_gate="correctness"),
    )
    node.refresh_from_db()
    assert node.status == NodeStatus.REJECTED
