"""Review decisions on candidates: a reviewer approves an accepted candidate or requests changes
(saying what to change); and a user's inbox read at once."""

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from apps.accounts.permissions import has_portal_permission
from apps.campaigns.constants import NodeStatus
from apps.campaigns.models import Mention, Node, NodeReview, ReviewDecision

MAX_REVIEW_CHARS = 10_000


@transaction.atomic
def node_review_decide(*, node: Node, reviewer, decision: str, body: str = "") -> NodeReview:
    """Record `reviewer`'s decision on an accepted candidate: approve (a comment is optional) or
    request changes (the comment says which, so it is required). One decision per reviewer: a
    new one replaces theirs, with its time; the same decision again changes nothing."""
    if not has_portal_permission(reviewer, "comment_candidate"):
        raise ValidationError("you may not review candidates")
    if decision not in ReviewDecision.values:
        raise ValidationError({"decision": f"unknown decision {decision!r}"})
    node = Node.objects.only("id", "key", "status").get(pk=node.pk)
    if node.status != NodeStatus.ACCEPTED:
        raise ValidationError(
            f"candidate {node.key} is {node.status}: only an accepted candidate is reviewed"
        )
    body = (body or "").strip()
    if len(body) > MAX_REVIEW_CHARS:
        raise ValidationError({"body": f"at most {MAX_REVIEW_CHARS} characters"})
    if decision == ReviewDecision.CHANGES_REQUESTED and not body:
        raise ValidationError({"body": "say what should change"})
    review, _ = NodeReview.objects.select_for_update().get_or_create(node=node, reviewer=reviewer)
    if review.decision == decision and review.body == body:
        return review
    review.decision, review.body, review.decided_at = decision, body, timezone.now()
    review.save(update_fields=["decision", "body", "decided_at"])
    return review


def mentions_mark_all_read(*, user) -> int:
    """Read every unread mention of this user (the inbox's "mark all read")."""
    return Mention.objects.filter(user=user, read_at=None).update(read_at=timezone.now())
