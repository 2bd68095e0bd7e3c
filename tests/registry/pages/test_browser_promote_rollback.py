"""In a real browser: a reviewer freezes, approves and promotes a candidate to default, then
rolls the region back with the confirmation and a reason (a dismissed confirmation changes
nothing)."""

import pytest
from django.contrib.auth.models import User

from apps.registry.models import Artifact, Region
from apps.registry.services import artifact_create
from tests.conftest import login
from tests.registry import helpers
from tests.support.asyncio_thread import off_loop

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _approve_and_promote(page, expect_stage):
    page.fill("form:has(#approve) input[name=reason]", "looks right")
    page.click("#approve")
    page.wait_for_selector("text=Approved.")
    page.click("#promote")
    page.wait_for_selector(f"#artifact-stage:text('{expect_stage}')")


def test_promote_to_default_then_roll_back(asgi_server, demo_users, page, artifacts_dir):
    author = User.objects.get(username="engineer")
    node = helpers.accepted_node(author)
    login(page, asgi_server, "reviewer", demo_users["reviewer"])
    page.goto(asgi_server + "/registry/")
    page.click(f"[data-freeze='{node.pk}']")
    page.wait_for_selector("text=Frozen and signed")
    artifact = Artifact.objects.get(node=node)
    region = Region.objects.get(pk=artifact.region_id)
    region.shadow_min_samples = region.canary_min_samples = 4
    region.save()
    assert page.locator("[data-gate=signature] .badge").inner_text() == "pass"

    _approve_and_promote(page, "shadow")
    off_loop(helpers.feed_shadow, artifact, 4)
    page.reload()
    assert page.locator("[data-gate=shadow] .badge").inner_text() == "pass"
    _approve_and_promote(page, "canary")
    off_loop(helpers.feed_calls, Artifact.objects.get(pk=artifact.pk), "canary", 4, 1.0)
    off_loop(helpers.complete_model_check, Artifact.objects.get(pk=artifact.pk))
    page.reload()
    assert page.locator("[data-gate=model] .badge").inner_text() == "pass"
    assert "outputs agree" in page.locator("#model-check-reason").inner_text()
    _approve_and_promote(page, "default")
    page.screenshot(path=str(artifacts_dir / "registry-artifact-default.png"), full_page=True)

    # A second artifact replaces it as default; then the reviewer rolls back in the page.
    admin = User.objects.get(username="admin")
    second = off_loop(artifact_create, node=helpers.accepted_node(author), by=admin)
    second = off_loop(helpers.advance, second, admin, "default")
    page.goto(asgi_server + "/registry/softmax/")
    default_cell = page.locator(f"#stage-default-{region.pk}")
    assert f"#{second.pk}" in default_cell.inner_text()
    form = page.locator(f"#rollback-{region.pk}")
    form.locator("input[name=reason]").fill("p99 regression in prod")
    page.once("dialog", lambda dialog: dialog.dismiss())
    form.locator("button").click()
    page.wait_for_timeout(300)
    assert Region.objects.get(pk=region.pk).default_artifact_id == second.pk
    messages = []
    page.once("dialog", lambda dialog: (messages.append(dialog.message), dialog.accept()))
    form.locator("button").click()
    page.wait_for_selector("text=Rolled back: default is now")
    assert "Roll back the default of softmax" in messages[0]
    assert Region.objects.get(pk=region.pk).default_artifact_id == artifact.pk
    assert f"#{artifact.pk}" in page.locator(f"#stage-default-{region.pk}").inner_text()
    top = page.locator(f"#history-{region.pk} li").first
    assert "Rolled back" in top.inner_text() and "reviewer" in top.inner_text()
    assert "p99 regression in prod" in top.inner_text()
    page.screenshot(path=str(artifacts_dir / "registry-operator-rolled-back.png"), full_page=True)
