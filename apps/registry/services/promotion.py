"""Approve, promote, abort, roll back, and re-run correctness under a new toolchain.

Every transition runs in one transaction that first re-reads the region row for update and
bumps its version (SQLite takes the write lock at BEGIN IMMEDIATE), then re-checks the stage
guard: two concurrent promotions of one region serialise, and the loser is refused with the
state the winner left. The ``default`` stage is a pointer on the region, moved in the same
transaction as the stages and the event, so a rollback is atomic.
"""

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from apps.registry.constants import (
    ABORTABLE,
    NEXT_STAGE,
    AlarmKind,
    EventKind,
    Gate,
    GateStatus,
    Stage,
)
from apps.registry.models import Approval, Artifact, GateCheck, Region
from apps.registry.selectors import gates as G
from apps.registry.selectors.registry import previous_default
from apps.registry.services.alarms import alarm_raise
from apps.registry.services.common import (
    RegistryError,
    check_send,
    event_add,
    notify_region,
    require,
)
from workers.contract.tasks import RECHECK_TASK


class PromotionBlocked(RegistryError):
    """A promotion a gate stopped: ``status`` is ``fail`` (now aborted) or ``inconclusive``."""

    def __init__(self, message, *, status, gates):
        super().__init__(message)
        self.status = status
        self.gates = gates


def _set_stage(artifact: Artifact, stage: str, reason: str = "") -> None:
    artifact.stage = stage
    artifact.stage_entered_at = timezone.now()
    artifact.stage_reason = reason
    artifact.save(update_fields=["stage", "stage_entered_at", "stage_reason"])


def _lock_region(region: Region) -> Region:
    """Inside a transaction: take the region row for update and bump its version."""
    Region.objects.filter(pk=region.pk).update(version=F("version") + 1)
    return (
        Region.objects.select_for_update(of=("self",))
        .select_related("default_artifact")
        .get(pk=region.pk)
    )


def _fresh(artifact: Artifact) -> Artifact:
    return Artifact.objects.select_related("region", "campaign").get(pk=artifact.pk)


def _snapshot(artifact: Artifact, gates=None, **extra) -> dict:
    target = NEXT_STAGE.get(artifact.stage)
    approvals = (
        [
            {"user": a.user.username, "at": a.created_at.isoformat(), "digest": a.digest[:12]}
            for a in G.current_approvals(artifact=artifact, stage=target)
        ]
        if target
        else []
    )
    return {
        "digest": artifact.digest,
        "stage": artifact.stage,
        "gates": [g.to_dict() for g in gates or []],
        "approvals": approvals,
        **extra,
    }


def artifact_approve(*, artifact: Artifact, by, reason: str = "") -> Approval:
    """Approve the artifact's next promotion. Not by the campaign's author; once per user."""
    require(by, "approve_promotion")
    artifact = _fresh(artifact)
    target = NEXT_STAGE.get(artifact.stage)
    if target is None:
        raise RegistryError(f"artifact #{artifact.pk} is {artifact.stage}: nothing to approve")
    if artifact.campaign.created_by_id == by.pk:
        raise RegistryError(
            f"{by.username} authored campaign {artifact.campaign.name}: a reviewer who did not "
            "author it must approve"
        )
    with transaction.atomic():
        region = _lock_region(artifact.region)
        if Approval.objects.filter(artifact=artifact, stage=target, user=by).exists():
            raise RegistryError(f"{by.username} already approved #{artifact.pk} for {target}")
        approval = Approval.objects.create(
            artifact=artifact, stage=target, digest=artifact.digest, user=by, reason=reason
        )
        have = len(G.current_approvals(artifact=artifact, stage=target))
        event_add(
            region=region,
            kind=EventKind.APPROVED,
            actor=by,
            artifact=artifact,
            from_stage=artifact.stage,
            to_stage=target,
            from_artifact=artifact.digest,
            to_artifact=artifact.digest,
            reason=reason,
            evidence={
                "approvals": have,
                "needed": G.approvals_needed(artifact=artifact, stage=target),
            },
        )
        return approval


def _abort(artifact: Artifact, *, by, reason: str, gates=None, kind=None) -> Artifact:
    with transaction.atomic():
        region = _lock_region(artifact.region)
        artifact = _fresh(artifact)
        if artifact.stage not in ABORTABLE:
            raise RegistryError(f"artifact #{artifact.pk} is {artifact.stage}: cannot abort")
        before = artifact.stage
        evidence = _snapshot(artifact, gates)
        _set_stage(artifact, Stage.ABORTED, reason)
        event_add(
            region=region,
            kind=EventKind.ABORTED,
            actor=by,
            artifact=artifact,
            from_stage=before,
            to_stage=Stage.ABORTED,
            from_artifact=artifact.digest,
            reason=reason,
            evidence=evidence,
        )
        if kind:
            alarm_raise(kind=kind, artifact=artifact, message=reason, evidence=evidence)
    return artifact


