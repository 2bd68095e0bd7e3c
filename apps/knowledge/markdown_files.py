"""Entries as Markdown files with YAML front matter, so a team can keep them in git.

    ---
    slug: hopper-h200-copy-bandwidth
    title: H200 copy bandwidth is 4.16 TB/s
    kind: hardware_rule
    ...
    ---
    The body, in Markdown.

`entry_markdown` writes one; `markdown_parse` reads one back into service arguments.
"""

import yaml

from apps.knowledge.constants import EntryKind, EntryStatus, Visibility

FRONT_MATTER_FIELDS = (
    "slug",
    "title",
    "kind",
    "status",
    "status_note",
    "tags",
    "families",
    "platforms",
    "visibility",
    "group",
    "expires_on",
    "provenance",
    "evidence_campaigns",
    "evidence_nodes",
)


class MarkdownFileError(ValueError):
    """A file that is not an entry (no front matter, a missing or invalid field)."""


def entry_markdown(entry) -> str:
    """One entry as a Markdown file (evidence nodes written as `campaign:key`)."""
    meta = {
        "slug": entry.slug,
        "title": entry.title,
        "kind": str(entry.kind),
        "status": str(entry.status),
        "status_note": entry.status_note or None,
        "tags": entry.tag_list,
        "families": entry.family_list,
        "platforms": entry.platform_list,
        "visibility": str(entry.visibility),
        "group": entry.group.name if entry.group_id else None,
        "expires_on": entry.expires_on.isoformat() if entry.expires_on else None,
        "provenance": entry.provenance or {},
        "evidence_campaigns": [c.pk for c in entry.evidence_campaigns.all()],
        "evidence_nodes": [f"{n.campaign_id}:{n.key}" for n in entry.evidence_nodes.all()],
    }
    meta = {k: v for k, v in meta.items() if v not in (None, [], {})}
    front = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, width=100)
    return f"---\n{front}---\n{entry.body.rstrip()}\n"


def markdown_parse(text: str) -> dict:
    """A Markdown file -> {field: value, "body": ...}; MarkdownFileError when it is not one."""
    text = text.lstrip("\ufeff")
    if not text.startswith("---"):
        raise MarkdownFileError("no front matter (the file must start with ---)")
    try:
        _, front, body = text.split("---", 2)
    except ValueError as exc:
        raise MarkdownFileError("front matter is not closed by ---") from exc
    try:
        meta = yaml.safe_load(front) or {}
    except yaml.YAMLError as exc:
        raise MarkdownFileError(f"front matter is not valid YAML: {exc}") from exc
    if not isinstance(meta, dict):
        raise MarkdownFileError("front matter must be a mapping")
    unknown = set(meta) - set(FRONT_MATTER_FIELDS)
    if unknown:
        raise MarkdownFileError(f"unknown front matter fields: {', '.join(sorted(unknown))}")
    for required in ("slug", "title", "kind"):
        if not meta.get(required):
            raise MarkdownFileError(f"front matter needs {required!r}")
    checks = (("kind", EntryKind), ("status", EntryStatus), ("visibility", Visibility))
    for name, choices in checks:
        if name in meta and meta[name] not in choices.values:
            raise MarkdownFileError(f"{name} {meta[name]!r} is not one of {choices.values}")
    if meta.get("expires_on") is not None:
        meta["expires_on"] = str(meta["expires_on"])
    meta["body"] = body.strip("\n")
    return meta
