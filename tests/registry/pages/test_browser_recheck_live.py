"""In a real browser: a reviewer asks for the correctness re-run a new serving toolchain needs
and watches its result arrive on the artifact page, without a reload."""

import pytest
from django.contrib.auth.models import User

from apps.registry.services import artifact_create
from tests.conftest import login
from tests.registry import helpers
from tests.support.asyncio_thread import off_loop

pytestmark = [pytest.mark.browser, pytest.mark.services, pytest.mark.django_db(transaction=True)]


def test_rerun_result_appears_live(asgi_server, demo_users, control_worker, eval_worker, page):
    author = User.objects.get(username="engineer")
    reviewer = User.objects.get(username="reviewer")
    artifact = off_loop(artifact_create, node=helpers.accepted_node(author), by=reviewer)
    off_loop(helpers.report, fingerprint={**artifact.body["toolchain"], "triton": "0.0-other"})
    login(page, asgi_server, "reviewer", demo_users["reviewer"])
    page.goto(f"{asgi_server}/registry/artifacts/{artifact.pk}/")
    gate = page.locator("[data-gate=toolchain]")
    assert "triton" in gate.inner_text() and "inconclusive" in gate.inner_text()
    page.evaluate("window.__marker = 'same page'")
    page.click("text=Re-run correctness")
    page.wait_for_selector("text=re-run sent to eval.interpret")
    page.evaluate("window.__marker = 'after the click'")
    # The worker's report reaches the control side; the page follows over its websocket.
    page.wait_for_selector("[data-gate=toolchain] .badge.pass", timeout=180_000)
    assert page.evaluate("window.__marker") == "after the click", "no reload"
    assert "passed again on torch" in page.inner_text("[data-gate=toolchain]")
