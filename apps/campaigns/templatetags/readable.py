"""Template filters that render raw values readably (see apps/campaigns/text.py)."""

from django import template

from apps.campaigns import text

register = template.Library()


@register.filter
def readable_numbers(value):
    """Long decimals in free text at 3 significant digits."""
    return text.numbers_readable(value)


@register.filter
def scope_text(value):
    """A region scope (dict) in words."""
    return text.scope_text(value)


@register.filter
def gpu_target(value):
    """A compile target (``["cuda", 90, 64]``) as ``sm_90``."""
    return text.gpu_target(value)
