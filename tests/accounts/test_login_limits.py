"""Login limits on the login page and POST /api/auth/token/: ten failures per username and
address in a 5-minute window, then 429 with Retry-After, even with the right password; the
window's end lifts it; another address is not locked out."""

import pytest
from django.core.cache import cache
from rest_framework.test import APIClient

from apps.accounts import login_limits
from apps.accounts.constants import LOGIN_WINDOW_S
from apps.accounts.services import user_upsert

pytestmark = pytest.mark.django_db
PASSWORD = "right-pw-1"


@pytest.fixture
def user(db):
    return user_upsert(username="limited", password=PASSWORD, roles=["viewer"])


@pytest.fixture
def clock(monkeypatch):
    """The limiter's clock, at the start of a window; `clock.advance(s)` moves it."""
    # The test settings' cache is this process's memory; clearing Redis would flush the broker.
    assert isinstance(cache._cache, dict)
    cache.clear()

    class Clock:
        now = 1_000 * LOGIN_WINDOW_S

        def advance(self, seconds: float) -> None:
            self.now += seconds

    clock = Clock()
    monkeypatch.setattr(login_limits.time, "time", lambda: clock.now)
    return clock


def _page_login(client, password, address="10.0.0.1"):
    return client.post(
        "/accounts/login/", {"username": "limited", "password": password}, REMOTE_ADDR=address
    )


def _token(api, password, address="10.0.0.1"):
    return api.post(
        "/api/auth/token/",
        {"username": "limited", "password": password},
        format="json",
        REMOTE_ADDR=address,
    )


def test_login_page_refuses_after_ten_failures_until_the_window_ends(client, user, clock):
    for _ in range(10):
        assert _page_login(client, "wrong").status_code == 200
    refused = _page_login(client, "wrong")
    assert refused.status_code == 429
    refused = _page_login(client, PASSWORD)
    assert refused.status_code == 429
    assert "Too many failed sign-ins from this address. Try again in 5 min" in (
        refused.content.decode()
    )
    assert 0 < int(refused["Retry-After"]) <= LOGIN_WINDOW_S
    # Someone else (another address) is not locked out by these failures.
    assert _page_login(client, PASSWORD, address="10.0.0.2").status_code == 302
    client.logout()

    clock.advance(LOGIN_WINDOW_S)
    assert _page_login(client, PASSWORD).status_code == 302


def test_token_api_refuses_after_ten_failures_until_the_window_ends(user, clock):
    api = APIClient()
    for _ in range(11):
        assert _token(api, "wrong").status_code in (400, 429)
    refused = _token(api, PASSWORD)
    assert refused.status_code == 429
    assert refused.json()["detail"].startswith("Too many failed sign-ins from this address.")
    assert 0 < int(refused["Retry-After"]) <= LOGIN_WINDOW_S

    clock.advance(LOGIN_WINDOW_S - 1)
    assert _token(api, PASSWORD).status_code == 429
    assert int(_token(api, PASSWORD)["Retry-After"]) == 1
    clock.advance(1)
    assert _token(api, PASSWORD).status_code == 200


def test_one_address_has_an_overall_cap_across_usernames(user, clock):
    api = APIClient()
    for i in range(50):
        api.post("/api/auth/token/", {"username": f"u{i}", "password": "x"}, REMOTE_ADDR="10.9.9.9")
    assert _token(api, PASSWORD, address="10.9.9.9").status_code == 429
    assert _token(api, PASSWORD, address="10.0.0.1").status_code == 200


def test_a_forged_forwarded_for_does_not_dodge_the_limit(user, clock):
    api = APIClient()
    for i in range(11):
        api.post(
            "/api/auth/token/",
            {"username": "limited", "password": "wrong"},
            format="json",
            REMOTE_ADDR="10.0.0.1",
            HTTP_X_FORWARDED_FOR=f"192.0.2.{i}",
        )
    assert _token(api, PASSWORD).status_code == 429
