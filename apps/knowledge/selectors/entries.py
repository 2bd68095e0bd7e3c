"""Which entries a user may see, and the lists, queues and histories built on that.

Visibility is decided here, by two selectors:

- `entries_visible` (pages, the API, full-text search, export, import): public entries, those
  restricted to a group the user is in, and every entry for the knowledge base's curators, that
  is anyone holding `curate_knowledge` (the curator and admin roles). An entry has no curator of
  its own (`created_by` is empty for starter entries and campaign findings), so "its curators"
  are the people who curate the knowledge base: they review drafts and flagged entries whatever
  their groups, and an edit can never hide an entry from the person who made it.
- `entries_retrievable` (what a generator's prompt may carry, bound to the campaign's owner):
  public entries and those restricted to a group the owner is in. The curator's office does
  not widen it: restricted text reaches a prompt only through group membership.

An anonymous user, like a campaign without an owner, sees public entries only.
"""

from django.contrib.auth.models import Group
from django.db.models import Q, QuerySet

from apps.accounts.permissions import has_portal_permission
from apps.knowledge.constants import DEFAULT_LISTED_STATUSES, EntryStatus, Visibility
from apps.knowledge.models import Entry, EntryVersion, labels_join


def _public_or_member(user) -> Q:
    public = Q(visibility=Visibility.PUBLIC)
    if user is None or not user.is_authenticated:
        return public
    return public | Q(visibility=Visibility.RESTRICTED, group__in=user.groups.all())


def entries_visible(*, user) -> QuerySet[Entry]:
    qs = Entry.objects.select_related("group", "created_by")
    if has_portal_permission(user, "curate_knowledge"):
        return qs
    return qs.filter(_public_or_member(user))


def entries_retrievable(*, user) -> QuerySet[Entry]:
    """Entries whose text may reach the prompt of a campaign owned by `user` (None: no owner)."""
    return Entry.objects.select_related("group", "created_by").filter(_public_or_member(user))


def group_has_member(*, group: Group, user) -> bool:
    return bool(user and user.is_authenticated and user.groups.filter(pk=group.pk).exists())


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
