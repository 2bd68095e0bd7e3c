"""History is append-only: the ORM and the database refuse to change or remove events."""

import pytest
from django.db import IntegrityError, InternalError, OperationalError, connection, transaction

from apps.registry.models import AppendOnly, Event
from apps.registry.services import artifact_create


@pytest.mark.django_db
def test_events_cannot_be_updated_or_deleted(node, users):
    artifact_create(node=node, by=users["reviewer"])
    event = Event.objects.get()
    event.reason = "rewritten"
    with pytest.raises(AppendOnly):
        event.save()
    with pytest.raises(AppendOnly):
        event.delete()
    with pytest.raises(AppendOnly):
        Event.objects.filter(pk=event.pk).update(reason="rewritten")
    with pytest.raises(AppendOnly):
        Event.objects.all().delete()
    with pytest.raises((IntegrityError, OperationalError, InternalError), match="append-only"):
        with transaction.atomic(), connection.cursor() as cur:
            cur.execute("UPDATE registry_event SET reason = 'x' WHERE id = %s", [event.pk])
    assert Event.objects.get(pk=event.pk).reason.startswith("frozen from")
