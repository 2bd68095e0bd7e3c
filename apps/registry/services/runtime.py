"""The runtime side of the registry: issue the signed manifest, ingest clients' metric batches
(and run the shadow and canary gates on them). Alarms live in ``services.alarms``."""

import datetime as dt

from django.db import transaction
from django.utils import timezone

from apps.registry import signing
from apps.registry.constants import (
    COVERAGE_DROP,
    LATENCY_SAMPLES_KEPT,
    AlarmKind,
    Gate,
    GateStatus,
    Path,
    Stage,
)
from apps.registry.models import Artifact, Region, RuntimeCount, RuntimeReport, ShadowResult
from apps.registry.selectors import gates as G
from apps.registry.selectors.manifest import manifest_build
from apps.registry.services.alarms import alarm_raise
from workers.runtime.signing import SignatureError, digest


def manifest_issue(*, platform: str) -> tuple[dict, str]:
    """(signed manifest, ETag). Artifacts whose stored signature no longer verifies stay in it
    (clients refuse them on their own) and raise a tamper alarm here."""
    body = manifest_build(platform=platform)
    for name, entry in body["artifacts"].items():
        try:
            if digest(entry["body"]) != name:
                raise SignatureError("body no longer hashes to its digest")
            signing.verify(entry["body"], entry["signature"])
        except SignatureError as exc:
            artifact = Artifact.objects.filter(digest=name).first()
            alarm_raise(
                kind=AlarmKind.TAMPERED,
                artifact=artifact,
                message=f"artifact {name[:12]} fails verification in the registry: {exc}",
            )
    return (
        {"body": body, "signature": signing.sign(body), "key_id": signing.key_id()},
        f'"{digest(body)}"',
    )


def _when(value) -> dt.datetime:
    try:
        return dt.datetime.fromtimestamp(float(value), tz=dt.UTC)
    except (TypeError, ValueError, OverflowError):
        return timezone.now()


def _coverage(counts) -> dict[str, tuple[int, int]]:
    out: dict[str, list[int]] = {}
    for c in counts:
        row = out.setdefault(c["operator"], [0, 0])
        row[0] += c["calls"]
        if c["path"] != Path.FALLBACK:
            row[1] += c["calls"]
    return {op: (total, kernel) for op, (total, kernel) in out.items()}


def runtime_report_ingest(*, payload: dict, by=None) -> RuntimeReport:
    """Store one metrics batch, raise alarms, and run the shadow / canary gates it informs."""
    platform = payload["platform"]
    regions = {r.pk: r for r in Region.objects.filter(platform=platform)}
    digests = {c.get("artifact") for c in payload.get("counts", [])}
    digests |= {s.get("artifact") for s in payload.get("shadow", [])}
    digests |= {r.get("artifact") for r in payload.get("refused", [])}
    artifacts = {a.digest: a for a in Artifact.objects.filter(digest__in=digests - {None})}
    touched: set[int] = set()
    with transaction.atomic():
        report = RuntimeReport.objects.create(
            client=payload.get("client", "")[:200],
            platform=platform,
            manifest_version=payload.get("manifest_version"),
            fingerprint=payload.get("fingerprint") or {},
            refused=payload.get("refused") or [],
            window_start=_when(payload.get("window_start")),
            window_end=_when(payload.get("window_end")),
            reported_by=by,
        )
        rows = []
        for c in payload.get("counts", []):
            artifact = artifacts.get(c.get("artifact"))
            region = regions.get(c.get("region"))
            rows.append(
                RuntimeCount(
                    report=report,
                    operator=c["operator"],
                    platform=platform,
                    region=region,
                    artifact=artifact,
                    dtype=c.get("dtype") or "",
                    path=c["path"],
                    calls=c["calls"],
                    errors=c.get("errors", 0),
                    latency_ms=list(c.get("latency_ms") or [])[:LATENCY_SAMPLES_KEPT],
                )
            )
            if artifact is not None:
                touched.add(artifact.pk)
                if c.get("errors"):
                    alarm_raise(
                        kind=AlarmKind.KERNEL_ERROR,
                        artifact=artifact,
                        message=f"{c['errors']} call(s) raised in the runtime; served by the "
                        "reference instead",
                    )
        RuntimeCount.objects.bulk_create(rows)
        for s in payload.get("shadow", []):
            artifact = artifacts.get(s.get("artifact"))
            if artifact is None:
                continue
            ShadowResult.objects.create(
                report=report,
                artifact=artifact,
                region=artifact.region,
                samples=s["samples"],
                mismatches=s["mismatches"],
                cases=list(s.get("cases") or [])[:20],
            )
            touched.add(artifact.pk)
            if s["mismatches"]:
                first = (s.get("cases") or [{}])[0]
                alarm_raise(
                    kind=AlarmKind.SHADOW_MISMATCH,
                    artifact=artifact,
                    message=f"{s['mismatches']} shadow mismatch(es) of {s['samples']}; case "
                    f"{first.get('case', '?')}: {first.get('reason', '')}",
                    evidence={"cases": s.get("cases") or []},
                )
        for r in payload.get("refused", []):
            artifact = artifacts.get(r.get("artifact"))
            alarm_raise(
                kind=AlarmKind.TAMPERED,
                artifact=artifact,
                platform=platform,
                message=f"runtime client {report.client} refused artifact "
                f"{str(r.get('artifact'))[:12]}: {r.get('reason')}",
                evidence=r,
            )
        _coverage_alarms(report, payload.get("counts", []))
    touched_artifacts = Artifact.objects.filter(pk__in=touched).select_related("region", "campaign")
    for artifact in touched_artifacts:
        _run_stage_gate(artifact)
    return report


def _coverage_alarms(report: RuntimeReport, counts) -> None:
    now = _coverage(counts)
    previous = (
        RuntimeReport.objects.filter(client=report.client, platform=report.platform)
        .exclude(pk=report.pk)
        .order_by("-id")
        .first()
    )
    if previous is None:
        return
    before = _coverage(previous.counts.values("operator", "path", "calls"))
    for op, (total, kernel) in now.items():
        if op not in before or total < 10 or before[op][0] < 10:
            continue
        was, is_ = before[op][1] / before[op][0], kernel / total
        if was - is_ >= COVERAGE_DROP:
            alarm_raise(
                kind=AlarmKind.COVERAGE_DROP,
                operator=op,
                platform=report.platform,
                message=f"kernel coverage of {op} fell from {was:.0%} to {is_:.0%} "
                f"(client {report.client})",
                evidence={"before": was, "now": is_, "calls": total},
            )


def _run_stage_gate(artifact: Artifact) -> None:
    """Shadow and canary gates run as evidence arrives: a failure aborts at once."""
    from apps.registry.services.promotion import gate_failed

    gate = {Stage.SHADOW: Gate.SHADOW, Stage.CANARY: Gate.CANARY}.get(artifact.stage)
    if gate is None:
        return
    gates = [g for g in G.artifact_gates(artifact=artifact) if g.gate == gate]
    if gates and gates[0].status == GateStatus.FAIL:
        gate_failed(artifact, gates)
