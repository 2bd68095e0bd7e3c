"""In a real browser: author a campaign and watch it run to its outcome without reloading."""

import time

import pytest

from apps.campaigns.services.problems import catalog_sync
from tests.conftest import login, wait_for_js

pytestmark = [pytest.mark.browser, pytest.mark.services, pytest.mark.django_db(transaction=True)]


def test_author_and_watch_a_campaign_live(
    asgi_server, demo_users, control_worker, eval_worker, page, artifacts_dir
):
    catalog_sync()
    login(page, asgi_server, "engineer", demo_users["engineer"])
    page.goto(asgi_server + "/campaigns/new/")
    page.select_option("#id_problem", label="rms-norm")
    page.fill("#id_budget_candidates", "3")
    page.click("text=Start campaign")
    page.wait_for_url("**/campaigns/*/")
    # The websocket is open before anything is evaluated; no reload from here on.
    page.evaluate("window.__marker = 'same page'")
    page.wait_for_selector("#node-rows tr[id^=node-n]", timeout=120_000)
    page.wait_for_selector("#campaign-status.completed", timeout=300_000)
    assert page.evaluate("window.__marker") == "same page"
    # interpret times nothing: correct candidates read as such, not as "No safe improvement".
    assert page.inner_text("#campaign-outcome") == "Correctness established, not timed"
    rows = page.locator("#node-rows tr[id^=node-n]")
    assert rows.count() >= 1
    assert page.locator("#node-rows .badge.accepted").count() >= 1
    assert page.locator("#node-rows .badge.evaluating").count() == 0
    page.screenshot(path=str(artifacts_dir / "campaign-live-finished.png"), full_page=True)


def test_viewer_cannot_author_a_campaign(asgi_server, demo_users, page):
    login(page, asgi_server, "viewer", demo_users["viewer"])
    response = page.goto(asgi_server + "/campaigns/new/")
    assert response.status == 403
    assert "roles that have it: engineer, admin" in page.inner_text("main")


def _catch_up(request) -> bool:
    """The live section's htmx GET of the campaign page (not the page's own navigation)."""
    return request.method == "GET" and request.headers.get("hx-request") == "true"


def test_pause_resume_cancel_buttons(asgi_server, demo_users, page):
    from django.contrib.auth.models import User

    from apps.campaigns.services.campaigns import campaign_create

    problem = next(p for p in catalog_sync() if p.name == "silu")
    campaign = campaign_create(
        problem=problem, created_by=User.objects.get(username="engineer"), start=False
    )
    login(page, asgi_server, "viewer", demo_users["viewer"])
    page.goto(f"{asgi_server}/campaigns/{campaign.pk}/")
    assert not page.locator("#campaign-actions").is_visible(), "viewers get no controls"

    # The engineer in a browser context of their own (no cookie shared with the viewer's page).
    context = page.context.browser.new_context(viewport={"width": 1440, "height": 900})
    engineer_page = context.new_page()
    # Hold the page's catch-up fetch (sent when its websocket opens) until after the click, as
    # a slow server would: its stale answer must not put the old status back.
    held = []

    def hold_catch_up(route):
        if _catch_up(route.request) and not held:
            held.append((route, route.fetch()))
        else:
            route.continue_()

    try:
        login(engineer_page, asgi_server, "engineer", demo_users["engineer"])
        engineer_page.route(f"**/campaigns/{campaign.pk}/", hold_catch_up)
        engineer_page.goto(f"{asgi_server}/campaigns/{campaign.pk}/")
        wait_for_js(engineer_page, "window.htmx !== undefined")
        deadline = time.monotonic() + 30
        while not held and time.monotonic() < deadline:
            engineer_page.wait_for_timeout(50)
        assert held, "the page asks for a catch-up when its websocket opens"
        engineer_page.once("dialog", lambda dialog: dialog.accept())  # Cancel asks first
        engineer_page.click("#campaign-actions >> text=Cancel")
        engineer_page.wait_for_selector("#campaign-status.cancelled")
        route, stale = held[0]
        # Its stale answer is dropped and the catch-up asked for again.
        with engineer_page.expect_response(
            lambda r: _catch_up(r.request) and r.request != route.request, timeout=10_000
        ):
            route.fulfill(response=stale)
        engineer_page.wait_for_timeout(300)
        assert engineer_page.inner_text("#campaign-status") == "cancelled"
        reason = engineer_page.inner_text("#campaign-outcome-reason")
        assert "cancelled by engineer" in reason
        assert engineer_page.locator("#campaign-actions button").count() == 0
    finally:
        context.close()
