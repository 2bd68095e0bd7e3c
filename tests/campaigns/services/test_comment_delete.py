"""comment_delete: only its author or an admin deletes a comment; a thread's replies go with it."""

import pytest
from django.core.exceptions import PermissionDenied

from apps.campaigns.models import Comment
from apps.campaigns.services.comments import comment_create, comment_delete
from tests.campaigns.support.builders import build_campaign

pytestmark = pytest.mark.django_db


@pytest.fixture
def thread(users):
    node = build_campaign(nodes=2, user=users["engineer"]).nodes.get(key="n1")
    thread = comment_create(node=node, author=users["engineer"], body="why?", line=2)
    comment_create(node=node, author=users["reviewer"], body="because", parent=thread)
    return thread


def test_someone_else_may_not_delete(users, thread):
    with pytest.raises(PermissionDenied):
        comment_delete(comment=thread, by=users["reviewer"])
    assert Comment.objects.count() == 2


def test_the_author_deletes_a_reply_alone(users, thread):
    reply = thread.replies.get()
    assert comment_delete(comment=reply, by=users["reviewer"]) == 1
    assert list(Comment.objects.all()) == [thread]


def test_the_author_deletes_the_thread_with_its_replies(users, thread):
    assert comment_delete(comment=thread, by=users["engineer"]) == 2
    assert not Comment.objects.exists()


def test_an_admin_may_delete(users, thread):
    comment_delete(comment=thread.replies.get(), by=users["admin"])
    assert Comment.objects.count() == 1
