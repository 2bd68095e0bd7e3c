"""Import entries from Markdown files (and the starter set shipped with the app).

A file whose slug is new creates an entry; one whose slug exists revises it when its content
differs (a new version, reason "Imported from <file>") and is left alone otherwise, so
importing the same files twice changes nothing. A slug that exists but is hidden from the
importer is refused rather than overwritten or revealed. A file of an active entry whose expiry
has passed (an old export, a starter note past its date) is imported as needing revalidation,
as `knowledge_revalidate` would flag it, since an active entry must not have expired.
"""

from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

from django.core.exceptions import ValidationError
from django.db import transaction

from apps.campaigns.models import Campaign, Node
from apps.knowledge.constants import STARTER_DIR_NAME, EntryOrigin, EntryStatus
from apps.knowledge.markdown_files import MarkdownFileError, markdown_parse
from apps.knowledge.models import Entry
from apps.knowledge.selectors.entries import entries_visible
from apps.knowledge.services.entries import (
    entry_snapshot,
    knowledge_entry_create,
    knowledge_entry_revise,
)

STARTER_DIR = Path(__file__).resolve().parent.parent / STARTER_DIR_NAME


@dataclass
class ImportResult:
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {
            "created": self.created,
            "updated": self.updated,
            "unchanged": self.unchanged,
            "errors": self.errors,
        }


def _evidence(meta: dict) -> tuple[list, list]:
    campaigns = list(Campaign.objects.filter(pk__in=meta.pop("evidence_campaigns", None) or []))
    nodes = []
    for ref in meta.pop("evidence_nodes", None) or []:
        campaign_id, _, key = str(ref).partition(":")
        node = Node.objects.filter(campaign_id=campaign_id, key=key).first()
        if node is not None:
            nodes.append(node)
    return campaigns, nodes


def _flag_if_expired(meta: dict) -> None:
    try:
        expires = date.fromisoformat(str(meta.get("expires_on") or ""))
    except ValueError:
        return  # none, or not a date: the service says what is wrong with it
    if meta.get("status", EntryStatus.ACTIVE) == EntryStatus.ACTIVE and expires < date.today():
        meta["status"] = EntryStatus.NEEDS_REVALIDATION
        meta["status_note"] = f"expired on {expires.isoformat()}"


def _import_one(*, name: str, text: str, by, origin: str, result: ImportResult) -> None:
    meta = markdown_parse(text)
    _flag_if_expired(meta)
    slug = meta.pop("slug")
    campaigns, nodes = _evidence(meta)
    existing = Entry.objects.filter(slug=slug).first()
    if existing is None:
        knowledge_entry_create(
            by=by,
            slug=slug,
            origin=origin,
            reason=f"Imported from {name}",
            evidence_campaigns=campaigns,
            evidence_nodes=nodes,
            **meta,
        )
        result.created.append(slug)
        return
    if not entries_visible(user=by).filter(pk=existing.pk).exists():
        raise ValidationError(f"slug {slug!r} belongs to an entry you may not see")
    current = entry_snapshot(existing)
    changes = {k: v for k, v in meta.items() if k in current}
    try:
        knowledge_entry_revise(entry=existing, by=by, reason=f"Imported from {name}", **changes)
    except ValidationError as exc:
        if exc.messages == ["nothing changed"]:
            result.unchanged.append(slug)
            return
        raise
    existing.evidence_campaigns.add(*campaigns)
    existing.evidence_nodes.add(*nodes)
    result.updated.append(slug)


def knowledge_import(
    *, files: list[tuple[str, str]], by, origin: str = EntryOrigin.IMPORT
) -> ImportResult:
    """Import (name, text) Markdown files; each file succeeds or fails on its own."""
    result = ImportResult()
    for name, text in files:
        try:
            with transaction.atomic():
                _import_one(name=name, text=text, by=by, origin=origin, result=result)
        except (MarkdownFileError, ValidationError) as exc:
            messages = exc.messages if isinstance(exc, ValidationError) else [str(exc)]
            result.errors[name] = "; ".join(messages)
    return result


def knowledge_starter_load(*, by=None) -> ImportResult:
    """Load the starter set shipped in apps/knowledge/starter/ (safe to run again)."""
    files = [(p.name, p.read_text()) for p in sorted(STARTER_DIR.glob("*.md"))]
    return knowledge_import(files=files, by=by, origin=EntryOrigin.STARTER)
