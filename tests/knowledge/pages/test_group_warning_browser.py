"""In a real browser: choosing a group one is not in shows the warning and a required tick
before Save; the save lands on the entry page, not a 404 (issue 12, defect 6)."""

import pytest

from tests.conftest import login

pytestmark = [pytest.mark.browser, pytest.mark.services, pytest.mark.django_db(transaction=True)]


def test_restricting_to_another_group_warns_before_saving(
    asgi_server, demo_users, page, artifacts_dir
):
    from django.contrib.auth.models import Group, User

    from apps.knowledge.services.entries import knowledge_entry_create

    Group.objects.create(name="hopper-partners")
    entry = knowledge_entry_create(
        by=User.objects.get(username="curator"),
        title="Partner tile limits",
        body="Measured on the partner board.",
        kind="hardware_rule",
    )
    login(page, asgi_server, "curator", demo_users["curator"])
    page.goto(f"{asgi_server}/knowledge/{entry.pk}/edit/")
    assert page.locator("#group-warning .kb-warning").count() == 0
    page.select_option("#id_visibility", "restricted")
    page.select_option("#id_group", "hopper-partners")
    page.wait_for_selector("#group-warning >> text=You are not in hopper-partners.")
    page.fill("#id_reason", "partners only")
    page.click("#entry-form button[type=submit]")
    # The required tick keeps the form on the page: nothing is saved yet.
    assert page.evaluate("document.querySelector('#id_confirm_group').validity.valueMissing")
    entry.refresh_from_db()
    assert entry.version == 1
    for theme in ("light", "dark"):
        page.evaluate(f"document.documentElement.dataset.theme = '{theme}'")
        page.screenshot(path=str(artifacts_dir / f"knowledge-group-warning-{theme}.png"))
    page.check("#id_confirm_group")
    page.click("#entry-form button[type=submit]")
    page.wait_for_selector("text=Saved as version 2.")
    assert page.inner_text("#entry-title") == "Partner tile limits"
    assert "restricted to hopper-partners" in page.inner_text(".toolbar.kb-labels")
