"""comment_edit: only its author or an admin changes a comment; names newly @mentioned are
notified once, and unknown names are reported."""

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from apps.campaigns.models import Mention
from apps.campaigns.services.comments import comment_create, comment_edit
from tests.campaigns.support.builders import build_campaign

pytestmark = pytest.mark.django_db


@pytest.fixture
def comment(users):
    node = build_campaign(nodes=2, user=users["engineer"]).nodes.get(key="n1")
    return comment_create(node=node, author=users["engineer"], body="first @reviewer")


def test_the_author_edits_and_new_mentions_are_notified_once(users, comment):
    edited = comment_edit(comment=comment, by=users["engineer"], body="@REVIEWER @Curator @ghost")
    assert edited.body == "@REVIEWER @Curator @ghost" and edited.edited_at is not None
    assert edited.mention_result.notified == ["curator"]
    assert edited.mention_result.unknown == ["ghost"]
    assert Mention.objects.filter(comment=comment).count() == 2


def test_someone_else_may_not_edit(users, comment):
    with pytest.raises(PermissionDenied, match="engineer"):
        comment_edit(comment=comment, by=users["reviewer"], body="changed")
    comment.refresh_from_db()
    assert comment.body == "first @reviewer"


def test_an_admin_may_edit(users, comment):
    assert comment_edit(comment=comment, by=users["admin"], body="tidied").body == "tidied"


def test_an_empty_edit_is_refused(users, comment):
    with pytest.raises(ValidationError):
        comment_edit(comment=comment, by=users["engineer"], body="   ")
