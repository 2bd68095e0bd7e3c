"""The operator page follows the registry live: a rollback done elsewhere (API, command, another
reviewer) shows up in an open page without a reload."""

import pytest
from django.contrib.auth.models import User

from apps.registry.services import artifact_create, region_rollback
from tests.conftest import login
from tests.registry import helpers
from tests.support.asyncio_thread import off_loop

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_rollback_elsewhere_updates_an_open_operator_page(asgi_server, demo_users, page):
    author = User.objects.get(username="engineer")
    admin = User.objects.get(username="admin")
    first = off_loop(artifact_create, node=helpers.accepted_node(author), by=admin)
    first = off_loop(helpers.advance, first, admin, "default")
    second = off_loop(artifact_create, node=helpers.accepted_node(author), by=admin)
    second = off_loop(helpers.advance, second, admin, "default")
    region = second.region

    login(page, asgi_server, "viewer", demo_users["viewer"])
    page.goto(f"{asgi_server}/registry/{region.operator}/")
    page.evaluate("window.__marker = 'no reload'")
    assert f"#{second.pk}" in page.locator(f"#stage-default-{region.pk}").inner_text()
    page.wait_for_timeout(500)  # the websocket is open

    off_loop(region_rollback, region=region, by=admin, reason="canary p99 alarm in prod")
    page.wait_for_selector(f"#stage-default-{region.pk}:has-text('#{first.pk}')", timeout=15_000)
    top = page.locator(f"#history-{region.pk} li").first
    assert "canary p99 alarm in prod" in top.inner_text() and "admin" in top.inner_text()
    assert page.evaluate("window.__marker") == "no reload"
