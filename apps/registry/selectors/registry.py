"""Regions, artifacts, history and alarms as the pages and the API list them."""

from django.db.models import Q, QuerySet

from apps.campaigns.constants import NodeStatus
from apps.campaigns.models import Node
from apps.registry.constants import EventKind, Stage
from apps.registry.models import Alarm, Artifact, Event, Region


def region_list(*, operator: str | None = None, platform: str | None = None) -> QuerySet:
    qs = (
        Region.objects.select_related("default_artifact")
        .defer("default_artifact__ir")
        .order_by("operator", "platform", "id")
    )
    if operator:
        qs = qs.filter(operator=operator)
    if platform:
        qs = qs.filter(platform=platform)
    return qs


def operator_list() -> list[dict]:
    """One row per operator: its regions' platforms and what serves as default."""
    rows: dict[str, dict] = {}
    for region in region_list():
        row = rows.setdefault(
            region.operator,
            {"operator": region.operator, "family": region.family, "regions": []},
        )
        row["regions"].append(region)
    return list(rows.values())


# What no page or API answer reads from an artifact's related rows: the node's report (~150 kB
# of JSON) and source (the body carries the source). `ir` (the compiler's IR dumps, ~100 kB) is
# recorded for the digest and read by no page or API.
ARTIFACT_LIST_DEFERRED = ("ir", "node__report", "node__source")


def artifact_list(*, region: Region | None = None, stage: str | None = None) -> QuerySet:
    qs = Artifact.objects.select_related("region", "campaign", "node", "created_by").defer(
        *ARTIFACT_LIST_DEFERRED
    )
    if region is not None:
        qs = qs.filter(region=region)
    if stage:
        qs = qs.filter(stage=stage)
    return qs.order_by("-id")


def artifact_get(*, pk: int) -> Artifact:
    return artifact_list().get(pk=pk)


def region_events(*, region: Region, limit: int = 200) -> QuerySet:
    return (
        Event.objects.filter(region=region)
        .select_related("artifact")
        .defer("artifact__ir", "artifact__body")
        .order_by("-id")[:limit]
    )


def previous_default(*, region: Region) -> Artifact | None:
    """What served before the current default was promoted (None: the PyTorch reference).

    Rollbacks do not count: after rolling back from B to A, A's previous default is still what
    preceded A's own promotion, so a second rollback never returns to B.
    """
    current = region.default_artifact
    if current is None:
        return None
    promoted = (
        Event.objects.filter(
            region=region,
            kind=EventKind.PROMOTED,
            to_stage=Stage.DEFAULT,
            to_artifact=current.digest,
        )
        .order_by("-id")
        .first()
    )
    digest = (promoted.evidence or {}).get("previous_default") if promoted else None
    if not digest:
        return None
    return Artifact.objects.filter(region=region, digest=digest).defer("ir").first()


def rollback_targets(*, region: Region) -> list[Artifact]:
    """Earlier artifacts of the region that served as default once (newest first)."""
    served = set(
        Event.objects.filter(region=region, to_stage=Stage.DEFAULT)
        .exclude(kind=EventKind.APPROVED)
        .values_list("to_artifact", flat=True)
    )
    qs = (
        Artifact.objects.filter(region=region, digest__in=served)
        .exclude(pk=region.default_artifact_id)
        .defer("ir")
    )
    return list(qs.order_by("-id"))


def accepted_nodes_unfrozen(*, limit: int = 50) -> QuerySet:
    """Accepted candidates no live artifact was frozen from yet (what reviewers can freeze)."""
    frozen = Artifact.objects.exclude(stage=Stage.ABORTED).values("node_id")
    # Only what the list shows: an accepted node's report alone is ~150 kB of JSON (every gate's
    # evidence), and loading 50 of them made this the slowest page of the portal.
    return (
        Node.objects.filter(status=NodeStatus.ACCEPTED)
        .exclude(pk__in=frozen)
        .select_related("campaign", "campaign__created_by")
        .only(
            "id",
            "key",
            "campaign__id",
            "campaign__name",
            "campaign__platform",
            "campaign__created_by__username",
        )
        .order_by("-id")[:limit]
    )


def alarm_open_list(*, operator: str | None = None, region: Region | None = None) -> QuerySet:
    # An alarm names its artifact by id and digest: not its body or IR (~100 kB each).
    qs = (
        Alarm.objects.filter(resolved_at__isnull=True)
        .select_related("artifact", "region")
        .defer("artifact__ir", "artifact__body")
    )
    if operator:
        qs = qs.filter(Q(operator=operator) | Q(region__operator=operator))
    if region is not None:
        qs = qs.filter(region=region)
    return qs.order_by("-id")


def approvals_awaiting(*, user) -> QuerySet:
    """Artifacts whose next promotion this reviewer may approve and has not approved yet
    (never their own campaign's, DESIGN.md §5)."""
    from django.db.models import Exists, OuterRef

    from apps.registry.constants import NEXT_STAGE
    from apps.registry.models import Approval

    if not user.has_perm("accounts.approve_promotion"):
        return Artifact.objects.none()
    awaiting = Q()
    for stage, target in NEXT_STAGE.items():
        mine = Approval.objects.filter(
            artifact=OuterRef("pk"), stage=target, user=user, digest=OuterRef("digest")
        )
        awaiting |= Q(stage=stage) & ~Q(Exists(mine))
    return (
        Artifact.objects.filter(awaiting)
        .exclude(campaign__created_by=user)
        .select_related("region", "campaign", "node")
        .defer("body", "ir", "node__source", "node__report")
        .order_by("-created_at")[:100]
    )
