"""The stage manifest body a platform's runtime clients receive (unsigned; services sign it).

Each artifact entry carries, beside its own signed body, ``beats_compile``: whether its campaign
measured it faster than ``torch.compile`` on every case (``selectors.under_compile``), so a
compiled model keeps the kernel. It sits outside the frozen body (a judgement about the body,
not part of it) and inside the manifest's signature.
"""

from django.db.models import Max

from apps.registry.constants import MANIFEST_SCHEMA, POLL_INTERVAL_S, Stage
from apps.registry.models import Artifact, Event, Region
from apps.registry.selectors.under_compile import artifact_beats_compile
from workers.runtime.signing import sha256_text


def manifest_build(*, platform: str) -> dict:
    """Regions with their default / canary / shadow artifacts, the artifacts' signed entries
    and the operators' reference sources. Deterministic: same state, same body, same ETag."""
    regions = list(
        Region.objects.filter(platform=platform)
        .select_related("default_artifact__campaign")
        .order_by("id")
    )
    live = Artifact.objects.filter(
        region__platform=platform, stage__in=[Stage.SHADOW, Stage.CANARY, Stage.DEFAULT]
    ).select_related("region", "campaign")
    by_region: dict[int, dict] = {}
    artifacts = {}
    for artifact in live:
        by_region.setdefault(artifact.region_id, {})[artifact.stage] = artifact
    operators = {}
    out_regions = []
    for region in regions:
        staged = by_region.get(region.pk, {})
        default = region.default_artifact
        canary = staged.get(Stage.CANARY)
        shadow = staged.get(Stage.SHADOW)
        for artifact in (default, canary, shadow):
            if artifact is not None:
                artifacts[artifact.digest] = {
                    "body": artifact.body,
                    "signature": artifact.signature,
                    "key_id": artifact.key_id,
                    "beats_compile": artifact_beats_compile(artifact=artifact),
                }
        if region.problem_id and region.operator not in operators:
            source = region.problem.source
            operators[region.operator] = {
                "problem_source": source,
                "problem_sha256": sha256_text(source),
            }
        out_regions.append(
            {
                "id": region.pk,
                "operator": region.operator,
                "scope": region.scope,
                "default": default.digest if default else None,
                "canary": {"artifact": canary.digest, "percent": canary.canary_percent}
                if canary
                else None,
                "shadow": {"artifact": shadow.digest, "sample_rate": region.shadow_sample_rate}
                if shadow
                else None,
            }
        )
    version = Event.objects.filter(region__platform=platform).aggregate(v=Max("id"))["v"] or 0
    return {
        "schema": MANIFEST_SCHEMA,
        "platform": platform,
        "version": version,
        "poll_interval_s": POLL_INTERVAL_S,
        "regions": out_regions,
        "artifacts": artifacts,
        "operators": operators,
    }
