"""In a real browser: sign in and see the navigation, in light and dark."""

import pytest

from tests.conftest import login


@pytest.mark.browser
def test_login_and_navigation_in_chromium(asgi_server, demo_users, page, artifacts_dir):
    page.goto(asgi_server + "/campaigns/")
    assert "/accounts/login/" in page.url
    login(page, asgi_server, "engineer", demo_users["engineer"])
    nav = page.locator("nav[aria-label=Main] a")
    assert nav.all_inner_texts() == ["Campaigns", "Suites", "Registry", "Knowledge", "Inbox"]
    page.click("text=Knowledge")
    page.wait_for_url("**/knowledge/")
    assert page.locator("nav a[aria-current=page]").inner_text() == "Knowledge"
    # htmx and Plotly come from static/, not a CDN.
    assert page.evaluate("typeof htmx") == "object"
    page.click("[data-theme-toggle]")
    page.screenshot(path=str(artifacts_dir / "login-navigation-toggled-theme.png"))
    page.click("text=Log out")
    page.wait_for_url("**/accounts/login/")
