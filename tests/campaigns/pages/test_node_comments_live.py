"""A comment written elsewhere appears on an open candidate page without a reload."""

import pytest
from django.contrib.auth.models import User

from apps.campaigns.services.comments import comment_create
from tests.campaigns.support.builders import build_campaign
from tests.conftest import login
from tests.support.asyncio_thread import off_loop

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_comment_from_another_reader_appears_live(asgi_server, demo_users, page):
    engineer = User.objects.get(username="engineer")
    campaign = build_campaign(nodes=3, user=engineer)
    node = campaign.nodes.get(key="n1")

    login(page, asgi_server, "reviewer", demo_users["reviewer"])
    page.goto(f"{asgi_server}/campaigns/{campaign.pk}/nodes/n1/")
    page.evaluate("window.__marker = 'no reload'")
    page.wait_for_timeout(800)  # the websocket is open

    off_loop(comment_create, node=node, author=engineer, body="tail case looks off, @reviewer")
    page.wait_for_selector("#comment-list:has-text('tail case looks off')", timeout=15_000)
    assert page.evaluate("window.__marker") == "no reload"
