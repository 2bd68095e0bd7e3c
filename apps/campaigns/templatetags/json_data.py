"""``json_data``: Django's ``json_script`` with the same output, escaped by three ``replace``
calls instead of ``str.translate`` (issue 12: the insight page's 537 kB of chart data spent
~60 ms in ``json_script``; this takes ~6 ms)."""

import json

from django import template
from django.core.serializers.json import DjangoJSONEncoder
from django.utils.html import escape
from django.utils.safestring import mark_safe

register = template.Library()


@register.filter
def json_data(value, element_id):
    """``<script id="element_id" type="application/json">…</script>``, byte for byte what
    ``json_script`` writes: ``<``, ``>`` and ``&`` as ``\\u003C``, ``\\u003E``, ``\\u0026``."""
    text = json.dumps(value, cls=DjangoJSONEncoder)
    text = text.replace(">", "\\u003E").replace("<", "\\u003C").replace("&", "\\u0026")
    return mark_safe(f'<script id="{escape(element_id)}" type="application/json">{text}</script>')
