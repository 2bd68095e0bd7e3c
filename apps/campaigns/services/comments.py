"""Review of candidates: comments (on a candidate or one line of its source) in threads that can
be resolved, replies, edits and deletes, @mentions, reviews."""

import re
from dataclasses import dataclass, field

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from apps.accounts.permissions import has_portal_permission, is_portal_admin
from apps.campaigns.constants import NodeStatus
from apps.campaigns.models import Comment, Mention, Node, NodeReview
from apps.campaigns.services.events import comment_changed

MENTION = re.compile(r"(?<![\w@])@([\w.+-]+)")
MAX_COMMENT_CHARS = 10_000


@dataclass
class MentionResult:
    """Who a comment's @names reached, and the names that matched no active user."""

    notified: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)


def _body(body: str) -> str:
    body = (body or "").strip()
    if not body:
        raise ValidationError({"body": "a comment needs some text"})
    if len(body) > MAX_COMMENT_CHARS:
        raise ValidationError({"body": f"at most {MAX_COMMENT_CHARS} characters"})
    return body


def _mentions_add(comment: Comment, author) -> MentionResult:
    """@name matches a username whatever its case (`@Reviewer` is `reviewer`). Names that match
    no active user are returned so the author hears that nobody was told; the author and anyone
    already mentioned in this comment are not notified again."""
    names = {n.rstrip(".") for n in MENTION.findall(comment.body)}
    names = {n for n in names if n}
    if not names:
        return MentionResult()
    query = Q()
    for name in names:
        query |= Q(username__iexact=name)
    users = list(get_user_model().objects.filter(query, is_active=True))
    found = {u.username.lower() for u in users}
    unknown = sorted(n for n in names if n.lower() not in found)
    already = set(Mention.objects.filter(comment=comment).values_list("user_id", flat=True))
    new = [u for u in users if u.pk != author.pk and u.pk not in already]
    Mention.objects.bulk_create(Mention(comment=comment, user=u) for u in new)
    return MentionResult(notified=sorted(u.username for u in new), unknown=unknown)


def comment_may_change(*, comment: Comment, user) -> bool:
    """Its author may edit or delete a comment, and so may an admin."""
    if not (user and user.is_authenticated):
        return False
    return comment.author_id == user.pk or is_portal_admin(user)


def _require_author_or_admin(comment: Comment, user, verb: str) -> None:
    if not comment_may_change(comment=comment, user=user):
        raise PermissionDenied(
            f"only {comment.author.username} (its author) or an admin may {verb}"
        )


@transaction.atomic
def comment_create(
    *,
    node: Node,
    author,
    body: str,
    line: int | None = None,
    parent: Comment | int | None = None,
) -> Comment:
    """Add a comment, or a reply to a thread (a reply to a reply joins the same thread, on its
    line). @username mentions of active users land in their inbox; `comment.mention_result`
    says who was notified and which names matched nobody."""
    if not has_portal_permission(author, "comment_candidate"):
        raise ValidationError("you may not comment on candidates")
    body = _body(body)
    if parent is not None:
        parent_id = parent.pk if isinstance(parent, Comment) else parent
        parent = Comment.objects.filter(pk=parent_id, node=node).first()
        if parent is None:
            raise ValidationError({"parent": f"no comment {parent_id} on candidate {node.key}"})
        if parent.parent_id is not None:
            parent = parent.parent
        line = parent.line
    elif line is not None:
        count = len(node.source.splitlines())
        if not 1 <= line <= count:
            raise ValidationError({"line": f"the source has lines 1 to {count}; got {line}"})
    comment = Comment.objects.create(node=node, author=author, body=body, line=line, parent=parent)
    comment.mention_result = _mentions_add(comment, author)
    if parent is not None and parent.resolved_at is not None:
        # A reply reopens a resolved thread: someone still has something to say.
        Comment.objects.filter(pk=parent.pk).update(resolved_at=None, resolved_by=None)
    comment_changed(comment, change="created")
    return comment


@transaction.atomic
def comment_edit(*, comment: Comment, by, body: str) -> Comment:
    """Change a comment's text (its author or an admin). Names newly @mentioned are notified."""
    comment = Comment.objects.select_for_update().select_related("author").get(pk=comment.pk)
    _require_author_or_admin(comment, by, "edit this comment")
    comment.body = _body(body)
    comment.edited_at = timezone.now()
    comment.save(update_fields=["body", "edited_at"])
    comment.mention_result = _mentions_add(comment, comment.author)
    comment_changed(comment, change="edited")
    return comment


@transaction.atomic
def comment_delete(*, comment: Comment, by) -> int:
    """Delete a comment (its author or an admin); a thread's replies go with it. Returns how
    many comments were deleted."""
    comment = Comment.objects.select_for_update().select_related("author").get(pk=comment.pk)
    _require_author_or_admin(comment, by, "delete this comment")
    replies = comment.replies.count()
    comment_changed(comment, change="deleted")
    comment.delete()
    return 1 + replies


@transaction.atomic
def comment_resolve(*, comment: Comment, by, resolved: bool = True) -> Comment:
    """Resolve a thread, or reopen it. Anyone who may comment may do either; a reply resolves
    the thread it belongs to."""
    if not has_portal_permission(by, "comment_candidate"):
        raise PermissionDenied("you may not resolve comments")
    thread_id = comment.parent_id or comment.pk
    thread = Comment.objects.select_for_update().get(pk=thread_id)
    if resolved and thread.resolved_at is not None:
        raise ValidationError("this thread is resolved already")
    if not resolved and thread.resolved_at is None:
        raise ValidationError("this thread is open already")
    thread.resolved_at = timezone.now() if resolved else None
    thread.resolved_by = by if resolved else None
    thread.save(update_fields=["resolved_at", "resolved_by"])
    comment_changed(thread, change="resolved" if resolved else "reopened")
    return thread


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
