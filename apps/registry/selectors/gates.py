"""Gate states for an artifact's next promotion: each pass, fail (abort) or inconclusive (wait),
with the reason a reviewer reads. Reads only; the correctness re-run is a service."""

from dataclasses import asdict, dataclass, field

from apps.campaigns.constants import Platform
from apps.registry.constants import (
    NEXT_STAGE,
    REQUIRED_APPROVALS,
    TOOLCHAIN_KEYS,
    Gate,
    GateStatus,
    Path,
    Stage,
)
from apps.registry.models import Approval, Artifact, GateCheck, RuntimeCount, RuntimeReport
from workers.runtime.signing import SignatureError, digest

# How many recent reports runtime_toolchain looks through for one with a usable fingerprint.
RECENT_FINGERPRINTS = 20


@dataclass(frozen=True)
class GateState:
    gate: str
    status: str
    reason: str
    evidence: dict = field(default_factory=dict)

    @property
    def label(self) -> str:
        return Gate(self.gate).label

    def to_dict(self) -> dict:
        return {**asdict(self), "label": self.label}


def toolchain_of(fingerprint: dict | None) -> dict:
    """The toolchain keys of a fingerprint; anything but an object of scalars reads as unknown
    (rows stored before reports were validated may hold any JSON)."""
    if not isinstance(fingerprint, dict):
        return dict.fromkeys(TOOLCHAIN_KEYS)
    return {k: _scalar(fingerprint.get(k)) for k in TOOLCHAIN_KEYS}


def _scalar(value):
    return value if value is None or isinstance(value, str | int | float | bool) else None


def toolchain_key(toolchain: dict) -> str:
    return digest(toolchain_of(toolchain))


def runtime_toolchain(*, platform: str) -> dict | None:
    """The toolchain the most recent runtime client of ``platform`` reported (None: none yet).

    A stored fingerprint that is not an object (accepted before reports were validated) is
    skipped, not read."""
    recent = (
        RuntimeReport.objects.filter(platform=platform)
        .exclude(fingerprint={})
        .order_by("-id")
        .values_list("fingerprint", flat=True)[:RECENT_FINGERPRINTS]
    )
    for fingerprint in recent:
        if isinstance(fingerprint, dict):
            return toolchain_of(fingerprint)
    return None


def approvals_needed(*, artifact: Artifact, stage: str) -> int:
    own = artifact.region.required_approvals or {}
    return int(own.get(stage, REQUIRED_APPROVALS.get(stage, 1)))


def current_approvals(*, artifact: Artifact, stage: str) -> list[Approval]:
    """Approvals for ``stage`` that still hold: made on the content the artifact has now."""
    return [
        a
        for a in artifact.approvals.filter(stage=stage).select_related("user")
        if a.digest == artifact.digest == digest(artifact.body)
    ]


def _signature_gate(artifact: Artifact) -> GateState:
    from apps.registry import signing

    try:
        if digest(artifact.body) != artifact.digest:
            raise SignatureError("the stored body no longer hashes to the artifact's digest")
        signing.verify(artifact.body, artifact.signature)
    except SignatureError as exc:
        return GateState(Gate.SIGNATURE, GateStatus.FAIL, f"refused: {exc}")
    return GateState(
        Gate.SIGNATURE, GateStatus.PASS, f"Ed25519 signature verifies (key {artifact.key_id})"
    )


def _changed(mine: dict, theirs: dict) -> dict:
    return {k: [mine.get(k), theirs.get(k)] for k in TOOLCHAIN_KEYS if mine.get(k) != theirs.get(k)}


