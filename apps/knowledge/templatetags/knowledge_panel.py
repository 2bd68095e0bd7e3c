"""The knowledge a candidate's generator was given, for pages of other apps (the candidate page
loads this tag; ``campaigns`` does not import ``knowledge``: issue 13)."""

from django import template

from apps.knowledge.selectors.entries import entries_visible

register = template.Library()


@register.simple_tag
def retrieved_entries(node, user):
    """The entries retrieved for ``node`` that ``user`` may see (visibility rules)."""
    return entries_visible(user=user).filter(pk__in=node.retrieved_knowledge or [])
