"""In a real browser: after a reviewer approves an artifact's next promotion, the page says they
approved it instead of offering "Approve for …" again (a second click was refused)."""

import pytest
from django.contrib.auth.models import User

from apps.registry.models import Approval
from apps.registry.services import artifact_create
from tests.conftest import login
from tests.registry import helpers
from tests.support.asyncio_thread import off_loop

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_approve_button_gives_way_once_approved(asgi_server, demo_users, page):
    author = User.objects.get(username="engineer")
    admin = User.objects.get(username="admin")
    artifact = off_loop(artifact_create, node=helpers.accepted_node(author), by=admin)
    login(page, asgi_server, "reviewer", demo_users["reviewer"])
    page.goto(f"{asgi_server}/registry/artifacts/{artifact.pk}/")
    target = page.inner_text("#approve").removeprefix("Approve for ")
    page.click("#approve")
    page.wait_for_selector("text=Approved.")
    assert Approval.objects.filter(artifact=artifact, user__username="reviewer").count() == 1
    assert page.locator("#approve").count() == 0
    assert f"You approved this for {target}" in page.inner_text("#approved-by-you")
    assert page.locator("#promote").count() == 1, "promoting is still offered"
