"""`evaluation_record` records a report once, through the engine onto the node rows (the
graph's one copy), keeps the evidence, counts it, and leaves the engine state small."""

import json

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from apps.campaigns.constants import CampaignStatus, NodeStatus
from apps.campaigns.models import Campaign, GateResult
from apps.campaigns.services import search
from apps.campaigns.services.campaigns import campaign_cancel, campaign_create
from apps.campaigns.services.problems import catalog_sync

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


def _report(verdict="accepted", failed_gate=None):
    gates = [
        {"name": "static", "status": "passed", "reason": "ok", "wall_s": 0.1, "device_s": 0.0},
        {
            "name": "compile",
            "status": "failed" if failed_gate else "passed",
            "reason": "ptxas died" if failed_gate else "ok",
            "evidence": {"log": "register spill"},
            "wall_s": 1.0,
            "device_s": 0.5,
        },
    ]
    return {
        "verdict": verdict, "failed_gate": failed_gate, "reason": "r", "gates": gates,
        "cases": [], "device_s": 0.5, "wall_s": 1.1,
    }  # fmt: skip


@pytest.fixture
def dispatched(demo_users):
    problem = next(p for p in catalog_sync() if p.name == "gelu")
    campaign = campaign_create(
        problem=problem, created_by=User.objects.get(username="engineer"), start=False
    )
    Campaign.objects.filter(pk=campaign.pk).update(
        status=CampaignStatus.RUNNING, started_at=timezone.now()
    )
    search.campaign_step(campaign_id=campaign.pk)  # round 1, dispatched
    nodes = list(campaign.nodes.order_by("id"))
    yield campaign, nodes
    campaign.refresh_from_db()
    if campaign.status == CampaignStatus.RUNNING:
        campaign_cancel(campaign=campaign)


def test_a_report_is_recorded_once_on_the_rows_and_counted(dispatched):
    campaign, nodes = dispatched
    assert len(nodes) >= 2 and {n.status for n in nodes} == {NodeStatus.EVALUATING}
    first, second = nodes[0], nodes[1]

    assert search.evaluation_record(
        node_id=first.pk, evaluation_key=first.evaluation_key, report=_report()
    )
    assert search.evaluation_record(
        node_id=second.pk,
        evaluation_key=second.evaluation_key,
        report=_report("rejected", "compile"),
    )
    # Redelivered: ignored, nothing counted twice.
    assert not search.evaluation_record(
        node_id=first.pk, evaluation_key=first.evaluation_key, report=_report()
    )

    first.refresh_from_db()
    second.refresh_from_db()
    assert first.status == NodeStatus.ACCEPTED and first.report["verdict"] == "accepted"
    assert second.status == NodeStatus.REJECTED and second.failed_gate == "compile"
    assert second.feedback == "{'log': 'register spill'}", "what a repair child is shown"
    assert GateResult.objects.filter(node=first).count() == 2
    campaign.refresh_from_db()
    assert campaign.best_node == first
    assert campaign.funnel["accepted"] == 1 and campaign.funnel["compile_failed"] == 1
    assert campaign.funnel["pending"] == len(nodes) - 2
    assert campaign.candidates_evaluated == 2
    assert campaign.funnel["device_s_by_gate"]["compile"] == pytest.approx(1.0)
    # The funnel added to per report is the one counted from the rows.
    counted = Campaign.objects.get(pk=campaign.pk)
    search.campaign_counters_from_rows(campaign=counted)
    assert {k: counted.funnel[k] for k in ("accepted", "compile_failed", "pending")} == {
        k: campaign.funnel[k] for k in ("accepted", "compile_failed", "pending")
    }
    assert "graph" not in campaign.engine_state
    assert len(json.dumps(campaign.engine_state)) < 10_000
    assert campaign.engine_state["best_id"] == first.key


def test_a_timed_report_becomes_one_measurement_per_case_with_its_timings(dispatched):
    """A real H200 report (docs/demo): each case's timing, interval, samples and baselines."""
    from pathlib import Path

    from apps.campaigns.models import Measurement

    demo = Path(__file__).resolve().parents[3] / "docs" / "demo" / "h200-rms_norm.json"
    report = next(n["report"] for n in json.loads(demo.read_text())["nodes"] if n.get("report"))
    campaign, nodes = dispatched
    node = nodes[0]
    assert search.evaluation_record(
        node_id=node.pk, evaluation_key=node.evaluation_key, report=report
    )

    rows = {m.case: m for m in Measurement.objects.filter(node=node)}
    assert set(rows) == {case["name"] for case in report["cases"]}
    for case in report["cases"]:
        row, timing = rows[case["name"]], case["timing"]
        assert (row.kind, row.weight, row.status) == (case["kind"], case["weight"], case["status"])
        assert row.max_abs_err == case["max_abs_err"]
        if timing is None:
            assert row.median_ms is None and row.samples_ms == [] and row.baselines == {}
            continue
        assert row.median_ms == timing["median_ms"] and row.p90_ms == timing["p90_ms"]
        assert [row.ci_low_ms, row.ci_high_ms] == timing["ci95_ms"]
        assert row.samples_ms == timing["samples_ms"]
        assert row.baselines == case["baselines"]
