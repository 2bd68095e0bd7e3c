"""In a real browser, on a candidate page: a line out of range says so next to the form; a new
line comment shows under its line at once; @mentions are matched whatever their case and a name
nobody has is reported; a thread takes replies, is resolved and reopened; its author edits and
deletes (after a confirmation) what they wrote, and only they (or an admin) see those buttons."""

import pytest
from django.contrib.auth.models import User

from apps.campaigns.models import Comment, Mention
from apps.campaigns.services.comments import comment_create
from tests.campaigns.support.builders import build_campaign
from tests.conftest import login
from tests.support.asyncio_thread import off_loop

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _open(page, asgi_server, demo_users, username="engineer"):
    engineer = User.objects.get(username="engineer")
    campaign = build_campaign(nodes=3, user=engineer)
    node = campaign.nodes.get(key="n1")
    login(page, asgi_server, username, demo_users[username])
    page.goto(f"{asgi_server}/campaigns/{campaign.pk}/nodes/n1/")
    page.evaluate("window.__marker = 'no reload'")
    return node


def test_line_out_of_range_shows_its_error_in_the_page(asgi_server, demo_users, page):
    node = _open(page, asgi_server, demo_users)
    count = len(node.source.splitlines())
    page.fill("#id_body", "what about this line?")
    page.fill("#id_line", "999")
    page.click("#comment-form button[type=submit]")
    error = page.wait_for_selector("#comment-error", timeout=5_000)
    assert f"the source has lines 1 to {count}; got 999" in error.inner_text()
    assert page.input_value("#id_body") == "what about this line?", "what they wrote is kept"
    assert not Comment.objects.exists()
    # A comment from someone else arrives live: the section refreshes around the draft the
    # server sent back with its error, never over it (it once came back empty).
    other = User.objects.get(username="reviewer")
    off_loop(comment_create, node=node, author=other, body="meanwhile, a remark")
    page.wait_for_timeout(3_000)
    assert page.input_value("#id_body") == "what about this line?", "kept through a refresh"
    assert page.input_value("#id_line") == "999"
    assert page.evaluate("window.__marker") == "no reload"


def test_new_line_comment_shows_under_its_line_and_mentions_are_reported(
    asgi_server, demo_users, page
):
    _open(page, asgi_server, demo_users)
    page.click("[data-comment-line='5']")
    page.fill("#id_body", "@Reviewer is the row max needed? cc @nobody")
    page.click("#comment-form button[type=submit]")
    # Under line 5 of the source at once (no reload, no wait for the live refresh).
    row = page.wait_for_selector("#line-comments-5:has-text('row max needed')", timeout=10_000)
    assert row.evaluate("r => r.previousElementSibling.id") == "L5"
    notice = page.inner_text("#comment-notice")
    assert "No user named @nobody" in notice and "Notified @reviewer" in notice
    # The live refresh that follows the comment's own event keeps what the author was told.
    page.wait_for_timeout(1_500)
    assert "No user named @nobody" in page.inner_text("#comment-notice")
    assert page.evaluate("window.__marker") == "no reload"
    assert Mention.objects.filter(user__username="reviewer").count() == 1


def test_reply_resolve_edit_delete_in_the_page(asgi_server, demo_users, page):
    node = _open(page, asgi_server, demo_users)
    reviewer = User.objects.get(username="reviewer")
    thread = off_loop(comment_create, node=node, author=reviewer, body="mask looks off", line=3)
    page.wait_for_selector(f"#comment-{thread.pk}", timeout=15_000)  # arrives live
    thread_el = page.locator(f"#comment-{thread.pk}")
    # Not the engineer's comment: no edit or delete on it.
    assert thread_el.locator(":scope > .comment-actions").count() == 0

    thread_el.locator(".reply-box summary").click()
    thread_el.locator(".reply-box textarea").fill("fixed in n2")
    thread_el.locator(".reply-box button[type=submit]").click()
    page.wait_for_selector(f"#comment-{thread.pk} .replies:has-text('fixed in n2')")
    reply = Comment.objects.get(parent=thread)
    assert reply.line == 3
    page.wait_for_selector("#line-comments-3:has-text('fixed in n2')")

    page.click(f"#comment-{thread.pk} button.resolve")
    page.wait_for_selector(f"#comment-{thread.pk}.resolved")
    assert page.inner_text(f"#comment-{thread.pk} button.resolve") == "Reopen"
    page.click(f"#comment-{thread.pk} button.resolve")
    page.wait_for_selector(f"#comment-{thread.pk}:not(.resolved)")

    mine = page.locator(f"#comment-{reply.pk}")
    mine.locator(".edit-box summary").click()
    mine.locator(".edit-box textarea").fill("fixed in n2 (the mask, too)")
    mine.locator(".edit-box button[type=submit]").click()
    page.wait_for_selector(f"#comment-{reply.pk}:has-text('(the mask, too)')")
    assert "(edited)" in page.inner_text(f"#comment-{reply.pk}")

    page.once("dialog", lambda dialog: dialog.dismiss())
    page.click(f"#comment-{reply.pk} button.delete")
    page.wait_for_timeout(300)
    assert Comment.objects.filter(pk=reply.pk).exists(), "a dismissed confirmation keeps it"
    page.once("dialog", lambda dialog: dialog.accept())
    page.click(f"#comment-{reply.pk} button.delete")
    page.wait_for_selector(f"#comment-{reply.pk}", state="detached")
    assert not Comment.objects.filter(pk=reply.pk).exists()
    assert page.evaluate("window.__marker") == "no reload"


def test_a_line_comment_from_another_reader_shows_under_its_line_live(
    asgi_server, demo_users, page
):
    node = _open(page, asgi_server, demo_users, username="reviewer")
    page.wait_for_timeout(800)  # the websocket is open
    engineer = User.objects.get(username="engineer")
    off_loop(comment_create, node=node, author=engineer, body="BLOCK too small here", line=7)
    row = page.wait_for_selector("#line-comments-7:has-text('BLOCK too small')", timeout=15_000)
    assert row.evaluate("r => r.previousElementSibling.id") == "L7"
    assert page.evaluate("window.__marker") == "no reload"


def test_an_open_reply_box_is_not_closed_by_a_live_refresh(asgi_server, demo_users, page):
    node = _open(page, asgi_server, demo_users)
    reviewer = User.objects.get(username="reviewer")
    thread = off_loop(comment_create, node=node, author=reviewer, body="first", line=2)
    page.wait_for_selector(f"#comment-{thread.pk}", timeout=15_000)
    page.click(f"#comment-{thread.pk} .reply-box summary")
    off_loop(comment_create, node=node, author=reviewer, body="second thought", line=4)
    page.wait_for_timeout(1_500)  # the event arrived; the refresh waits for the open box
    assert page.locator(f"#comment-{thread.pk} .reply-box textarea").is_visible()
    page.click(f"#comment-{thread.pk} .reply-box summary")  # closed: the refresh goes ahead
    page.wait_for_selector("#comment-list:has-text('second thought')", timeout=10_000)
    page.wait_for_selector("#line-comments-4:has-text('second thought')")
