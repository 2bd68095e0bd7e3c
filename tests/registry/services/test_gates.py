"""Stage gates: each ends pass, fail (abort, with the reason) or inconclusive (wait)."""

import pytest

from apps.campaigns.constants import Platform
from apps.registry.models import Alarm
from apps.registry.selectors import artifact_gates
from apps.registry.services import (
    PromotionBlocked,
    artifact_approve,
    artifact_create,
    artifact_promote,
)
from tests.registry import helpers


def _gate(artifact, name):
    return next(g for g in artifact_gates(artifact=artifact) if g.gate == name)


@pytest.mark.django_db
def test_shadow_gate_waits_then_passes(node, users):
    artifact = helpers.advance(
        artifact_create(node=node, by=users["reviewer"]), users["reviewer"], "shadow"
    )
    artifact.region.shadow_min_samples = 10
    artifact.region.save()
    artifact_approve(artifact=artifact, by=users["reviewer"])
    helpers.feed_shadow(artifact, 6)
    gate = _gate(artifact, "shadow")
    assert gate.status == "inconclusive" and "6 of 10" in gate.reason
    with pytest.raises(PromotionBlocked, match="waiting: 6 of 10") as blocked:
        artifact_promote(artifact=artifact, by=users["reviewer"])
    assert blocked.value.status == "inconclusive"
    artifact.refresh_from_db()
    assert artifact.stage == "shadow"
    helpers.feed_shadow(artifact, 4)
    assert _gate(artifact, "shadow").status == "pass"
    assert artifact_promote(artifact=artifact, by=users["reviewer"], canary_percent=25).stage == (
        "canary"
    )


@pytest.mark.django_db
def test_a_shadow_mismatch_fails_the_gate_with_its_case_and_aborts(node, users):
    artifact = helpers.advance(
        artifact_create(node=node, by=users["reviewer"]), users["reviewer"], "shadow"
    )
    helpers.feed_shadow(artifact, 7, mismatches=1, case="b5_d40_bf16")
    artifact.refresh_from_db()
    assert artifact.stage == "aborted"
    assert "b5_d40_bf16" in artifact.stage_reason
    alarm = Alarm.objects.get(kind="shadow_mismatch", artifact=artifact)
    assert "b5_d40_bf16" in alarm.message
    event = artifact.events.order_by("-id").first()
    assert event.kind == "aborted" and event.actor_name == "system"
    assert event.evidence["gates"][-1]["status"] == "fail"


def _cuda_canary(users):
    node = helpers.accepted_node(users["author"], platform=Platform.CUDA)
    artifact = artifact_create(node=node, by=users["reviewer"])
    artifact = helpers.advance(artifact, users["reviewer"], "canary")
    artifact.region.canary_min_samples = 20
    artifact.region.save()
    artifact_approve(artifact=artifact, by=users["reviewer"])
    return artifact


@pytest.mark.django_db
def test_canary_latency_gate_inconclusive_then_pass(users):
    artifact = _cuda_canary(users)
    helpers.feed_calls(artifact, "canary", 10, 1.0)
    gate = _gate(artifact, "canary")
    assert gate.status == "inconclusive" and "need 20" in gate.reason
    helpers.feed_calls(artifact, "canary", 20, 1.02)
    helpers.feed_calls(artifact, "fallback", 40, 1.0)
    gate = _gate(artifact, "canary")
    assert gate.status == "pass", gate.reason
    # The canary gate passes; default then waits for the model check on a GPU worker.
    with pytest.raises(PromotionBlocked, match="model check .* sent to eval.cuda.sm90"):
        artifact_promote(artifact=artifact, by=users["reviewer"])
    helpers.complete_model_check(artifact)
    assert artifact_promote(artifact=artifact, by=users["reviewer"]).stage == "default"


@pytest.mark.django_db
def test_canary_slower_than_incumbent_fails_and_aborts(users):
    artifact = _cuda_canary(users)
    helpers.feed_calls(artifact, "fallback", 40, 1.0)
    helpers.feed_calls(artifact, "canary", 30, 1.3)
    artifact.refresh_from_db()
    assert artifact.stage == "aborted"
    assert "slower than the incumbent" in artifact.stage_reason
    assert Alarm.objects.filter(kind="canary_regression", artifact=artifact).exists()
