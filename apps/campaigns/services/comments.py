"""Review of candidates: comments (on a candidate or one line of its source), mentions, reviews."""

import re

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from apps.accounts.permissions import has_portal_permission
from apps.campaigns.constants import NodeStatus
from apps.campaigns.models import Comment, Mention, Node, NodeReview
from apps.campaigns.services.events import comment_added

MENTION = re.compile(r"(?<![\w@])@([\w.+-]+)")
MAX_COMMENT_CHARS = 10_000


@transaction.atomic
def comment_create(*, node: Node, author, body: str, line: int | None = None) -> Comment:
    """Add a comment; @username mentions of readers of the portal land in their inbox."""
    if not has_portal_permission(author, "comment_candidate"):
        raise ValidationError("you may not comment on candidates")
    body = (body or "").strip()
    if not body:
        raise ValidationError({"body": "a comment needs some text"})
    if len(body) > MAX_COMMENT_CHARS:
        raise ValidationError({"body": f"at most {MAX_COMMENT_CHARS} characters"})
    if line is not None:
        count = len(node.source.splitlines())
        if not 1 <= line <= count:
            raise ValidationError({"line": f"the source has lines 1 to {count}; got {line}"})
    comment = Comment.objects.create(node=node, author=author, body=body, line=line)
    names = set(MENTION.findall(body)) - {author.username}
    users = get_user_model().objects.filter(username__in=names, is_active=True)
    Mention.objects.bulk_create(Mention(comment=comment, user=u) for u in users)
    comment_added(comment)
    return comment


def mentions_mark_read(*, node: Node, user) -> int:
    """Opening a candidate reads the mentions of this user in its comments."""
    return Mention.objects.filter(comment__node=node, user=user, read_at=None).update(
        read_at=timezone.now()
    )


@transaction.atomic
def node_mark_reviewed(*, node: Node, reviewer) -> NodeReview:
    """Mark an accepted candidate reviewed by this user (it leaves their inbox). Idempotent."""
    if node.status != NodeStatus.ACCEPTED:
        raise ValidationError("only an accepted candidate awaits review")
    review, _ = NodeReview.objects.get_or_create(node=node, reviewer=reviewer)
    return review
