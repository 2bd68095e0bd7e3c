"""The campaign list follows status changes over the websocket, keeping the user's filters."""

import pytest
from django.contrib.auth.models import User

from apps.campaigns.services.campaigns import campaign_cancel, campaign_create
from apps.campaigns.services.problems import catalog_sync
from tests.conftest import login
from tests.support.asyncio_thread import off_loop

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_status_change_appears_in_an_open_filtered_list(asgi_server, demo_users, page):
    problems = {p.name: p for p in catalog_sync()}
    author = User.objects.get(username="engineer")
    watched = campaign_create(problem=problems["silu"], created_by=author, start=False)
    campaign_create(problem=problems["gelu"], created_by=author, start=False)

    login(page, asgi_server, "viewer", demo_users["viewer"])
    page.goto(f"{asgi_server}/campaigns/?problem=silu")
    page.evaluate("window.__marker = 'no reload'")
    rows = page.locator("#campaign-table tbody tr")
    assert rows.count() == 1 and "queued" in rows.first.inner_text()
    page.wait_for_timeout(800)  # the websocket is open

    off_loop(campaign_cancel, campaign=watched, by=author)
    page.wait_for_selector("#campaign-table tbody tr:has-text('cancelled')", timeout=15_000)
    assert page.locator("#campaign-table tbody tr").count() == 1, "the filter is kept"
    assert page.evaluate("window.__marker") == "no reload"
