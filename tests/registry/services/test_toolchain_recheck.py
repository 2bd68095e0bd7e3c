"""A serving toolchain that differs from an artifact's re-runs correctness on a worker of the
artifact's platform (never in the web process): the gate waits while the re-run is queued, a
pass lets promotion go on, a failure aborts the artifact (or raises an alarm on a default)."""

import functools
import time
from datetime import timedelta

import pytest

from apps.campaigns.constants import Platform
from apps.registry.models import Alarm, GateCheck
from apps.registry.selectors import artifact_gates
from apps.registry.services import (
    PromotionBlocked,
    artifact_approve,
    artifact_create,
    artifact_promote,
    artifact_recheck,
)
from apps.registry.services.promotion import RECHECK_RESEND_S, artifact_recheck_record
from tests.registry import helpers
from tests.support.processes import start_worker


def _gate(artifact):
    return next(g for g in artifact_gates(artifact=artifact) if g.gate == "toolchain")


def _serving_other_triton(artifact, platform="interpret"):
    helpers.report(platform, fingerprint={**artifact.body["toolchain"], "triton": "0.0-other"})


def _wait_for_result(artifact, timeout=180):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        check = GateCheck.objects.filter(artifact=artifact, gate="toolchain").first()
        if check is not None and check.status != "inconclusive":
            return check
        time.sleep(0.2)
    raise AssertionError("the re-run never came back")


@functools.cache
def _wrong_report() -> dict:
    from workers.evaluate import EvaluationRequest, evaluate

    return evaluate(
        EvaluationRequest(
            problem_source=helpers.SOFTMAX,
            candidate_source=helpers.SOFTMAX_WRONG_SHORT_ROWS,
            workload=helpers.SOFTMAX_SMOKE,
            platform="interpret",
        )
    ).to_dict()


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_rerun_goes_to_a_worker_and_gates_promotion(users, control_worker, eval_worker):
    good = artifact_create(node=helpers.accepted_node(users["author"]), by=users["reviewer"])
    _serving_other_triton(good)
    assert _gate(good).status == "inconclusive" and "triton" in _gate(good).reason
    artifact_approve(artifact=good, by=users["reviewer"])
    with pytest.raises(PromotionBlocked, match="re-run sent to eval.interpret") as blocked:
        artifact_promote(artifact=good, by=users["reviewer"])
    assert blocked.value.status == "inconclusive"
    check = _wait_for_result(good)
    assert check.status == "pass" and "passed again on torch" in check.reason
    assert check.dispatch_count == 1 and check.finished_at is not None
    assert artifact_promote(artifact=good, by=users["reviewer"]).stage == "shadow"

    # A kernel that is wrong on one case fails its re-run and is aborted with that case.
    bad = artifact_create(
        node=helpers.accepted_node(users["author"], source=helpers.SOFTMAX_WRONG_SHORT_ROWS),
        by=users["reviewer"],
    )
    artifact_approve(artifact=bad, by=users["reviewer"])
    with pytest.raises(PromotionBlocked, match="waiting"):
        artifact_promote(artifact=bad, by=users["reviewer"])
    check = _wait_for_result(bad)
    assert check.status == "fail" and "b5_d40_bf16" in check.reason
    bad.refresh_from_db()
    assert bad.stage == "aborted" and "b5_d40_bf16" in bad.stage_reason
    assert Alarm.objects.filter(kind="toolchain_correctness", artifact=bad).exists()
    # A redelivered re-run's second report changes nothing.
    assert artifact_recheck_record(check_id=check.pk, report=helpers.softmax_report()) is False
    assert GateCheck.objects.get(pk=check.pk).status == "fail"


@pytest.mark.django_db
def test_cuda_rerun_waits_for_a_gpu_worker_and_a_failing_default_raises_an_alarm(users):
    node = helpers.accepted_node(users["author"], platform=Platform.CUDA)
    artifact = helpers.advance(
        artifact_create(node=node, by=users["reviewer"]), users["reviewer"], "canary"
    )
    helpers.feed_calls(artifact, "fallback", 4, 1.0)  # the incumbent: no default yet
    artifact = helpers.advance(artifact, users["reviewer"], "default")
    _serving_other_triton(artifact, platform="cuda")
    check = artifact_recheck(artifact=artifact, by=users["reviewer"])
    assert check.queue == "eval.cuda.sm90" and check.status == "inconclusive"
    assert "waiting for a cuda worker" in check.reason
    assert "waiting for a cuda worker" in _gate(artifact).reason
    # Asking again while it is in flight sends nothing more; a re-run lost for longer than any
    # evaluation may take is sent again.
    assert artifact_recheck(artifact=artifact, by=users["reviewer"]).dispatch_count == 1
    GateCheck.objects.filter(pk=check.pk).update(
        dispatched_at=check.dispatched_at - timedelta(seconds=RECHECK_RESEND_S + 1)
    )
    again = artifact_recheck(artifact=artifact, by=users["reviewer"])
    assert again.pk == check.pk and again.dispatch_count == 2 and "sent 2 times" in again.reason

    # A worker on that queue that cannot evaluate (no GPU) says so; the check still waits and
    # goes out again on the next ask.
    assert artifact_recheck_record(
        check_id=check.pk, report={"unavailable": "host-1: no CUDA device"}
    )
    waiting = _gate(artifact)
    assert waiting.status == "inconclusive" and "no CUDA device" in waiting.reason
    assert artifact_recheck(artifact=artifact, by=users["reviewer"]).dispatch_count == 3

    # What a GPU host sends back: a failing report. A default is not moved; the alarm says why.
    assert artifact_recheck_record(check_id=check.pk, report=_wrong_report()) is True
    artifact.refresh_from_db()
    assert artifact.stage == "default"
    alarm = Alarm.objects.get(kind="toolchain_correctness", artifact=artifact)
    assert "default artifact" in alarm.message and "b5_d40_bf16" in alarm.message
    assert _gate(artifact).status == "fail"


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_a_cuda_worker_without_a_gpu_says_why_the_rerun_still_waits(
    users, control_worker, artifacts_dir
):
    """A real worker on the cuda queue of this GPU-less machine takes the re-run and cannot
    evaluate: the gate shows that worker's reason instead of going quiet."""
    node = helpers.accepted_node(users["author"], platform=Platform.CUDA)
    artifact = artifact_create(node=node, by=users["reviewer"])
    _serving_other_triton(artifact, platform="cuda")
    worker = start_worker("eval-cuda-nogpu", "eval.cuda.sm90", artifacts_dir / "logs")
    try:
        check = artifact_recheck(artifact=artifact, by=users["reviewer"])
        deadline = time.monotonic() + 120
        while "could not evaluate" not in check.reason and time.monotonic() < deadline:
            time.sleep(0.2)
            check.refresh_from_db()
    finally:
        worker.stop()
    assert check.status == "inconclusive"
    assert "no CUDA device is visible" in check.reason, check.reason
    assert "no CUDA device is visible" in _gate(artifact).reason