def _toolchain_gate(artifact: Artifact) -> GateState:
    mine = toolchain_of(artifact.body.get("toolchain"))
    serving = runtime_toolchain(platform=artifact.region.platform)
    if serving is None:
        return GateState(
            Gate.TOOLCHAIN,
            GateStatus.PASS,
            "no runtime client has reported its toolchain yet; the artifact's own evaluation "
            "stands",
            {"artifact": mine},
        )
    changed = _changed(mine, serving)
    if not changed:
        return GateState(
            Gate.TOOLCHAIN,
            GateStatus.PASS,
            "the serving toolchain is the one the artifact was evaluated under",
            {"artifact": mine},
        )
    what = ", ".join(f"{k} {a} → {b}" for k, (a, b) in changed.items())
    check = GateCheck.objects.filter(
        artifact=artifact, gate=Gate.TOOLCHAIN, toolchain_key=toolchain_key(serving)
    ).first()
    evidence = {"artifact": mine, "serving": serving, "changed": changed}
    if check is None:
        return GateState(
            Gate.TOOLCHAIN,
            GateStatus.INCONCLUSIVE,
            f"toolchain differs ({what}): correctness must be re-run before promotion",
            evidence,
        )
    return GateState(
        Gate.TOOLCHAIN,
        check.status,
        f"toolchain differs ({what}); re-run: {check.reason}",
        {**evidence, "rerun": check.evidence, "checked_at": check.created_at.isoformat()},
    )


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    pos = (len(ordered) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def _shadow_gate(artifact: Artifact) -> GateState:
    from apps.registry.selectors.metrics import shadow_stats

    stats = shadow_stats(artifact=artifact, since=artifact.stage_entered_at)
    need = artifact.region.shadow_min_samples
    if stats["mismatches"]:
        first = stats["cases"][0] if stats["cases"] else {}
        return GateState(
            Gate.SHADOW,
            GateStatus.FAIL,
            f"{stats['mismatches']} mismatch(es) in {stats['samples']} shadow samples; first "
            f"case {first.get('case', '?')}: {first.get('reason', '')}",
            stats,
        )
    if stats["samples"] < need:
        return GateState(
            Gate.SHADOW,
            GateStatus.INCONCLUSIVE,
            f"{stats['samples']} of {need} shadow samples so far, no mismatch: waiting",
            stats,
        )
    return GateState(
        Gate.SHADOW,
        GateStatus.PASS,
        f"0 mismatches in {stats['samples']} shadow samples (need ≥ {need})",
        stats,
    )


def canary_samples(artifact: Artifact) -> tuple[list, list, int, int]:
    """(canary latencies, incumbent latencies, canary calls, canary errors) since canary."""
    since = artifact.stage_entered_at
    canary = RuntimeCount.objects.filter(artifact=artifact, path=Path.CANARY, created_at__gte=since)
    incumbent = RuntimeCount.objects.filter(
        region=artifact.region, path__in=[Path.DEFAULT, Path.FALLBACK], created_at__gte=since
    )
    mine, theirs, calls, errors = [], [], 0, 0
    for row in canary:
        mine.extend(row.latency_ms)
        calls += row.calls
        errors += row.errors
    for row in incumbent:
        theirs.extend(row.latency_ms)
    return mine, theirs, calls, errors


def _canary_gate(artifact: Artifact) -> GateState:
    region = artifact.region
    mine, theirs, calls, errors = canary_samples(artifact)
    need = region.canary_min_samples
    evidence = {"canary_calls": calls, "errors": errors, "samples": len(mine)}
    if errors:
        return GateState(
            Gate.CANARY,
            GateStatus.FAIL,
            f"the canary raised on {errors} of {calls} calls",
            evidence,
        )
    if region.platform == Platform.INTERPRET:
        if calls < need:
            return GateState(
                Gate.CANARY,
                GateStatus.INCONCLUSIVE,
                f"{calls} of {need} canary calls so far: waiting",
                evidence,
            )
        return GateState(
            Gate.CANARY,
            GateStatus.PASS,
            f"{calls} canary calls without error; latency is not compared on the interpreter "
            "(it measures numpy, not the kernel)",
            evidence,
        )
    if len(mine) < need or len(theirs) < need:
        return GateState(
            Gate.CANARY,
            GateStatus.INCONCLUSIVE,
            f"latency samples: canary {len(mine)}, incumbent {len(theirs)}, need {need} each",
            evidence,
        )
    tol = region.latency_tolerance
    stats = {
        q: (_percentile(mine, p), _percentile(theirs, p)) for q, p in (("p50", 0.5), ("p99", 0.99))
    }
    evidence.update(
        {q: {"canary_ms": a, "incumbent_ms": b} for q, (a, b) in stats.items()}, tolerance=tol
    )
    worse = [q for q, (a, b) in stats.items() if a > b * (1 + tol)]
    summary = ", ".join(f"{q} {a:.4g} vs {b:.4g} ms" for q, (a, b) in stats.items())
    if worse:
        return GateState(
            Gate.CANARY,
            GateStatus.FAIL,
            f"canary slower than the incumbent beyond {tol:.0%} at {', '.join(worse)} ({summary})",
            evidence,
        )
    return GateState(
        Gate.CANARY,
        GateStatus.PASS,
        f"canary within {tol:.0%} of the incumbent ({summary})",
        evidence,
    )


def _model_gate(artifact: Artifact) -> GateState:
    from apps.registry.selectors.model_check import (
        model_check_for,
        model_check_key,
        model_check_request,
    )

    request = model_check_request(artifact=artifact)
    check = model_check_for(artifact=artifact, key=model_check_key(request))
    if check is None:
        return GateState(
            Gate.MODEL,
            GateStatus.INCONCLUSIVE,
            f"the {request['config']} decoder must run stock vs patched with this kernel before "
            "it serves every call: sent to a worker when promoted",
        )
    evidence = {k: check.evidence.get(k) for k in ("verdict", "served", "agreement", "timing")}
    return GateState(Gate.MODEL, check.status, check.reason, evidence)


def artifact_gates(*, artifact: Artifact, target: str | None = None) -> list[GateState]:
    """The gates between ``artifact`` and ``target`` (default: its next stage)."""
    target = target or NEXT_STAGE.get(artifact.stage)
    gates = [_signature_gate(artifact), _toolchain_gate(artifact)]
    if target == Stage.CANARY:
        gates.append(_shadow_gate(artifact))
    elif target == Stage.DEFAULT:
        gates.append(_canary_gate(artifact))
        from apps.registry.selectors.model_check import model_check_covers

        if model_check_covers(artifact=artifact):
            gates.append(_model_gate(artifact))
    return gates
