"""Review decisions through the REST API (`/api/campaigns/<id>/nodes/<key>/review/`): a script
holding an API token and a reviewer approve or request changes with the page's rules and the
page's service, the candidate page shows what they decided, bad input is a 400 that says what
is wrong, and users without the role get a 403 naming the roles that have it."""

import re

import pytest
from rest_framework.test import APIClient

from apps.accounts.services import DEMO_PASSWORD_SUFFIX
from apps.campaigns.constants import NodeStatus
from apps.campaigns.models import NodeReview
from apps.campaigns.services.review import node_review_decide
from tests.campaigns.support.builders import build_campaign

pytestmark = pytest.mark.django_db


@pytest.fixture
def campaign(users):
    return build_campaign(nodes=12, user=users["engineer"], name="softmax review")


@pytest.fixture
def node(campaign):
    return campaign.nodes.filter(status=NodeStatus.ACCEPTED).order_by("id").first()


def _url(node) -> str:
    return f"/api/campaigns/{node.campaign_id}/nodes/{node.key}/review/"


def api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def token_client(username: str) -> APIClient:
    """A client as a script uses the API: a token from /api/auth/token/, no session."""
    client = APIClient()
    answer = client.post(
        "/api/auth/token/",
        {"username": username, "password": f"{username}{DEMO_PASSWORD_SUFFIX}"},
        format="json",
    )
    assert answer.status_code == 200, answer.content
    client.credentials(HTTP_AUTHORIZATION=f"Token {answer.json()['token']}")
    return client


def _decisions_on_page(client, node) -> list[str]:
    html = client.get(f"/campaigns/{node.campaign_id}/nodes/{node.key}/").content.decode()
    return re.findall(r'<li id="review-\d+".*?</li>', html, re.S)


def test_decisions_made_through_the_api_show_on_the_candidate_page(client, users, node):
    script = token_client("engineer")
    made = script.post(
        _url(node), {"decision": "approved", "body": "ran it on my box"}, format="json"
    )
    assert made.status_code == 201, made.content
    assert made.json() | {"id": 0, "decided_at": "", "created_at": ""} == {
        "id": 0,
        "node": node.key,
        "reviewer": "engineer",
        "decision": "approved",
        "body": "ran it on my box",
        "decided_at": "",
        "created_at": "",
    }
    reviewer = token_client("reviewer")
    asked = reviewer.post(
        _url(node),
        {"decision": "changes_requested", "body": "num_warps=8 spills: try 4"},
        format="json",
    )
    assert asked.status_code == 201, asked.content

    client.force_login(users["viewer"])
    items = _decisions_on_page(client, node)
    assert len(items) == 2
    newest, older = items
    assert "Changes requested" in newest and "reviewer" in newest
    assert "num_warps=8 spills: try 4" in newest
    assert "Approved" in older and "engineer" in older and "ran it on my box" in older
    review = NodeReview.objects.get(node=node, reviewer=users["reviewer"])
    assert f'datetime="{review.decided_at.isoformat()[:19]}' in newest
    # The reviewer's own page says what they decided.
    client.force_login(users["reviewer"])
    html = client.get(f"/campaigns/{node.campaign_id}/nodes/{node.key}/").content.decode()
    assert "changes requested by you" in html


def test_the_list_is_newest_decision_first_a_new_decision_replaces_the_last(
    users, node, django_assert_max_num_queries
):
    reviewer = api(users["reviewer"])
    reviewer.post(_url(node), {"decision": "changes_requested", "body": "mask?"}, format="json")
    api(users["admin"]).post(_url(node), {"decision": "approved"}, format="json")
    # The reviewer changes their mind: one review each, theirs now approved and newest.
    again = reviewer.post(_url(node), {"decision": "approved", "body": "mask is fine"})
    assert again.status_code == 201 and again.json()["decision"] == "approved"
    api(users["curator"]).post(_url(node), {}, format="json")  # marked reviewed, no decision
    # permissions (2), the node, its reviews with their reviewers: not one per review.
    with django_assert_max_num_queries(4):
        listed = api(users["viewer"]).get(_url(node))
    assert listed.status_code == 200
    rows = [(r["reviewer"], r["decision"], r["body"]) for r in listed.json()["results"]]
    assert rows == [
        ("reviewer", "approved", "mask is fine"),
        ("admin", "approved", ""),
        ("curator", "", ""),
    ]
    assert listed.json()["count"] == 3


def test_bad_input_is_a_400_that_says_what_is_wrong(users, campaign, node):
    reviewer = api(users["reviewer"])
    unknown = reviewer.post(_url(node), {"decision": "lgtm"}, format="json")
    assert unknown.status_code == 400
    assert unknown.json() == {
        "decision": [
            'unknown decision "lgtm": one of approved, changes_requested, '
            "or none to mark the candidate reviewed"
        ]
    }
    for body in ("", "   "):
        bare = reviewer.post(
            _url(node), {"decision": "changes_requested", "body": body}, format="json"
        )
        assert bare.status_code == 400
        assert bare.json() == {"body": ["say what should change"]}, "the page's own words"
    stray = reviewer.post(_url(node), {"body": "nice"}, format="json")
    assert stray.status_code == 400 and "goes with a decision" in stray.json()["body"][0]
    long = reviewer.post(_url(node), {"decision": "approved", "body": "x" * 10_001})
    assert long.status_code == 400 and long.json() == {"body": ["at most 10000 characters"]}
    rejected = campaign.nodes.exclude(status=NodeStatus.ACCEPTED).first()
    refused = reviewer.post(_url(rejected), {"decision": "approved"}, format="json")
    assert refused.status_code == 400
    assert "only an accepted candidate is reviewed" in refused.json()["detail"][0]
    missing = reviewer.post(
        f"/api/campaigns/{campaign.pk}/nodes/nope/review/", {"decision": "approved"}
    )
    assert missing.status_code == 404
    assert not NodeReview.objects.exists()


@pytest.mark.parametrize("username", ["viewer", "runtime"])
def test_users_without_the_role_get_a_403_naming_who_may(users, node, username):
    client = api(users[username])
    refused = client.post(_url(node), {"decision": "approved"}, format="json")
    assert refused.status_code == 403
    assert refused.json()["detail"] == (
        "You need permission to comment on candidates; "
        "roles that have it: engineer, reviewer, curator, admin."
    )
    assert not NodeReview.objects.exists()
    # Reading the decisions needs only the portal.
    node_review_decide(node=node, reviewer=users["reviewer"], decision="approved")
    assert client.get(_url(node)).json()["results"][0]["reviewer"] == "reviewer"
    assert APIClient().post(_url(node), {"decision": "approved"}).status_code in (401, 403)