def artifact_abort(*, artifact: Artifact, by, reason: str) -> Artifact:
    """Abort a candidate, shadow or canary (a default leaves by rollback)."""
    require(by, "approve_promotion")
    if not reason.strip():
        raise RegistryError("say why you abort (reason)")
    return _abort(artifact, by=by, reason=reason)


def gate_failed(artifact: Artifact, gates) -> Artifact:
    """A gate failed: abort with the gate's reason (called by promotion and report ingest)."""
    failed = [g for g in gates if g.status == GateStatus.FAIL]
    kind = {
        Gate.SHADOW: AlarmKind.SHADOW_MISMATCH,
        Gate.CANARY: AlarmKind.CANARY_REGRESSION,
        Gate.TOOLCHAIN: AlarmKind.TOOLCHAIN_CORRECTNESS,
        Gate.SIGNATURE: AlarmKind.TAMPERED,
    }.get(failed[0].gate)
    reason = "; ".join(f"{g.label}: {g.reason}" for g in failed)
    return _abort(artifact, by=None, reason=f"gate failed: {reason}", gates=gates, kind=kind)


# A queued re-run with no result after this long is sent again (a task outlives its worker
# only by redelivery; this covers a lost queue). Longer than any evaluation may run.
RECHECK_RESEND_S = 1200


def artifact_recheck(*, artifact: Artifact, by=None) -> GateCheck | None:
    """Re-run correctness when the serving toolchain differs from the artifact's.

    The re-run is a task on the artifact's platform queue (a cuda artifact is re-checked on a
    GPU host, never in this web process); the check waits, inconclusive, until its report comes
    back to ``artifact_recheck_record``. None when the toolchains agree; the existing check when
    one already has a result or is still in flight.
    """
    serving = G.runtime_toolchain(platform=artifact.region.platform)
    if serving is None or G.toolchain_of(artifact.body.get("toolchain")) == serving:
        return None
    key = G.toolchain_key(serving)
    check = GateCheck.objects.filter(
        artifact=artifact, gate=Gate.TOOLCHAIN, toolchain_key=key
    ).first()
    if check is not None and check.status != GateStatus.INCONCLUSIVE:
        return check
    now = timezone.now()
    if (
        check is not None
        and check.dispatched_at
        and ((now - check.dispatched_at).total_seconds() < RECHECK_RESEND_S)
    ):
        return check
    if check is None:
        check = GateCheck(artifact=artifact, gate=Gate.TOOLCHAIN, toolchain_key=key)
    _recheck_dispatch(check, artifact, now)
    return check


def _recheck_dispatch(check: GateCheck, artifact: Artifact, now) -> None:
    platform = artifact.region.platform
    request = {
        "problem_source": artifact.campaign.problem.source,
        "candidate_source": artifact.source,
        "workload": artifact.campaign.workload,
        "platform": platform,
    }
    check_send(check, task=RECHECK_TASK, request=request, platform=platform, what="re-run", now=now)


def _recheck_verdict(report: dict) -> tuple[str, str, dict]:
    """Pass or fail from a re-run's evaluation report, with the evidence a reviewer reads."""
    gate = next((g for g in report.get("gates") or [] if g.get("name") == "correctness"), {})
    failing = [c for c in report.get("cases") or [] if c.get("status") == "failed"]
    fingerprint = report.get("fingerprint") or {}
    evidence = {
        "verdict": report.get("verdict"),
        "reason": report.get("reason"),
        "fingerprint": fingerprint,
        "correctness": {k: gate.get(k) for k in ("status", "reason", "rule")},
        "failing_cases": failing[:5],
    }
    on = ", ".join(f"{k} {fingerprint.get(k)}" for k in ("torch", "triton") if fingerprint.get(k))
    if gate.get("status") == "passed":
        return GateStatus.PASS, f"correctness passed again on {on} ({gate.get('reason')})", evidence
    where = failing[0]["name"] if failing else (report.get("failed_gate") or "?")
    why = gate.get("reason") or report.get("reason")
    return GateStatus.FAIL, f"correctness failed on re-run at {where}: {why}", evidence


