"""The freeze list: every kernel frozen into the registry (its artifacts, whatever their stage),
sorted by fitness, date, operator or platform and filtered by operator, platform and stage."""

from django.db.models import F, QuerySet

from apps.registry.models import Artifact, Region
from apps.registry.selectors.registry import artifact_list

FREEZE_LIST_SIZE = 50
# Sort keys of the query string and the columns they order by; a leading '-' is descending.
FREEZE_LIST_SORTS = {
    "fitness": "node__fitness",
    "date": "created_at",
    "operator": "region__operator",
    "platform": "region__platform",
}
FREEZE_LIST_DEFAULT_SORT = "-date"
# The list shows ids, digests, regions' labels and the candidate's fitness: not the signed body
# (the source and its evidence, tens of kB) nor the node's feedback and fitness detail.
FREEZE_LIST_DEFERRED = ("body", "node__fitness_detail", "node__feedback")


def freeze_list_sort(sort: str) -> str:
    """`sort` when it names a known key (with or without '-'), else the default (newest first)."""
    return sort if sort.lstrip("-") in FREEZE_LIST_SORTS else FREEZE_LIST_DEFAULT_SORT


def artifact_freeze_list(
    *, operator: str = "", platform: str = "", stage: str = "", sort: str = ""
) -> QuerySet[Artifact]:
    """Frozen kernels, filtered and sorted. An untimed kernel's fitness (frozen from the
    interpreter) goes last either way; the newest artifact breaks ties."""
    qs = artifact_list(stage=stage or None).defer(*FREEZE_LIST_DEFERRED)
    if operator:
        qs = qs.filter(region__operator=operator)
    if platform:
        qs = qs.filter(region__platform=platform)
    sort = freeze_list_sort(sort)
    column = F(FREEZE_LIST_SORTS[sort.lstrip("-")])
    order = column.desc(nulls_last=True) if sort.startswith("-") else column.asc(nulls_last=True)
    return qs.order_by(order, "-id")


def freeze_list_operators() -> list[str]:
    """The operators the registry has regions for (the list's operator filter)."""
    return list(Region.objects.order_by("operator").values_list("operator", flat=True).distinct())
