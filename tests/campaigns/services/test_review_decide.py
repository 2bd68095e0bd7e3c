"""node_review_decide: a reviewer approves an accepted candidate or requests changes (saying
which); one decision per reviewer, replaced with its time; refused for other candidates, for
changes without a word, and for users who may not review."""

import pytest
from django.core.exceptions import ValidationError

from apps.campaigns.constants import NodeStatus
from apps.campaigns.models import NodeReview, ReviewDecision
from apps.campaigns.services.comments import node_mark_reviewed
from apps.campaigns.services.review import node_review_decide
from tests.campaigns.support.builders import build_campaign


@pytest.fixture
def campaign(users):
    return build_campaign(nodes=12, user=users["engineer"])


def test_approve_records_reviewer_decision_and_time(users, campaign):
    node = campaign.nodes.get(key="n1")
    review = node_review_decide(
        node=node, reviewer=users["reviewer"], decision="approved", body="checked the mask"
    )
    review.refresh_from_db()
    assert review.reviewer == users["reviewer"]
    assert review.decision == ReviewDecision.APPROVED
    assert review.body == "checked the mask"
    assert review.decided_at is not None


def test_a_new_decision_replaces_the_reviewers_last_one(users, campaign):
    node = campaign.nodes.get(key="n1")
    first = node_review_decide(node=node, reviewer=users["reviewer"], decision="approved")
    second = node_review_decide(
        node=node,
        reviewer=users["reviewer"],
        decision="changes_requested",
        body="BLOCK 1024 spills on sm90",
    )
    assert second.pk == first.pk
    assert NodeReview.objects.filter(node=node).count() == 1
    assert second.decision == ReviewDecision.CHANGES_REQUESTED
    assert second.decided_at > first.decided_at
    # Another reviewer's decision stands beside it.
    node_review_decide(node=node, reviewer=users["admin"], decision="approved")
    assert sorted(NodeReview.objects.filter(node=node).values_list("decision", flat=True)) == [
        "approved",
        "changes_requested",
    ]


def test_the_same_decision_again_keeps_its_time(users, campaign):
    node = campaign.nodes.get(key="n1")
    first = node_review_decide(node=node, reviewer=users["reviewer"], decision="approved")
    again = node_review_decide(node=node, reviewer=users["reviewer"], decision="approved")
    assert again.decided_at == first.decided_at


def test_a_plain_reviewed_mark_gets_a_decision_later(users, campaign):
    node = campaign.nodes.get(key="n1")
    node_mark_reviewed(node=node, reviewer=users["reviewer"])
    review = node_review_decide(node=node, reviewer=users["reviewer"], decision="approved")
    assert review.decision == "approved" and NodeReview.objects.count() == 1


def test_requesting_changes_needs_a_comment(users, campaign):
    node = campaign.nodes.get(key="n1")
    with pytest.raises(ValidationError, match="say what should change"):
        node_review_decide(
            node=node, reviewer=users["reviewer"], decision="changes_requested", body="  "
        )
    assert not NodeReview.objects.exists()


def test_only_accepted_candidates_are_reviewed(users, campaign):
    node = campaign.nodes.filter(status=NodeStatus.REJECTED).first()
    with pytest.raises(ValidationError, match="only an accepted candidate is reviewed"):
        node_review_decide(node=node, reviewer=users["reviewer"], decision="approved")


def test_unknown_decisions_and_viewers_are_refused(users, campaign):
    node = campaign.nodes.get(key="n1")
    with pytest.raises(ValidationError, match="unknown decision"):
        node_review_decide(node=node, reviewer=users["reviewer"], decision="lgtm")
    with pytest.raises(ValidationError, match="may not review"):
        node_review_decide(node=node, reviewer=users["viewer"], decision="approved")
    assert not NodeReview.objects.exists()
