"""Visible entries as Markdown files (for export by page, API and command)."""

from apps.knowledge.markdown_files import entry_markdown
from apps.knowledge.selectors.entries import entries_visible


def knowledge_export_files(*, user, statuses=None) -> list[tuple[str, str]]:
    """[(file name, text)] for every entry `user` may see (optionally only some statuses)."""
    qs = entries_visible(user=user).prefetch_related("evidence_campaigns", "evidence_nodes")
    if statuses:
        qs = qs.filter(status__in=statuses)
    return [(f"{entry.slug}.md", entry_markdown(entry)) for entry in qs.order_by("slug")]
