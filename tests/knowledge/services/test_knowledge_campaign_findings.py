"""A finished campaign's findings become drafts: the winner with its parameters and gain, and
negative evidence grouped by gate and rule; drafts feed generators only as allowed."""

import pytest
from django.db import transaction

from apps.campaigns.models import Campaign, GateResult, Measurement, Node, Problem
from apps.knowledge.models import Entry
from apps.knowledge.selectors.retrieval import knowledge_retrieve
from apps.knowledge.services.entries import knowledge_entry_curate
from apps.knowledge.services.findings import (
    knowledge_campaign_findings,
    knowledge_campaign_finished,
)

pytestmark = pytest.mark.django_db
FP = {"platform": "cuda", "device": "NVIDIA H200", "triton": "3.6.0", "cuda": "13.0"}


@pytest.fixture
def finished(people):
    problem = Problem.objects.create(name="softmax", title="softmax", family="softmax", source="")
    campaign = Campaign.objects.create(
        name="softmax on h200",
        problem=problem,
        platform="cuda",
        created_by=people["engineer"],
        status="completed",
        outcome="improved",
        baseline="eager",  # what its measurements below were judged against
    )
    best = Node.objects.create(
        campaign=campaign,
        key="n3",
        generator="template",
        params={"BLOCK": 4096, "num_warps": 8},
        source="...",
        status="accepted",
        fitness=1.46,
        fitness_ci_low=1.42,
        fitness_ci_high=1.49,
        report={"fingerprint": FP},
        evaluated_at="2026-11-01T00:00:00Z",
    )
    Measurement.objects.create(
        node=best,
        case="batch_size=16,dim=16384",
        kind="workload",
        weight=100,
        status="ok",
        median_ms=0.0072,
        baselines={"eager": {"median_ms": 0.0105}},
    )
    for key, block in [("n4", 32768), ("n5", 65536)]:
        node = Node.objects.create(
            campaign=campaign,
            key=key,
            generator="template",
            params={"BLOCK": block},
            source="...",
            status="rejected",
            failed_gate="compile",
            reason="out of resource: shared memory, required 262144",
        )
        GateResult.objects.create(
            node=node,
            order=1,
            name="compile",
            status="failed",
            rule="aot_compile_failed",
            evidence={"ptxas": "registers 255, spills 1024"},
        )
    campaign.best_node = best
    campaign.save()
    return campaign


def test_findings_become_drafts_with_evidence(finished):
    drafts = knowledge_campaign_findings(campaign=finished)
    winner, failure = sorted(drafts, key=lambda e: e.kind, reverse=True)
    assert (winner.kind, winner.status, winner.origin) == ("pattern", "draft", "campaign")
    assert "measured fitness 1.460× over eager (95% CI 1.420–1.490)" in winner.body
    assert '"BLOCK": 4096' in winner.body and "1.46×" in winner.body
    assert winner.provenance["triton"] == "3.6.0"
    assert winner.provenance["benchmark_range"] == "batch_size=16,dim=16384"
    assert list(winner.evidence_nodes.values_list("key", flat=True)) == ["n3"]
    assert winner.family_list == ["softmax"] and winner.platform_list == ["cuda"]

    assert failure.kind == "failed_approach"
    assert failure.title == "softmax: compile gate rejects aot_compile_failed"
    assert "BLOCK=32768" in failure.body and "BLOCK=65536" in failure.body
    assert "spills 1024" in failure.body
    assert sorted(failure.evidence_nodes.values_list("key", flat=True)) == ["n4", "n5"]
    assert knowledge_campaign_findings(campaign=finished) == []  # once per campaign


def test_drafts_feed_generators_only_as_allowed(finished):
    knowledge_campaign_findings(campaign=finished)
    query = {"problem_name": "softmax", "family": "softmax", "platform": "cuda", "mode": "repair"}
    hits = knowledge_retrieve(user=None, query=query)
    assert [h["kind"] for h in hits] == ["failed_approach"]  # the pattern waits for a curator
    assert hits[0]["warning"].startswith(f"Draft from campaign {finished.pk}, not reviewed")
    pattern = Entry.objects.get(kind="pattern")
    knowledge_entry_curate(entry=pattern, by=None, action="accept")
    assert {h["kind"] for h in knowledge_retrieve(user=None, query=query)} == {
        "pattern",
        "failed_approach",
    }


def test_finishing_a_campaign_drafts_after_commit(finished, django_capture_on_commit_callbacks):
    from apps.campaigns.services.search import _finish

    state = {"outcome": "improved", "message": "done"}
    with django_capture_on_commit_callbacks(execute=True):
        with transaction.atomic():
            _finish(finished, state)
            finished.save()
    assert Entry.objects.filter(source_campaign=finished, status="draft").count() == 2


def test_a_knowledge_error_never_breaks_the_campaign(finished, monkeypatch):
    from apps.knowledge.services import findings

    def boom(**kwargs):
        raise RuntimeError("knowledge is down")

    monkeypatch.setattr(findings, "knowledge_campaign_findings", boom)
    result = knowledge_campaign_finished(campaign_id=finished.pk)
    assert "knowledge is down" in result["error"]
    finished.refresh_from_db()
    assert finished.status == "completed"


def test_demo_seed_drafts_finished_campaigns_once(finished):
    from apps.knowledge.services.demo import knowledge_demo_seed

    finished.problem.name, finished.problem.family = "rms-norm", ""  # an import without family
    finished.problem.save()
    assert knowledge_demo_seed()[1] == "knowledge drafts from finished campaigns: 2"
    assert knowledge_demo_seed()[1] == "knowledge drafts from finished campaigns: 0"
    families = set(Entry.objects.filter(status="draft").values_list("families", flat=True))
    assert families == {",normalization,"}  # the catalog's family for rms_norm
