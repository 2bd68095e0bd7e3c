"""Run a coroutine to completion on a fresh thread with its own event loop.

Playwright's sync API keeps an event loop running on the main thread for the whole session, so
async tests (websocket consumers) run their body on a thread of their own instead.
"""

import asyncio
from concurrent.futures import ThreadPoolExecutor


def run_async(coro):
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()