def _record_worker_check(*, check_id: int, report: dict, kind: str, what: str, verdict, on_fail):
    """Keep a worker's answer to a gate check (the first one; a redelivered task's second report
    is ignored). ``verdict(report)`` gives (status, reason, evidence); ``on_fail(check)`` runs in
    the same transaction, so nobody sees the failed check without its consequence. A worker
    that could not run the check at all leaves it waiting, to be sent again on the next
    promotion or re-run rather than after the resend delay."""
    with transaction.atomic():
        check = (
            GateCheck.objects.select_for_update()
            .select_related("artifact__region")
            .get(pk=check_id)
        )
        if check.status != GateStatus.INCONCLUSIVE:
            return False
        if report.get("unavailable"):
            check.reason = (
                f"the worker that took the {what} from {check.queue} could not evaluate "
                f"({report['unavailable']}); waiting for a worker that can"
            )
            check.dispatched_at = None
            check.save(update_fields=["reason", "dispatched_at"])
            notify_region(check.artifact.region, kind=kind, artifact=check.artifact_id)
            return True
        check.status, check.reason, check.evidence = verdict(report)
        check.finished_at = timezone.now()
        check.save(update_fields=["status", "reason", "evidence", "finished_at"])
        notify_region(check.artifact.region, kind=kind, artifact=check.artifact_id)
        if check.status == GateStatus.FAIL:
            on_fail(check)
    return True


def artifact_recheck_record(*, check_id: int, report: dict) -> bool:
    """Keep a correctness re-run's result. A failed re-run aborts a candidate, shadow or canary
    at once, with an alarm; a default is not moved (it leaves by rollback) but the alarm names
    it."""
    return _record_worker_check(
        check_id=check_id,
        report=report,
        kind="recheck",
        what="re-run",
        verdict=_recheck_verdict,
        on_fail=_recheck_failed,
    )


def _recheck_failed(check: GateCheck) -> None:
    artifact = _fresh(check.artifact)
    gates = [g for g in G.artifact_gates(artifact=artifact) if g.gate == Gate.TOOLCHAIN]
    if artifact.stage in ABORTABLE:
        try:
            gate_failed(artifact, gates)
            return
        except RegistryError:
            artifact = _fresh(artifact)  # promoted meanwhile: alarm instead
    alarm_raise(
        kind=AlarmKind.TOOLCHAIN_CORRECTNESS,
        artifact=artifact,
        message=f"{artifact.stage} artifact #{artifact.pk}: {check.reason}",
        evidence=check.evidence,
    )


def artifact_promote(
    *, artifact: Artifact, by, reason: str = "", canary_percent: float | None = None
) -> Artifact:
    """Move the artifact one stage on, when approvals suffice and every gate passes.

    A failing gate aborts the artifact (and raises ``PromotionBlocked`` with status fail); an
    inconclusive one leaves it where it is (status inconclusive).
    """
    require(by, "approve_promotion")
    artifact = _fresh(artifact)
    target = NEXT_STAGE.get(artifact.stage)
    if target is None:
        raise RegistryError(f"artifact #{artifact.pk} is {artifact.stage}: cannot be promoted")
    if canary_percent is not None and not 0 < canary_percent <= 100:
        raise RegistryError("canary_percent: must be in (0, 100]")
    need = G.approvals_needed(artifact=artifact, stage=target)
    have = G.current_approvals(artifact=artifact, stage=target)
    if len(have) < need:
        raise RegistryError(
            f"promotion to {target} needs {need} approval(s) by reviewers who did not author "
            f"the campaign; it has {len(have)}"
        )
    artifact_recheck(artifact=artifact, by=by)
    if target == Stage.DEFAULT:
        from apps.registry.services.model_check import artifact_model_check

        artifact_model_check(artifact=artifact, by=by)
    gates = G.artifact_gates(artifact=artifact, target=target)
    if any(g.status == GateStatus.FAIL for g in gates):
        gate_failed(artifact, gates)
        raise PromotionBlocked(
            "aborted: " + "; ".join(g.reason for g in gates if g.status == GateStatus.FAIL),
            status=GateStatus.FAIL,
            gates=gates,
        )
    waiting = [g for g in gates if g.status == GateStatus.INCONCLUSIVE]
    if waiting:
        raise PromotionBlocked(
            "waiting: " + "; ".join(g.reason for g in waiting),
            status=GateStatus.INCONCLUSIVE,
            gates=gates,
        )
    with transaction.atomic():
        region = _lock_region(artifact.region)
        fresh = _fresh(artifact)
        if fresh.stage != artifact.stage:
            raise RegistryError(
                f"artifact #{artifact.pk} moved to {fresh.stage} meanwhile: reload and decide again"
            )
        if target in (Stage.SHADOW, Stage.CANARY):
            other = region.artifacts.filter(stage=target).exclude(pk=artifact.pk).first()
            if other is not None:
                raise RegistryError(
                    f"region already has a {target} (#{other.pk}); promote or abort it first"
                )
        evidence = _snapshot(fresh, gates)
        previous = region.default_artifact
        if target == Stage.DEFAULT:
            evidence["previous_default"] = previous.digest if previous else None
            if previous is not None:
                _set_stage(previous, Stage.RETIRED, f"replaced by #{artifact.pk}")
                event_add(
                    region=region,
                    kind=EventKind.RETIRED,
                    actor=by,
                    artifact=previous,
                    from_stage=Stage.DEFAULT,
                    to_stage=Stage.RETIRED,
                    from_artifact=previous.digest,
                    to_artifact=artifact.digest,
                    reason=f"replaced by #{artifact.pk}",
                )
            region.default_artifact = fresh
            region.save(update_fields=["default_artifact"])
        if target == Stage.CANARY and canary_percent is not None:
            fresh.canary_percent = canary_percent
            fresh.save(update_fields=["canary_percent"])
        before = fresh.stage
        _set_stage(fresh, target, reason)
        event_add(
            region=region,
            kind=EventKind.PROMOTED,
            actor=by,
            artifact=fresh,
            from_stage=before,
            to_stage=target,
            from_artifact=(previous.digest if target == Stage.DEFAULT and previous else "")
            or fresh.digest,
            to_artifact=fresh.digest,
            reason=reason,
            evidence=evidence,
        )
        return fresh


