"""Runtime metrics as the portal reads them: shadow stats, per-region coverage and latency,
and the operator × platform × dtype coverage matrix."""

from collections import defaultdict

from django.db.models import Sum

from apps.registry.constants import RECENT_REPORTS, Path, Stage
from apps.registry.models import Artifact, Region, RuntimeCount, RuntimeReport, ShadowResult


def shadow_stats(*, artifact: Artifact, since=None) -> dict:
    qs = ShadowResult.objects.filter(artifact=artifact)
    if since is not None:
        qs = qs.filter(created_at__gte=since)
    samples = mismatches = 0
    cases: list = []
    for row in qs.order_by("id"):
        samples += row.samples
        mismatches += row.mismatches
        # Rows stored before reports were validated may hold cases that are not objects.
        cases.extend(c for c in row.cases if isinstance(c, dict))
    return {"samples": samples, "mismatches": mismatches, "cases": cases[:50]}


def _recent_counts():
    first = RuntimeReport.objects.order_by("-id").values_list("id", flat=True)[
        RECENT_REPORTS - 1 : RECENT_REPORTS
    ]
    qs = RuntimeCount.objects.all()
    if first:
        qs = qs.filter(report_id__gte=first[0])
    return qs


def region_metrics(*, region: Region) -> dict:
    """Calls by path, coverage, shadow results and latency samples (default vs canary)."""
    counts = _recent_counts().filter(region=region)
    by_path = {p: 0 for p in Path.values}
    latency = {"default": [], "canary": [], "fallback": []}
    errors = 0
    for row in counts:
        by_path[row.path] += row.calls
        errors += row.errors
        latency[row.path].extend(row.latency_ms)
    total = sum(by_path.values())
    kernel = by_path[Path.DEFAULT] + by_path[Path.CANARY]
    shadows = []
    recent = region.artifacts.filter(stage__in=[Stage.SHADOW, Stage.ABORTED]).defer("ir", "body")
    for artifact in recent.order_by("-id")[:5]:
        stats = shadow_stats(artifact=artifact)
        if stats["samples"] or artifact.stage == Stage.SHADOW:
            shadows.append({"artifact": artifact, **stats})
    return {
        "calls": total,
        "by_path": by_path,
        "errors": errors,
        "coverage": (kernel / total) if total else None,
        "latency": latency,
        "shadows": shadows,
        "mismatches": sum(s["mismatches"] for s in shadows),
    }


def operator_fallbacks(*, operator: str) -> dict:
    """Calls of ``operator`` that matched no region at all, per platform."""
    rows = (
        _recent_counts()
        .filter(operator=operator, region__isnull=True)
        .values("platform")
        .annotate(calls=Sum("calls"))
    )
    return {r["platform"]: r["calls"] for r in rows}


def coverage_matrix() -> list[dict]:
    """Cells operator × platform × dtype: what serves each, its share of calls, coverage."""
    cells: dict[tuple, dict] = {}

    def cell(op, platform, dtype):
        return cells.setdefault(
            (op, platform, dtype),
            {
                "operator": op,
                "platform": platform,
                "dtype": dtype or "—",
                "calls": 0,
                "kernel_calls": 0,
                "serving": [],
            },
        )

    # Two queries whatever the number of regions: the regions, then every live artifact (without
    # the signed body and IR the matrix does not show).
    live_by_region: dict[int, list[Artifact]] = defaultdict(list)
    for artifact in (
        Artifact.objects.filter(stage__in=[Stage.SHADOW, Stage.CANARY, Stage.DEFAULT])
        .defer("body", "ir", "signature")
        .order_by("-id")
    ):
        live_by_region[artifact.region_id].append(artifact)
    for region in Region.objects.all():
        live = live_by_region.get(region.pk, [])
        for dtype in region.scope.get("dtypes", []):
            c = cell(region.operator, region.platform, dtype)
            for artifact in live:
                if dtype in artifact.scope.get("dtypes", []):
                    c["serving"].append(
                        {"stage": artifact.stage, "artifact": artifact, "region": region}
                    )
    totals: dict[tuple, int] = defaultdict(int)
    for row in (
        _recent_counts().values("operator", "platform", "dtype", "path").annotate(n=Sum("calls"))
    ):
        c = cell(row["operator"], row["platform"], row["dtype"])
        c["calls"] += row["n"]
        if row["path"] != Path.FALLBACK:
            c["kernel_calls"] += row["n"]
        totals[(row["operator"], row["platform"])] += row["n"]
    out = []
    for (op, platform, _), c in sorted(cells.items(), key=lambda kv: tuple(map(str, kv[0]))):
        total = totals.get((op, platform), 0)
        c["share"] = (c["calls"] / total) if total else None
        c["coverage"] = (c["kernel_calls"] / c["calls"]) if c["calls"] else None
        c["serves"] = (
            "fallback" if not any(s["stage"] == Stage.DEFAULT for s in c["serving"]) else "kernel"
        )
        out.append(c)
    return out
