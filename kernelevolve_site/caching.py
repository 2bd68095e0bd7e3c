"""Results that are pure functions of their input, kept in Django's cache (Redis: shared by every
web process) under a key derived from that input, so no write ever has to invalidate them.

Only for content-addressed values: the key must change whenever the value would. A cache that
cannot be reached costs the computation, never the page.
"""

import hashlib
import logging
from collections.abc import Callable
from typing import TypeVar

from django.core.cache import cache

logger = logging.getLogger(__name__)
T = TypeVar("T")


def content_key(namespace: str, *parts: str) -> str:
    """A cache key for `parts` (hashed, so any text fits memcached/Redis key rules)."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode())
        digest.update(b"\0")
    return f"{namespace}:{digest.hexdigest()}"


def cached(key: str, compute: Callable[[], T], *, timeout: int) -> T:
    """`compute()`'s value from the cache, computed and stored on a miss."""
    try:
        value = cache.get(key)
    except Exception:  # noqa: BLE001 - the cache being down must not break a page
        logger.warning("cache unavailable, computing %s", key.split(":", 1)[0], exc_info=True)
        return compute()
    if value is not None:
        return value
    value = compute()
    try:
        cache.set(key, value, timeout)
    except Exception:  # noqa: BLE001
        logger.warning("cache unavailable, not storing %s", key.split(":", 1)[0], exc_info=True)
    return value
