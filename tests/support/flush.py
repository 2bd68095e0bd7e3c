"""A database flush between tests that outlasts the processes still working on the last one.

Browser and process tests leave real workers and the ASGI server busy with what the test
started (a campaign's next step, a page's poll). On PostgreSQL the teardown's TRUNCATE can then
deadlock with one of their transactions, and PostgreSQL aborts the TRUNCATE: the next test
would start on the previous one's rows. The flush is retried until it wins (the other
transaction is the one that finishes or fails, which the workers already survive)."""

import time

ATTEMPTS = 6


def _is_deadlock(exc: BaseException) -> bool:
    from django.db import OperationalError

    while exc is not None:
        if isinstance(exc, OperationalError) and "deadlock detected" in str(exc):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def retry_flush_on_deadlock() -> None:
    from django.core.management.base import CommandError
    from django.test.testcases import TransactionTestCase

    flush = TransactionTestCase._fixture_teardown
    if getattr(flush, "retries_deadlocks", False):
        return

    def fixture_teardown(self):
        for attempt in range(ATTEMPTS):
            try:
                return flush(self)
            except CommandError as exc:
                if attempt == ATTEMPTS - 1 or not _is_deadlock(exc):
                    raise
                time.sleep(0.2 * (attempt + 1))

    fixture_teardown.retries_deadlocks = True
    TransactionTestCase._fixture_teardown = fixture_teardown
