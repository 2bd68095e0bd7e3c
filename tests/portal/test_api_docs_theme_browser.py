"""In a real browser: the API docs page (Swagger UI, served from static/) follows the portal's
theme: the system's light or dark, the theme picked on another page (kept in localStorage), and
the toggle at runtime, both ways, without a reload. In dark it stayed white (issue 12)."""

import time

import pytest

from tests.conftest import login
from tests.support.contrast import contrast, luminance

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# The page's background and, per kind of text a reader needs, its colour and content.
COLOURS = """() => {
  const bg = getComputedStyle(document.body).backgroundColor;
  const ui = getComputedStyle(document.querySelector('.swagger-ui')).backgroundColor;
  const text = sel => Array.from(document.querySelectorAll(sel)).slice(0, 5)
    .map(e => [sel, e.textContent.trim().slice(0, 40), getComputedStyle(e).color]);
  return {
    bg, ui,
    texts: [].concat(text('.swagger-ui .info .title'), text('.swagger-ui .info p'),
                     text('.swagger-ui .opblock-tag'), text('.swagger-ui .opblock-summary-path'),
                     text('.swagger-ui .opblock-summary-description'), text('.docs-bar .brand')),
  };
}"""


def _assert_theme(page, theme: str) -> None:
    """The page in `theme`, all its text readable (within 2 s: Swagger UI eases colours)."""
    deadline = time.monotonic() + 2
    while True:
        try:
            _check_theme(page.evaluate(COLOURS), theme)
            return
        except AssertionError:
            if time.monotonic() > deadline:
                raise
        page.wait_for_timeout(50)


def _check_theme(colours: dict, theme: str) -> None:
    # The Swagger UI box is transparent or the page's colour: what shows is the page's.
    background = colours["ui"] if not colours["ui"].endswith(", 0)") else colours["bg"]
    if theme == "dark":
        assert luminance(colours["bg"]) < 0.05 and luminance(background) < 0.05, colours
    else:
        assert luminance(colours["bg"]) > 0.8 and luminance(background) > 0.8, colours
    kinds = {sel for sel, _, _ in colours["texts"]}
    assert {".swagger-ui .info .title", ".swagger-ui .opblock-tag"} <= kinds, colours
    unreadable = [t for t in colours["texts"] if t[1] and contrast(t[2], background) < 4.5]
    assert not unreadable, (theme, background, unreadable)


def _open_docs(page, base_url: str) -> None:
    page.goto(base_url + "/api/docs/")
    page.wait_for_selector(".swagger-ui .opblock-tag", timeout=30_000)


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_api_docs_follow_the_system_theme(asgi_server, demo_users, browser, artifacts_dir, scheme):
    context = browser.new_context(viewport={"width": 1440, "height": 900}, color_scheme=scheme)
    page = context.new_page()
    try:
        login(page, asgi_server, "viewer", demo_users["viewer"])
        _open_docs(page, asgi_server)
        _assert_theme(page, scheme)
        page.screenshot(path=str(artifacts_dir / f"api-docs-{scheme}.png"), full_page=True)
    finally:
        context.close()


def test_api_docs_follow_the_portal_toggle(asgi_server, demo_users, browser, artifacts_dir):
    context = browser.new_context(viewport={"width": 1440, "height": 900}, color_scheme="light")
    page = context.new_page()
    try:
        login(page, asgi_server, "viewer", demo_users["viewer"])
        # Dark picked on a portal page carries over to the docs (a light system).
        page.click("[data-theme-toggle]")
        page.click("header.topbar a:text('API')")
        page.wait_for_selector(".swagger-ui .opblock-tag", timeout=30_000)
        _assert_theme(page, "dark")
        # The docs page's own toggle re-themes it at once, both ways, without a reload.
        page.evaluate("window.__marker = 'no reload'")
        page.click("[data-theme-toggle]")
        _assert_theme(page, "light")
        page.screenshot(path=str(artifacts_dir / "api-docs-toggled-light.png"), full_page=True)
        page.click("[data-theme-toggle]")
        _assert_theme(page, "dark")
        assert page.evaluate("window.__marker") == "no reload"
        page.click(".swagger-ui .opblock-summary")  # an expanded operation reads too
        page.wait_for_selector(".swagger-ui .opblock-body")
        page.screenshot(path=str(artifacts_dir / "api-docs-toggled-dark.png"), full_page=True)
    finally:
        context.close()
