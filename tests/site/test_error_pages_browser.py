"""The pages a user meets outside the main ones, in a real browser and in both themes: the
login page, a refusal (403) and a page that does not exist (404) are the portal's own, follow
the reader's colour scheme, and say what happened. Screenshots of each land in
test-artifacts/ (issue 12: every page in light and dark)."""

import pytest

from tests.conftest import login

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

BACKGROUND = "getComputedStyle(document.body).backgroundColor"


def _dark(rgb: str) -> bool:
    r, g, b = (int(x) for x in rgb[rgb.index("(") + 1 : rgb.index(")")].split(",")[:3])
    return (r + g + b) / 3 < 100


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_login_refusal_and_not_found_pages_in_each_theme(
    asgi_server, demo_users, browser, artifacts_dir, scheme
):
    context = browser.new_context(viewport={"width": 1280, "height": 800}, color_scheme=scheme)
    page = context.new_page()
    try:
        page.goto(asgi_server + "/accounts/login/")
        assert page.locator("#id_username").is_visible()
        assert _dark(page.evaluate(BACKGROUND)) == (scheme == "dark")
        page.screenshot(path=str(artifacts_dir / f"page-login-{scheme}.png"), full_page=True)

        login(page, asgi_server, "viewer", demo_users["viewer"])
        refused = page.goto(asgi_server + "/knowledge/curation/")
        assert refused.status == 403
        assert page.locator("header.topbar").is_visible()  # the portal's page, not a bare one
        assert "not allowed" in page.inner_text("main").lower()
        assert _dark(page.evaluate(BACKGROUND)) == (scheme == "dark")
        page.screenshot(path=str(artifacts_dir / f"page-403-{scheme}.png"), full_page=True)

        missing = page.goto(asgi_server + "/campaigns/999999/")
        assert missing.status == 404
        assert page.locator("header.topbar").is_visible()
        assert "not found" in page.inner_text("main").lower()
        assert _dark(page.evaluate(BACKGROUND)) == (scheme == "dark")
        page.screenshot(path=str(artifacts_dir / f"page-404-{scheme}.png"), full_page=True)
    finally:
        context.close()
