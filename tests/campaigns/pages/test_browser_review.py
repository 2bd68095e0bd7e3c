"""In a real browser, the review workflow: a reviewer requests changes on a candidate and then
approves it, and sees both on the page and in the campaign's review list; the Freeze button asks
first and freezes; the freeze list sorts by fitness when its header is clicked; the inbox link
counts unread mentions until they are read. Each page is shot in light and dark."""

import re

import pytest
from django.contrib.auth.models import User

from apps.campaigns.constants import NodeStatus
from apps.campaigns.models import NodeReview
from apps.campaigns.services.comments import comment_create
from tests.campaigns.support.builders import build_campaign
from tests.conftest import login, wait_for_js
from tests.registry import helpers
from tests.support.asyncio_thread import off_loop

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _theme(page) -> str:
    return page.evaluate(
        "getComputedStyle(document.documentElement).colorScheme.includes('dark') ? 'dark' : 'light'"
    )


def _shoot(page, artifacts_dir, name: str) -> None:
    """The page in light and in dark, then back to the theme it had."""
    start = _theme(page)
    for _ in range(2):
        page.screenshot(path=str(artifacts_dir / f"{name}-{_theme(page)}.png"), full_page=True)
        page.click("[data-theme-toggle]")
    assert _theme(page) == start


def test_request_changes_then_approve_shown_on_the_page_and_the_review_list(
    asgi_server, demo_users, page, artifacts_dir
):
    campaign = build_campaign(nodes=12, user=User.objects.get(username="engineer"))
    node = campaign.nodes.filter(status=NodeStatus.ACCEPTED).order_by("id")[1]
    login(page, asgi_server, "reviewer", demo_users["reviewer"])
    page.goto(f"{asgi_server}/campaigns/{campaign.pk}/nodes/{node.key}/")
    assert page.inner_text("#review-none") == "No review yet."
    page.click("#review-link")

    page.click("#review-request-changes")  # no comment: refused, and said
    page.wait_for_selector(".messages >> text=say what should change")
    assert not NodeReview.objects.exists()

    page.fill("#id_review_body", "BLOCK=1024 spills registers on sm90; try 512")
    page.click("#review-request-changes")
    item = page.wait_for_selector("#review-decisions li.changes_requested")
    text = item.inner_text()
    assert "Changes requested" in text and "reviewer" in text and "try 512" in text
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d", text), "when it was decided"
    assert page.inner_text("#reviewed-badge") == "changes requested by you"
    _shoot(page, artifacts_dir, "candidate-review")

    page.fill("#id_review_body", "512 is in n7; this one is fine as a fallback")
    page.click("#review-approve")
    page.wait_for_selector("#review-decisions li.approved")
    assert page.locator("#review-decisions li").count() == 1, "the new decision replaces mine"
    assert page.inner_text("#reviewed-badge") == "approved by you"

    page.click("#reviews >> text=All reviews of this campaign")
    page.wait_for_selector("#review-table")
    row = page.locator(f"#review-row-{node.key}")
    assert "Approved" in row.inner_text() and "fine as a fallback" in row.inner_text()
    page.click("[data-review-state=approved]")
    page.wait_for_selector("[data-review-state=approved][aria-current=page]")
    keys = page.eval_on_selector_all("#review-table tbody tr", "rs => rs.map(r => r.id)")
    assert keys == [f"review-row-{node.key}"]
    _shoot(page, artifacts_dir, "campaign-reviews")


def test_freeze_button_asks_then_freezes(asgi_server, demo_users, page, artifacts_dir):
    node = helpers.accepted_node(User.objects.get(username="engineer"))
    login(page, asgi_server, "reviewer", demo_users["reviewer"])
    page.goto(f"{asgi_server}/campaigns/{node.campaign_id}/nodes/{node.key}/")
    asked = []

    def dismiss(dialog):
        asked.append(dialog.message)
        dialog.dismiss()

    page.once("dialog", dismiss)
    page.click("#freeze-button")
    page.wait_for_timeout(300)
    assert asked and "Freeze" in asked[0] and node.key in asked[0]
    assert "/registry/" not in page.url, "dismissed: nothing frozen"

    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#freeze-button")
    page.wait_for_url(re.compile(r"/registry/artifacts/\d+/$"), timeout=60_000)
    assert "Frozen and signed as artifact" in page.inner_text(".messages")
    page.goto(f"{asgi_server}/campaigns/{node.campaign_id}/nodes/{node.key}/")
    assert page.inner_text("#frozen-link").startswith("Frozen as artifact #")
    assert page.locator("#freeze-button").count() == 0
    _shoot(page, artifacts_dir, "candidate-frozen")