def region_rollback(
    *, region: Region, by, reason: str, to: Artifact | None = None, to_reference: bool = False
) -> Region:
    """Re-point the region's default atomically: to the previous default, to ``to`` (an earlier
    default of this region), or to the PyTorch reference. The current default is retired."""
    require(by, "rollback_artifact")
    if not reason.strip():
        raise RegistryError("say why you roll back (reason)")
    with transaction.atomic():
        region = _lock_region(region)
        current = region.default_artifact
        if current is None:
            raise RegistryError("nothing serves as default here: nothing to roll back")
        if to_reference:
            target = None
        elif to is not None:
            from apps.registry.selectors.registry import rollback_targets

            if to.pk not in {a.pk for a in rollback_targets(region=region)}:
                raise RegistryError(
                    f"#{to.pk} never served as this region's default: not a rollback target"
                )
            target = Artifact.objects.get(pk=to.pk)
        else:
            target = previous_default(region=region)
        if target is not None and target.stage == Stage.ABORTED:
            raise RegistryError(f"#{target.pk} was aborted: choose another target")
        _set_stage(current, Stage.RETIRED, f"rolled back: {reason}")
        if target is not None:
            _set_stage(target, Stage.DEFAULT, f"rollback from #{current.pk}: {reason}")
        region.default_artifact = target
        region.save(update_fields=["default_artifact"])
        event_add(
            region=region,
            kind=EventKind.ROLLBACK,
            actor=by,
            artifact=target or current,
            from_stage=Stage.DEFAULT,
            to_stage=Stage.DEFAULT if target else "reference",
            from_artifact=current.digest,
            to_artifact=target.digest if target else "",
            reason=reason,
            evidence={
                "from": {"id": current.pk, "digest": current.digest},
                "to": {"id": target.pk, "digest": target.digest} if target else "reference",
                "region_version": region.version,
            },
        )
        return region


def _model_check_verdict(report: dict) -> tuple[str, str, dict]:
    reason = str(report.get("reason") or "")[:2000]
    if report.get("verdict") == "pass":
        return GateStatus.PASS, reason, report
    return GateStatus.FAIL, reason or "the model check failed without a reason", report


def _model_check_failed(check: GateCheck) -> None:
    artifact = _fresh(check.artifact)
    if artifact.stage in ABORTABLE:
        gate_failed(
            artifact,
            [G.GateState(Gate.MODEL, GateStatus.FAIL, check.reason, {"check": check.pk})],
        )


def artifact_model_check_record(*, check_id: int, report: dict) -> bool:
    """Keep a model check's result. A failure aborts a candidate, shadow or canary at once
    with the check's reason."""
    return _record_worker_check(
        check_id=check_id,
        report=report,
        kind="model_check",
        what="model check",
        verdict=_model_check_verdict,
        on_fail=_model_check_failed,
    )
