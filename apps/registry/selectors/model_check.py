"""Reads for the model check gate: what a check of an artifact runs (its request and key), its
stored result, and the rows the artifact page shows (output agreement, step-time change)."""

from apps.registry.constants import MODEL_CHECK_CONFIG, Gate, Stage
from apps.registry.models import Artifact, GateCheck
from apps.registry.selectors.under_compile import artifact_beats_compile
from workers.runtime.kinds import kind_of
from workers.runtime.signing import digest


def model_check_covers(*, artifact: Artifact) -> bool:
    """Whether the artifact's operator is one the decoder uses (a kind ``torch.ops.ke`` has)."""
    return kind_of(artifact.region.operator) is not None


def model_check_request(*, artifact: Artifact) -> dict:
    """The check's request: the decoder patched with this artifact and, for every other kind,
    the default that serves on the platform now (what the model would run after promotion)."""
    platform = artifact.region.platform
    mine = kind_of(artifact.region.operator)
    kernels = [_kernel(artifact)]
    seen = {mine}
    defaults = (
        Artifact.objects.filter(region__platform=platform, stage=Stage.DEFAULT)
        .select_related("region", "campaign__problem")
        .order_by("-id")
    )
    for other in defaults:
        kind = kind_of(other.region.operator)
        if kind is None or kind in seen:
            continue
        seen.add(kind)
        kernels.append(_kernel(other))
    return {
        "platform": platform,
        **MODEL_CHECK_CONFIG[platform],
        "kernels": kernels,
        "under_check": artifact.digest,
    }


def _kernel(artifact: Artifact) -> dict:
    return {
        "operator": artifact.region.operator,
        "kind": kind_of(artifact.region.operator),
        "digest": artifact.digest,
        "source": artifact.source,
        "problem_source": artifact.campaign.problem.source,
        "scope": artifact.scope,
        "tolerance": artifact.body.get("tolerance"),
        # Keep the kernel in the compiled decoder only where its campaign saw it beat compile.
        "beats_compile": artifact_beats_compile(artifact=artifact),
    }


def model_check_key(request: dict) -> str:
    """One check per (artifact, the kernels beside it, the decoder config)."""
    return digest(
        {
            "kernels": sorted(k["digest"] for k in request["kernels"]),
            "config": {k: v for k, v in request.items() if k not in ("kernels",)},
        }
    )


def model_check_for(*, artifact: Artifact, key: str | None = None) -> GateCheck | None:
    """The check of ``key`` (default: the latest of the artifact)."""
    checks = GateCheck.objects.filter(artifact=artifact, gate=Gate.MODEL)
    if key is not None:
        checks = checks.filter(toolchain_key=key)
    return checks.order_by("-id").first()


def model_check_rows(check: GateCheck | None) -> dict:
    """What the artifact page shows of a check: agreement per step, timing per step and mode,
    coverage per kind (empty lists while it waits)."""
    report = (check.evidence or {}) if check else {}
    agreement = [
        {"step": step, **row}
        for step, row in ((report.get("agreement") or {}).get("steps") or {}).items()
    ]
    timing = []
    for step, modes in (report.get("timing") or {}).items():
        if not isinstance(modes, dict):
            continue
        for mode, row in modes.items():
            if isinstance(row, dict):
                timing.append({"step": step, "mode": mode, **row})
    coverage = [
        {"kind": kind, **{k: v for k, v in row.items() if k != "signatures"},
         "fallbacks": [s for s in row.get("signatures", []) if s.get("path") == "fallback"]}
        for kind, row in (report.get("coverage") or {}).items()
    ]  # fmt: skip
    skipped = (report.get("timing") or {}).get("skipped")
    return {
        "check": check,
        "agreement": agreement,
        "timing": timing,
        "timing_skipped": skipped,
        "coverage": coverage,
        "config": report.get("config_name") or "",
        "dtype": report.get("dtype") or "",
        "fingerprint": report.get("fingerprint") or {},
    }
