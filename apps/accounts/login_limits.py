"""Login limits: failed logins are counted in Django's cache (shared by every web process) per
username + client address and per client address, in fixed windows of LOGIN_WINDOW_S.

Past a limit, the login page and `POST /api/auth/token/` refuse until the window ends (429 with
Retry-After), even with the right password. A lock-out never outlives its window, and it is tied
to the address that failed: someone elsewhere cannot lock a user out of their own address.
"""

import hashlib
import logging
import time

from django.core.cache import cache
from rest_framework.throttling import BaseThrottle

from apps.accounts.constants import (
    LOGIN_FAILURES_PER_ADDRESS,
    LOGIN_FAILURES_PER_USER_AND_ADDRESS,
    LOGIN_WINDOW_S,
)

logger = logging.getLogger(__name__)


def client_address(request) -> str:
    """The client's address, trusting X-Forwarded-For only from REST_FRAMEWORK's NUM_PROXIES."""
    return BaseThrottle().get_ident(request)


def _keys(username: str, address: str, window: int) -> dict[str, int]:
    who = hashlib.sha256(f"{username.strip().lower()}\0{address}".encode()).hexdigest()[:32]
    return {
        f"login-fail:ua:{who}:{window}": LOGIN_FAILURES_PER_USER_AND_ADDRESS,
        f"login-fail:a:{address}:{window}": LOGIN_FAILURES_PER_ADDRESS,
    }


def login_wait_seconds(*, username: str, address: str, now: float | None = None) -> int:
    """Seconds until this username may try to log in from this address again (0: now)."""
    now = time.time() if now is None else now
    window = int(now // LOGIN_WINDOW_S)
    keys = _keys(username, address, window)
    try:
        counts = cache.get_many(list(keys))
    except Exception:  # noqa: BLE001 - the cache being down must not stop every login
        logger.exception("login limits: cache unavailable, not limiting")
        return 0
    if any(counts.get(key, 0) >= limit for key, limit in keys.items()):
        return max(1, int((window + 1) * LOGIN_WINDOW_S - now))
    return 0


def login_failure_record(*, username: str, address: str, now: float | None = None) -> None:
    """Count one failed login of this username from this address."""
    now = time.time() if now is None else now
    window = int(now // LOGIN_WINDOW_S)
    for key in _keys(username, address, window):
        try:
            # add() then incr(): atomic on Redis; the key expires with its window.
            cache.add(key, 0, timeout=LOGIN_WINDOW_S + 5)
            cache.incr(key)
        except ValueError:  # expired between add and incr
            cache.add(key, 1, timeout=LOGIN_WINDOW_S + 5)
        except Exception:  # noqa: BLE001 - see login_wait_seconds
            logger.exception("login limits: cache unavailable, failure not counted")


def too_many_message(wait: int) -> str:
    minutes, seconds = divmod(wait, 60)
    when = f"{minutes} min {seconds} s" if minutes else f"{seconds} s"
    return f"Too many failed sign-ins from this address. Try again in {when}."


class LoginThrottle(BaseThrottle):
    """DRF throttle for the token endpoint: refuses while login_wait_seconds says wait."""

    def allow_request(self, request, view) -> bool:
        username = request.data.get("username", "") if hasattr(request.data, "get") else ""
        self._wait = login_wait_seconds(username=str(username), address=self.get_ident(request))
        return not self._wait

    def wait(self) -> float | None:
        return self._wait or None
