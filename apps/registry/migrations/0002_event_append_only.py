"""Append-only history in the database itself: a trigger refuses UPDATE on registry events.

SQLite gets an UPDATE trigger only (Django's test flush empties tables with DELETE); PostgreSQL
refuses UPDATE and DELETE (its flush uses TRUNCATE, which row triggers do not see). The ORM
refuses both everywhere (models.Event).
"""

from django.db import migrations

SQLITE = [
    """CREATE TRIGGER registry_event_no_update BEFORE UPDATE ON registry_event
    BEGIN SELECT RAISE(ABORT, 'registry events are append-only'); END;""",
]
SQLITE_REVERSE = ["DROP TRIGGER IF EXISTS registry_event_no_update;"]

POSTGRES = [
    """CREATE OR REPLACE FUNCTION registry_event_append_only() RETURNS trigger AS $$
    BEGIN RAISE EXCEPTION 'registry events are append-only' USING ERRCODE = 'restrict_violation';
    END; $$ LANGUAGE plpgsql;""",
    """CREATE TRIGGER registry_event_no_change BEFORE UPDATE OR DELETE ON registry_event
    FOR EACH ROW EXECUTE FUNCTION registry_event_append_only();""",
]
POSTGRES_REVERSE = [
    "DROP TRIGGER IF EXISTS registry_event_no_change ON registry_event;",
    "DROP FUNCTION IF EXISTS registry_event_append_only();",
]


def forwards(apps, schema_editor):
    statements = {"sqlite": SQLITE, "postgresql": POSTGRES}.get(schema_editor.connection.vendor)
    for sql in statements or []:
        schema_editor.execute(sql)


def backwards(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    statements = {"sqlite": SQLITE_REVERSE, "postgresql": POSTGRES_REVERSE}.get(vendor)
    for sql in statements or []:
        schema_editor.execute(sql)


class Migration(migrations.Migration):
    dependencies = [("registry", "0001_initial")]
    operations = [migrations.RunPython(forwards, backwards)]
