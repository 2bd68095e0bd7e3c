"""In a real browser: search the knowledge base, edit an entry with a live preview, read its
history with the diff, and revert."""

import pytest

from tests.conftest import login, wait_for_js

pytestmark = [pytest.mark.browser, pytest.mark.services, pytest.mark.django_db(transaction=True)]


def test_search_edit_history_revert(asgi_server, demo_users, page, artifacts_dir):
    from apps.knowledge.services.imports import knowledge_starter_load

    knowledge_starter_load()
    login(page, asgi_server, "curator", demo_users["curator"])
    page.goto(asgi_server + "/knowledge/")
    page.evaluate("window.__marker = 'same page'")
    page.fill("#id_q", "bandwidth floor")
    wait_for_js(page, "document.querySelectorAll('#kb-results tr[id^=entry-]').length === 1")
    assert page.evaluate("window.__marker") == "same page", "results swapped in place"
    assert "q=bandwidth" in page.url
    page.screenshot(path=str(artifacts_dir / "knowledge-search.png"), full_page=True)
    page.click("#kb-results >> text=H200 copy bandwidth is 4.16 TB/s")
    assert "NVIDIA H200" in page.inner_text("#entry-provenance")
    page.screenshot(path=str(artifacts_dir / "knowledge-entry.png"), full_page=True)

    page.click("text=Edit")
    page.fill("#id_body", "Measured **4.16 TB/s** on H200.\n\n- copy 1 GiB")
    page.wait_for_selector("#preview strong:has-text('4.16 TB/s')")
    assert page.locator("#preview li").inner_text() == "copy 1 GiB"
    page.screenshot(path=str(artifacts_dir / "knowledge-edit.png"), full_page=True)
    page.fill("#id_reason", "shorter")
    page.click("#entry-form button[type=submit]")
    page.wait_for_selector("text=Saved as version 2.")
    assert page.inner_text("#entry-body").startswith("Measured 4.16 TB/s")

    page.click("text=History")
    row = page.locator("#version-2")
    assert "shorter" in row.inner_text() and "curator" in row.inner_text()
    assert "+ Measured **4.16 TB/s** on H200." in row.locator(".kb-diff").inner_text()
    page.click("#version-1 >> text=Revert to v1")
    page.wait_for_selector("text=Reverted to version 1 (now version 3).")
    assert "Revert to version 1" in page.inner_text("#version-3")
