"""Work that must not run on the thread where Playwright keeps its event loop.

Playwright's sync API keeps an event loop running on the main thread for the whole session, so
async tests (websocket consumers) and services that send live events (through async_to_sync,
which refuses to run on a thread with a running loop) run on a thread of their own.
"""

import asyncio
from concurrent.futures import ThreadPoolExecutor

from django.db import connection


def run_async(coro):
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()


def off_loop(fn, *args, **kwargs):
    """Call ``fn`` on a thread of its own (closing that thread's database connection after)."""

    def run():
        try:
            return fn(*args, **kwargs)
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(run).result()
