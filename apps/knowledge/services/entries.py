"""Create, revise, revert and curate entries. Every change is a new version with its author
and reason; status changes go through the same path, so history shows who accepted, flagged
or retired an entry and why.

Every save checks the result: an active entry must not have expired (a past expiry date is
refused, whether it is typed in, imported or still there when an expired entry is edited or
reactivated: set a later date, or retire the entry), and platforms must be ones the workers
run (`workers.constants.PLATFORMS`). Text is stored NFC-normalised, so that search finds a
word however its accents were typed.
"""

import unicodedata
from datetime import date

from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils.text import slugify

from apps.knowledge.constants import (
    CURATION_ACTIONS,
    VERSIONED_FIELDS,
    EntryKind,
    EntryOrigin,
    EntryStatus,
    Visibility,
)
from apps.knowledge.models import Entry, EntryVersion, labels_join, labels_split
from workers.constants import PLATFORMS

LABEL_FIELDS = ("tags", "families", "platforms")


def entry_snapshot(entry: Entry) -> dict:
    """The versioned fields of an entry as plain JSON (lists for labels, group by name)."""
    snap = {}
    for name in VERSIONED_FIELDS:
        value = getattr(entry, name)
        if name in LABEL_FIELDS:
            value = labels_split(value)
        elif name == "group":
            value = value.name if value else None
        elif name == "expires_on":
            value = value.isoformat() if value else None
        snap[name] = value
    return snap


def _coerce(name: str, value):
    """A field value from a form, the API, a file or a snapshot -> what the model stores."""
    if name in LABEL_FIELDS:
        if isinstance(value, str):
            value = value.split(",")
        return labels_join(value)
    if name == "group":
        if value in (None, ""):
            return None
        if isinstance(value, Group):
            return value
        try:
            return Group.objects.get(name=value) if isinstance(value, str) else value
        except Group.DoesNotExist as exc:
            raise ValidationError({"group": f"no group named {value!r}"}) from exc
    if name == "expires_on":
        if value in (None, ""):
            return None
        return value if isinstance(value, date) else date.fromisoformat(str(value))
    if name == "body":
        # Forms send CRLF and files end with a newline: store one canonical text.
        text = str(value).replace("\r\n", "\n").strip("\n").rstrip()
        return unicodedata.normalize("NFC", text)
    if name == "title":
        return unicodedata.normalize("NFC", str(value).strip())
    if name == "provenance":
        return {k: v for k, v in dict(value or {}).items() if v not in (None, "")}
    return value


def _validate(entry: Entry) -> None:
    if not entry.title.strip():
        raise ValidationError({"title": "an entry needs a title"})
    for name in ("title", *LABEL_FIELDS):
        limit = Entry._meta.get_field(name).max_length
        if len(getattr(entry, name)) > limit:
            raise ValidationError({name: f"at most {limit} characters in all"})
    if not entry.body.strip():
        raise ValidationError({"body": "an entry needs a body"})
    if entry.kind not in EntryKind.values:
        raise ValidationError({"kind": f"unknown kind {entry.kind!r}"})
    if entry.status not in EntryStatus.values:
        raise ValidationError({"status": f"unknown status {entry.status!r}"})
    if entry.visibility == Visibility.RESTRICTED and entry.group is None:
        raise ValidationError({"group": "a restricted entry needs the group that may see it"})
    if entry.visibility == Visibility.PUBLIC:
        entry.group = None
    unknown = [p for p in entry.platform_list if p not in PLATFORMS]
    if unknown:
        raise ValidationError(
            {
                "platforms": f"unknown platform {', '.join(map(repr, unknown))}: "
                f"entries apply to {', '.join(PLATFORMS)} (or, with none named, to all)"
            }
        )
    if (
        entry.status == EntryStatus.ACTIVE
        and entry.expires_on
        and entry.expires_on < date.today()  # "today" as revalidation and retrieval read it
    ):
        raise ValidationError(
            {
                "expires_on": f"expiry date {entry.expires_on.isoformat()} is in the past: an "
                "active entry must not have expired (set a later date, or retire the entry)"
            }
        )


def _unique_slug(text: str) -> str:
    base = slugify(text)[:100] or "entry"
    slug, n = base, 2
    while Entry.objects.filter(slug=slug).exists():
        slug, n = f"{base}-{n}", n + 1
    return slug


