"""GIN index over the weighted tsvector the PostgreSQL search builds (title A, tags and families
B, body D, English). Its expression must stay the one `selectors.search.entry_document()`
builds, or the planner cannot use it (tests/knowledge/selectors/test_search_index.py checks
that it does). SQLite needs nothing here: its FTS5 table is in 0002.
"""

from django.db import migrations

INDEX_NAME = "knowledge_entry_document_gin"


def _index():
    from django.contrib.postgres.indexes import GinIndex
    from django.contrib.postgres.search import SearchVector

    document = (
        SearchVector("title", weight="A", config="english")
        + SearchVector("tags", "families", weight="B", config="english")
        + SearchVector("body", weight="D", config="english")
    )
    return GinIndex(document, name=INDEX_NAME)


def create(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.add_index(apps.get_model("knowledge", "Entry"), _index())


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.remove_index(apps.get_model("knowledge", "Entry"), _index())


class Migration(migrations.Migration):
    dependencies = [("knowledge", "0002_sqlite_fts")]

    operations = [migrations.RunPython(create, drop)]
