"""comment_create: a comment on a candidate or one of its lines, or a reply to a thread; @names
match usernames whatever their case, and names that match nobody come back to the author; a
reply notifies only those it names."""

import pytest
from django.core.exceptions import ValidationError

from apps.campaigns.models import Comment, Mention
from apps.campaigns.selectors import inbox_unread_count
from apps.campaigns.services.comments import comment_create, comment_resolve
from tests.campaigns.support.builders import build_campaign

pytestmark = pytest.mark.django_db


@pytest.fixture
def node(users):
    return build_campaign(nodes=3, user=users["engineer"]).nodes.get(key="n1")


def test_mention_matches_the_username_whatever_its_case(users, node):
    comment = comment_create(node=node, author=users["engineer"], body="@Reviewer and @CURATOR.")
    mentioned = set(
        Mention.objects.filter(comment=comment).values_list("user__username", flat=True)
    )
    assert mentioned == {"reviewer", "curator"}
    assert comment.mention_result.notified == ["curator", "reviewer"]
    assert comment.mention_result.unknown == []


def test_a_name_that_matches_nobody_is_reported_to_the_author(users, node):
    comment = comment_create(node=node, author=users["engineer"], body="cc @nobody and @reviewer")
    assert comment.mention_result.unknown == ["nobody"]
    assert comment.mention_result.notified == ["reviewer"]
    assert Mention.objects.filter(comment=comment).count() == 1


def test_the_author_is_not_notified_of_their_own_name(users, node):
    comment = comment_create(node=node, author=users["engineer"], body="note to @Engineer self")
    assert not Mention.objects.filter(comment=comment).exists()
    assert comment.mention_result.unknown == []


def test_line_out_of_range_is_refused_with_the_range(users, node):
    count = len(node.source.splitlines())
    with pytest.raises(ValidationError) as exc:
        comment_create(node=node, author=users["engineer"], body="x", line=count + 1)
    assert exc.value.message_dict["line"] == [f"the source has lines 1 to {count}; got {count + 1}"]
    assert not Comment.objects.exists()


def test_a_reply_joins_the_thread_on_its_line_and_reopens_it(users, node):
    thread = comment_create(node=node, author=users["engineer"], body="mask?", line=4)
    comment_resolve(comment=thread, by=users["reviewer"])
    reply = comment_create(node=node, author=users["reviewer"], body="fine", parent=thread.pk)
    nested = comment_create(node=node, author=users["engineer"], body="ok", parent=reply)
    assert reply.parent_id == thread.pk and reply.line == 4
    assert nested.parent_id == thread.pk, "a reply to a reply joins the same thread"
    thread.refresh_from_db()
    assert thread.resolved_at is None, "a reply reopens a resolved thread"


def test_a_reply_notifies_only_the_users_it_mentions(users, node):
    """The rule the README states: an @name lands in that user's inbox. A reply is a comment
    like any other: those mentioned earlier in the thread, and the thread's author, are not
    told again unless the reply names them."""
    thread = comment_create(
        node=node, author=users["engineer"], body="@reviewer @curator is the mask right?", line=3
    )
    assert thread.mention_result.notified == ["curator", "reviewer"]
    reply = comment_create(
        node=node, author=users["reviewer"], body="@admin can you check?", parent=thread
    )
    assert reply.mention_result.notified == ["admin"]
    assert set(Mention.objects.filter(comment=reply).values_list("user__username", flat=True)) == {
        "admin"
    }
    quiet = comment_create(node=node, author=users["admin"], body="it is", parent=reply)
    assert quiet.mention_result.notified == []
    assert not Mention.objects.filter(comment=quiet).exists()
    back = comment_create(
        node=node, author=users["admin"], body="@Engineer fixed, thanks", parent=thread
    )
    assert back.mention_result.notified == ["engineer"]
    # What each inbox shows: one unread mention per comment that named its user, no more.
    unread = {
        name: inbox_unread_count(user=users[name])
        for name in ("engineer", "reviewer", "curator", "admin")
    }
    assert unread == {"engineer": 1, "reviewer": 1, "curator": 1, "admin": 1}


def test_a_reply_to_another_candidates_comment_is_refused(users, node):
    other = node.campaign.nodes.get(key="n2")
    thread = comment_create(node=other, author=users["engineer"], body="elsewhere")
    with pytest.raises(ValidationError) as exc:
        comment_create(node=node, author=users["reviewer"], body="x", parent=thread.pk)
    assert "parent" in exc.value.message_dict