def test_freeze_list_sorts_by_fitness_from_its_header(asgi_server, demo_users, page, artifacts_dir):
    build_campaign(nodes=30, user=User.objects.get(username="engineer"))
    login(page, asgi_server, "reviewer", demo_users["reviewer"])
    page.goto(f"{asgi_server}/campaigns/inbox/")
    page.click("#freeze-list-link")
    page.wait_for_selector("#freeze-table")

    def fitness():
        values = page.eval_on_selector_all(
            "#freeze-table tbody tr", "rs => rs.map(r => r.dataset.fitness)"
        )
        return [float(v) for v in values if v]

    first = fitness()
    assert len(first) > 3 and first == sorted(first, reverse=True)
    page.click("#freeze-table th >> text=Fitness")
    page.wait_for_selector("#freeze-table th a[aria-sort=ascending]")
    assert fitness() == sorted(first)
    _shoot(page, artifacts_dir, "freeze-list")
    page.select_option("#freeze-filters select[name=review]", "changes")
    page.click("#freeze-filters button[type=submit]")
    page.wait_for_selector("text=No accepted candidate matches these filters")


def test_inbox_link_counts_unread_mentions_until_read(asgi_server, demo_users, page, artifacts_dir):
    engineer = User.objects.get(username="engineer")
    campaign = build_campaign(nodes=3, user=engineer)
    node = campaign.nodes.get(key="n1")
    off_loop(comment_create, node=node, author=engineer, body="@Reviewer is the row max needed?")
    off_loop(comment_create, node=node, author=engineer, body="@reviewer and the mask?", line=4)
    login(page, asgi_server, "reviewer", demo_users["reviewer"])
    page.goto(f"{asgi_server}/campaigns/")
    badge = page.wait_for_selector("header.topbar #inbox-unread.unread-count")
    assert badge.inner_text() == "2"
    assert badge.get_attribute("title") == "2 unread mentions"
    page.click("header.topbar >> text=Inbox")
    page.wait_for_selector("#inbox-mentions-count")
    assert page.inner_text("#inbox-mentions-count") == "2 unread"
    _shoot(page, artifacts_dir, "inbox-unread")
    # Opening the candidate reads its mentions: the badge is gone on the next page.
    page.click("#inbox-mentions a")
    page.wait_for_selector("#comments")
    page.goto(f"{asgi_server}/campaigns/")
    # The badge has come back from the server (it then asks again every minute).
    wait_for_js(
        page, "document.getElementById('inbox-unread').getAttribute('hx-trigger').includes('every')"
    )
    assert page.inner_text("#inbox-unread") == ""
    assert page.locator("#inbox-unread.unread-count").count() == 0


def test_at_autocomplete_in_the_comment_box(asgi_server, demo_users, page, artifacts_dir):
    campaign = build_campaign(nodes=3, user=User.objects.get(username="engineer"))
    login(page, asgi_server, "engineer", demo_users["engineer"])
    page.goto(f"{asgi_server}/campaigns/{campaign.pk}/nodes/n1/")
    page.click("#id_body")
    page.keyboard.type("is the mask right? @Rev")
    option = page.wait_for_selector("#mention-suggestions li[aria-selected=true]")
    assert option.inner_text().startswith("@reviewer")
    page.screenshot(path=str(artifacts_dir / "comment-mention-autocomplete.png"))
    page.keyboard.press("Enter")
    assert page.input_value("#id_body") == "is the mask right? @reviewer "
    assert page.locator("#mention-suggestions").is_hidden()
    page.keyboard.type("cc @nob")
    page.wait_for_timeout(500)
    assert page.locator("#mention-suggestions").is_hidden(), "no user: no list"
    page.keyboard.press("Enter")  # a newline, not a pick
    assert page.input_value("#id_body").endswith("cc @nob\n")
