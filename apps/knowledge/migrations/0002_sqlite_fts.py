"""Full-text index for SQLite (FTS5, porter stemming) kept in sync by triggers.

PostgreSQL needs nothing here: the search selector builds weighted tsvectors at query time.
"""

from django.db import migrations

FTS_COLUMNS = "title, tags, families, body"
OLD = "old.id, old.title, old.tags, old.families, old.body"
NEW = "new.id, new.title, new.tags, new.families, new.body"

CREATE = [
    "CREATE VIRTUAL TABLE knowledge_entry_fts USING fts5("
    f"{FTS_COLUMNS}, content='knowledge_entry', content_rowid='id', "
    "tokenize='porter unicode61')",
    "CREATE TRIGGER knowledge_entry_fts_ai AFTER INSERT ON knowledge_entry BEGIN "
    f"INSERT INTO knowledge_entry_fts(rowid, {FTS_COLUMNS}) VALUES ({NEW}); END",
    "CREATE TRIGGER knowledge_entry_fts_ad AFTER DELETE ON knowledge_entry BEGIN "
    f"INSERT INTO knowledge_entry_fts(knowledge_entry_fts, rowid, {FTS_COLUMNS}) "
    f"VALUES ('delete', {OLD}); END",
    "CREATE TRIGGER knowledge_entry_fts_au AFTER UPDATE ON knowledge_entry BEGIN "
    f"INSERT INTO knowledge_entry_fts(knowledge_entry_fts, rowid, {FTS_COLUMNS}) "
    f"VALUES ('delete', {OLD}); "
    f"INSERT INTO knowledge_entry_fts(rowid, {FTS_COLUMNS}) VALUES ({NEW}); END",
    "INSERT INTO knowledge_entry_fts(knowledge_entry_fts) VALUES ('rebuild')",
]
DROP = [
    "DROP TRIGGER IF EXISTS knowledge_entry_fts_ai",
    "DROP TRIGGER IF EXISTS knowledge_entry_fts_ad",
    "DROP TRIGGER IF EXISTS knowledge_entry_fts_au",
    "DROP TABLE IF EXISTS knowledge_entry_fts",
]


def _run(statements):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor != "sqlite":
            return
        for sql in statements:
            schema_editor.execute(sql)

    return run


class Migration(migrations.Migration):
    dependencies = [("knowledge", "0001_initial")]

    operations = [migrations.RunPython(_run(CREATE), _run(DROP))]
