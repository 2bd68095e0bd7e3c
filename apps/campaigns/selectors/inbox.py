"""Reads of a user's inbox: what awaits them (candidates to review, mentions, approvals, alarms),
the unread badge, and the users an @-mention may name.
"""

from django.contrib.auth import get_user_model
from django.db.models import Exists, OuterRef

from apps.campaigns import hooks
from apps.campaigns.constants import FINISHED_STATUSES, NodeStatus
from apps.campaigns.models import Campaign, Mention, NodeReview
from apps.campaigns.selectors.campaigns import CAMPAIGN_RELATED_DEFERRED


def inbox_for(*, user) -> dict:
    """What awaits this user: accepted best candidates of finished campaigns they have not
    reviewed, unread comments that mention them, promotions they may approve, open alarms."""
    reviewed = NodeReview.objects.filter(node=OuterRef("best_node"), reviewer=user)
    to_review = (
        Campaign.objects.filter(
            status__in=FINISHED_STATUSES,
            best_node__status=NodeStatus.ACCEPTED,
        )
        .exclude(Exists(reviewed))
        .select_related("problem", "best_node", "created_by")
        .defer("engine_state", "workload", *CAMPAIGN_RELATED_DEFERRED)
        .order_by("-finished_at")[:100]
    )
    mentions = (
        Mention.objects.filter(user=user, read_at=None)
        .select_related("comment__author", "comment__node", "comment__node__campaign")
        .defer(
            "comment__node__source",
            "comment__node__report",
            "comment__node__campaign__engine_state",
        )
        .order_by("-comment__created_at")[:100]
    )
    # Approvals and alarms are the registry's, handed over when it starts (campaigns.hooks).
    return {
        "to_review": list(to_review),
        "mentions": list(mentions),
        "to_approve": [],
        "alarms": [],
        **hooks.inbox_sections(user=user),
    }


def inbox_unread_count(*, user) -> int:
    """How many comments mention this user that they have not read (the inbox's badge)."""
    if not (user and user.is_authenticated):
        return 0
    return Mention.objects.filter(user=user, read_at=None).count()


MENTION_SUGGESTIONS = 8


def mention_suggestions(*, prefix: str, limit: int = MENTION_SUGGESTIONS) -> list[dict]:
    """Active users whose username starts with `prefix` (any case), for @-autocomplete."""
    prefix = (prefix or "").strip().lstrip("@")
    if not prefix:
        return []
    users = (
        get_user_model()
        .objects.filter(is_active=True, username__istartswith=prefix)
        .order_by("username")
        .values("username", "first_name", "last_name")[:limit]
    )
    return [
        {"username": u["username"], "name": f"{u['first_name']} {u['last_name']}".strip()}
        for u in users
    ]
