"""Markdown bodies rendered safely, and diffs between two versions of an entry.

Markdown is converted to HTML and then cleaned by nh3 (an allow-list sanitiser): scripts, event
handler attributes, `javascript:` links and inline styles do not survive, whatever the author
wrote. Raw HTML in a body is escaped by the allow-list, not trusted.
"""

import difflib

import markdown
import nh3
from django.utils.safestring import SafeString, mark_safe

ALLOWED_TAGS = {
    "a", "abbr", "b", "blockquote", "br", "code", "del", "em", "h1", "h2", "h3", "h4", "h5",
    "h6", "hr", "i", "li", "ol", "p", "pre", "strong", "sub", "sup", "table", "tbody", "td",
    "th", "thead", "tr", "ul",
}  # fmt: skip
ALLOWED_ATTRIBUTES = {"a": {"href", "title"}, "td": {"align"}, "th": {"align"}}
URL_SCHEMES = {"http", "https", "mailto"}
MARKDOWN_EXTENSIONS = ["fenced_code", "tables", "sane_lists"]


def markdown_render(text: str) -> SafeString:
    """Markdown -> sanitised HTML, safe to insert into a page."""
    html = markdown.markdown(text or "", extensions=MARKDOWN_EXTENSIONS)
    clean = nh3.clean(
        html,
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        url_schemes=URL_SCHEMES,
        link_rel="noopener noreferrer nofollow",
    )
    return mark_safe(clean)  # noqa: S308 - cleaned by nh3's allow-list just above


def _text(value) -> str:
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    if isinstance(value, dict):
        return "; ".join(f"{k}={v}" for k, v in sorted(value.items()) if v not in (None, ""))
    return "" if value is None else str(value)


def snapshot_diff(old: dict | None, new: dict) -> dict:
    """What changed from `old` to `new` (version snapshots): changed fields and a line diff of
    the body as [(op, line)] with op one of " ", "+", "-", "@"."""
    old = old or {}
    fields = [
        {"field": name, "old": _text(old.get(name)), "new": _text(new.get(name))}
        for name in new
        if name != "body" and _text(old.get(name)) != _text(new.get(name))
    ]
    lines = []
    diff = difflib.unified_diff(
        (old.get("body") or "").splitlines(),
        (new.get("body") or "").splitlines(),
        lineterm="",
        n=2,
    )
    for line in list(diff)[2:]:
        op = line[:1] if line[:1] in "+-@" else " "
        lines.append((op, line[1:] if op in "+- " else line))
    return {"fields": fields, "body": lines, "changed": bool(fields or lines)}