def _record_version(entry: Entry, by, reason: str) -> EntryVersion:
    return EntryVersion.objects.create(
        entry=entry,
        number=entry.version,
        snapshot=entry_snapshot(entry),
        author=by if getattr(by, "is_authenticated", False) else None,
        reason=reason,
    )


@transaction.atomic
def knowledge_entry_create(
    *,
    by,
    title: str,
    body: str,
    kind: str,
    reason: str = "Created",
    slug: str = "",
    origin: str = EntryOrigin.MANUAL,
    evidence_campaigns=(),
    evidence_nodes=(),
    source_campaign=None,
    finding_key: str = "",
    **fields,
) -> Entry:
    """A new entry and its version 1. `fields`: any of constants.VERSIONED_FIELDS."""
    unknown = set(fields) - set(VERSIONED_FIELDS)
    if unknown:
        raise ValidationError(f"unknown fields: {', '.join(sorted(unknown))}")
    if slug and Entry.objects.filter(slug=slug).exists():
        raise ValidationError({"slug": f"an entry with slug {slug!r} exists"})
    entry = Entry(
        slug=slug or _unique_slug(title),
        title=_coerce("title", title),
        body=_coerce("body", body),
        kind=kind,
        origin=origin,
        source_campaign=source_campaign,
        finding_key=finding_key,
        created_by=by if getattr(by, "is_authenticated", False) else None,
    )
    for name, value in fields.items():
        setattr(entry, name, _coerce(name, value))
    _validate(entry)
    entry.save()
    entry.evidence_campaigns.set(evidence_campaigns)
    entry.evidence_nodes.set(evidence_nodes)
    _record_version(entry, by, reason)
    return entry


@transaction.atomic
def knowledge_entry_revise(*, entry: Entry, by, reason: str, **changes) -> Entry:
    """Apply `changes` (versioned fields) as a new version; refuses an edit without a reason or
    one that changes nothing."""
    if not (reason or "").strip():
        raise ValidationError({"reason": "say why you change this entry"})
    unknown = set(changes) - set(VERSIONED_FIELDS)
    if unknown:
        raise ValidationError(f"unknown fields: {', '.join(sorted(unknown))}")
    entry = Entry.objects.select_for_update(of=("self",)).select_related("group").get(pk=entry.pk)
    before = entry_snapshot(entry)
    for name, value in changes.items():
        setattr(entry, name, _coerce(name, value))
    _validate(entry)
    if entry_snapshot(entry) == before:
        raise ValidationError("nothing changed")
    entry.version += 1
    entry.save()
    _record_version(entry, by, reason.strip())
    return entry


def knowledge_entry_revert(*, entry: Entry, by, number: int, reason: str = "") -> Entry:
    """A new version whose content is that of version `number`."""
    try:
        old = entry.versions.get(number=number)
    except EntryVersion.DoesNotExist as exc:
        raise ValidationError({"version": f"entry has no version {number}"}) from exc
    note = f"Revert to version {number}" + (f": {reason.strip()}" if reason.strip() else "")
    try:
        return knowledge_entry_revise(entry=entry, by=by, reason=note, **old.snapshot)
    except ValidationError as exc:
        if exc.messages == ["nothing changed"]:
            raise ValidationError(f"version {number} is the current content") from exc
        raise


def knowledge_entry_curate(*, entry: Entry, by, action: str, reason: str = "") -> Entry:
    """accept / reject a draft, mark a flagged entry revalidated, retire or reactivate one."""
    if action not in CURATION_ACTIONS:
        raise ValidationError({"action": f"unknown action {action!r}"})
    allowed_from, new_status = CURATION_ACTIONS[action]
    if entry.status not in allowed_from:
        raise ValidationError(
            f"cannot {action} an entry that is {EntryStatus(entry.status).label.lower()}"
        )
    note = reason.strip() if action == "reject" else ""
    return knowledge_entry_revise(
        entry=entry,
        by=by,
        reason=reason.strip() or f"{action.capitalize()} ({getattr(by, 'username', 'system')})",
        status=new_status,
        status_note=note,
    )


def knowledge_entries_retire(*, entries, by, reason: str) -> list[Entry]:
    """Retire several entries at once (each gets its own version); ones already retired or
    rejected are skipped. Returns the retired ones."""
    if not (reason or "").strip():
        raise ValidationError({"reason": "say why these entries are retired"})
    allowed = CURATION_ACTIONS["retire"][0]
    return [
        knowledge_entry_curate(entry=entry, by=by, action="retire", reason=reason)
        for entry in entries
        if entry.status in allowed
    ]
