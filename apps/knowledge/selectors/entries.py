"""Which entries a user may see, and the lists, queues and histories built on that.

`entries_visible` is the only place visibility is decided: pages, the API, full-text search and
the retrieval for generator prompts all start from it. A restricted entry is visible only to
members of its group, admins and superusers included (an admin who needs it joins the group);
a campaign without an owner, like an anonymous user, sees public entries only.
"""

from django.db.models import Q, QuerySet

from apps.knowledge.constants import DEFAULT_LISTED_STATUSES, EntryStatus, Visibility
from apps.knowledge.models import Entry, EntryVersion, labels_join


def entries_visible(*, user) -> QuerySet[Entry]:
    qs = Entry.objects.select_related("group", "created_by")
    public = Q(visibility=Visibility.PUBLIC)
    if user is None or not user.is_authenticated:
        return qs.filter(public)
    return qs.filter(public | Q(visibility=Visibility.RESTRICTED, group__in=user.groups.all()))


def entry_get(*, user, pk: int) -> Entry:
    """One visible entry; `Entry.DoesNotExist` for one the user may not see (a 404, not a 403,
    so that restricted titles do not leak by id)."""
    return entries_visible(user=user).get(pk=pk)


def _label_filter(field: str, value: str) -> Q:
    return Q(**{f"{field}__contains": labels_join([value])})


def entry_list(
    *,
    user,
    kind: str = "",
    status: str = "",
    platform: str = "",
    family: str = "",
    tag: str = "",
) -> QuerySet[Entry]:
    """Visible entries, filtered. A platform or family filter also keeps entries that name no
    platform (or family): those apply everywhere. Without a status, drafts, active entries and
    those needing revalidation are listed (retired and rejected ones only when asked for)."""
    qs = entries_visible(user=user)
    qs = qs.filter(status=status) if status else qs.filter(status__in=DEFAULT_LISTED_STATUSES)
    if kind:
        qs = qs.filter(kind=kind)
    if platform:
        qs = qs.filter(_label_filter("platforms", platform) | Q(platforms=""))
    if family:
        qs = qs.filter(_label_filter("families", family) | Q(families=""))
    if tag:
        qs = qs.filter(_label_filter("tags", tag))
    return qs


def curation_queue(*, user) -> dict[str, QuerySet[Entry]]:
    """Drafts (campaign findings) and entries needing revalidation, oldest first."""
    visible = entries_visible(user=user).order_by("created_at")
    return {
        "drafts": visible.filter(status=EntryStatus.DRAFT).select_related("source_campaign"),
        "revalidation": visible.filter(status=EntryStatus.NEEDS_REVALIDATION),
    }


def entry_versions(*, entry: Entry) -> QuerySet[EntryVersion]:
    return entry.versions.select_related("author").order_by("-number")


def entry_version_pair(*, entry: Entry, number: int) -> tuple[EntryVersion, EntryVersion | None]:
    """A version and the one before it (None for the first)."""
    version = entry.versions.select_related("author").get(number=number)
    previous = entry.versions.filter(number__lt=number).order_by("-number").first()
    return version, previous


def entry_labels(*, user) -> dict[str, list[str]]:
    """Every tag, family and platform in use among visible entries (for filter menus)."""
    labels: dict[str, set[str]] = {"tags": set(), "families": set(), "platforms": set()}
    for row in entries_visible(user=user).values("tags", "families", "platforms"):
        for field, found in labels.items():
            found.update(label for label in row[field].split(",") if label)
    return {field: sorted(found) for field, found in labels.items()}
