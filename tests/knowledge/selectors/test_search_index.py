"""On PostgreSQL the search's match can use the GIN index of migration 0003 (its expression is
the selector's), so search stays an index lookup as the knowledge base grows."""

import pytest
from django.contrib.postgres.search import SearchQuery
from django.db import connection

from apps.knowledge.models import Entry
from apps.knowledge.selectors.search import entry_document

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="a PostgreSQL index"),
]


def test_the_search_match_uses_the_gin_index():
    query = SearchQuery("swizzle", search_type="plain", config="english")
    qs = Entry.objects.annotate(document=entry_document()).filter(document=query)
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")  # a few rows: make the planner choose
        plan = qs.explain()
    assert "knowledge_entry_document_gin" in plan, plan
