"""The flush between tests survives a worker's transaction that deadlocks with it (PostgreSQL
aborts the TRUNCATE; the next test must still start on an empty database)."""

import threading

import pytest
from django.core.management.color import no_style
from django.db import DatabaseError, connection, connections
from django.test.testcases import TransactionTestCase

from apps.campaigns.models import Problem


@pytest.mark.django_db(transaction=True)
def test_a_flush_chosen_as_deadlock_victim_is_retried_until_it_empties_the_tables():
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL's TRUNCATE locks")
    Problem.objects.create(name="left-behind", source="x = 1\n")
    tables = connection.introspection.django_table_names(only_existing=True, include_views=False)
    truncate = connection.ops.sql_flush(no_style(), tables, allow_cascade=False)[0]
    order = truncate.split('"')[1::2]
    first, last = order[0], order[-1]
    # Another process (a worker) reads the last table TRUNCATE locks, then the first.
    holding = threading.Event()
    seen = {}

    def worker():
        other = connections.create_connection("default")
        other.set_autocommit(False)
        with other.cursor() as cursor:
            cursor.execute(f'SELECT count(*) FROM "{last}"')
            holding.set()
            cursor.execute("SELECT pg_sleep(0.5)")
            try:
                cursor.execute(f'SELECT count(*) FROM "{first}"')
                seen["worker"] = "finished"
            except DatabaseError as exc:
                seen["worker"] = str(exc)
            finally:
                other.rollback()
                other.close()

    thread = threading.Thread(target=worker)
    thread.start()
    holding.wait(10)
    case = TransactionTestCase()
    case.databases = {"default"}
    case._fixture_teardown()
    thread.join(30)
    assert "worker" in seen, "the worker's transaction ended"
    assert not Problem.objects.exists()
