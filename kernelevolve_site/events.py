"""Live events: services call `send_event_on_commit`; consumers forward to the browser.

One group per subject (`campaign-<id>`), one event type per kind of change. The payload carries
the rendered partial (with the element id the page already has) so htmx swaps it in place.
"""

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction


def send_event(group: str, event_type: str, *, html: str = "", data: dict | None = None) -> None:
    """Send one event to a group now (outside a transaction, e.g. from a worker)."""
    layer = get_channel_layer()
    async_to_sync(layer.group_send)(group, {"type": event_type, "html": html, "data": data or {}})


def send_event_on_commit(
    group: str, event_type: str, *, html: str = "", data: dict | None = None
) -> None:
    """Send one event after the current transaction commits (never for rolled-back work)."""
    transaction.on_commit(lambda: send_event(group, event_type, html=html, data=data))
