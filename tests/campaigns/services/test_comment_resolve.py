"""comment_resolve: anyone who may comment resolves a thread or reopens it; a reply resolves the
thread it belongs to; resolving twice is refused."""

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from apps.campaigns.services.comments import comment_create, comment_resolve
from tests.campaigns.support.builders import build_campaign

pytestmark = pytest.mark.django_db


@pytest.fixture
def thread(users):
    node = build_campaign(nodes=2, user=users["engineer"]).nodes.get(key="n1")
    return comment_create(node=node, author=users["engineer"], body="why?")


def test_resolve_and_reopen(users, thread):
    reply = comment_create(node=thread.node, author=users["reviewer"], body="fixed", parent=thread)
    resolved = comment_resolve(comment=reply, by=users["reviewer"])
    assert resolved.pk == thread.pk and resolved.resolved_by == users["reviewer"]
    with pytest.raises(ValidationError, match="resolved already"):
        comment_resolve(comment=thread, by=users["engineer"])
    reopened = comment_resolve(comment=thread, by=users["engineer"], resolved=False)
    assert reopened.resolved_at is None and reopened.resolved_by is None


def test_a_viewer_may_not_resolve(users, thread):
    with pytest.raises(PermissionDenied):
        comment_resolve(comment=thread, by=users["viewer"])
