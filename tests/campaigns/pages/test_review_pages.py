"""The review workflow's pages (server side): decisions on the candidate page and the campaign's
review list, the Freeze button, the sortable freeze list, and the inbox's unread count."""

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.campaigns.constants import NodeStatus, Platform
from apps.campaigns.models import Campaign, Comment, Mention, NodeReview
from apps.campaigns.services.comments import comment_create
from apps.campaigns.services.review import node_review_decide
from apps.registry.services import artifact_create
from tests.campaigns.support.builders import build_campaign
from tests.registry import helpers


@pytest.fixture
def campaign(users):
    return build_campaign(nodes=12, user=users["engineer"], name="softmax review")


def _as(client, user):
    client.force_login(user)
    return client


def _accepted(campaign):
    return list(campaign.nodes.filter(status=NodeStatus.ACCEPTED).order_by("id"))


def test_approve_from_the_candidate_page_shows_who_and_when(client, users, campaign):
    node = campaign.nodes.get(key="n2")
    c = _as(client, users["reviewer"])
    response = c.post(
        f"/campaigns/{campaign.pk}/nodes/n2/review/",
        {"decision": "approved", "body": "mask and strides checked"},
    )
    assert response.status_code == 302 and response["Location"].endswith("#reviews")
    review = NodeReview.objects.get(node=node)
    html = c.get(f"/campaigns/{campaign.pk}/nodes/n2/").content.decode()
    item = re.search(r'<li id="review-\d+".*?</li>', html, re.S).group(0)
    assert "Approved" in item and "reviewer" in item and "mask and strides checked" in item
    assert f'datetime="{review.decided_at.isoformat()[:19]}' in item
    assert "approved by you" in html


def test_request_changes_without_a_comment_is_refused_in_words(client, users, campaign):
    c = _as(client, users["reviewer"])
    response = c.post(
        f"/campaigns/{campaign.pk}/nodes/n2/review/",
        {"decision": "changes_requested", "body": ""},
        follow=True,
    )
    assert "Not recorded: say what should change" in response.content.decode()
    assert not NodeReview.objects.exists()


def test_campaign_review_list_shows_decisions_and_filters_by_state(client, users, campaign):
    a, b, c_, *_ = _accepted(campaign)
    node_review_decide(node=a, reviewer=users["reviewer"], decision="approved")
    node_review_decide(
        node=b, reviewer=users["reviewer"], decision="changes_requested", body="too many warps"
    )
    node_review_decide(node=b, reviewer=users["admin"], decision="approved")
    c = _as(client, users["engineer"])
    html = c.get(f"/campaigns/{campaign.pk}/reviews/").content.decode()
    row_b = re.search(rf'<tr id="review-row-{b.key}">.*?</tr>', html, re.S).group(0)
    assert "Changes requested" in row_b and "too many warps" in row_b and "admin" in row_b
    assert re.search(r'class="approvals">1<.*class="changes">1<', row_b, re.S)
    # Every accepted candidate is listed, with the size of each state in its tab.
    assert html.count('id="review-row-') == len(_accepted(campaign))
    awaiting = len(_accepted(campaign)) - 2
    assert re.search(rf'data-review-state="awaiting">.*?\({awaiting}\)', html, re.S)

    changes = c.get(f"/campaigns/{campaign.pk}/reviews/?review=changes").content.decode()
    assert re.findall(r'id="review-row-(n\d+)"', changes) == [b.key]
    approved = c.get(f"/campaigns/{campaign.pk}/reviews/?review=approved").content.decode()
    assert re.findall(r'id="review-row-(n\d+)"', approved) == [a.key]
    assert c_.key in c.get(f"/campaigns/{campaign.pk}/reviews/?review=awaiting").content.decode()
    detail = c.get(f"/campaigns/{campaign.pk}/").content.decode()
    assert f'href="/campaigns/{campaign.pk}/reviews/"' in detail


def test_campaign_review_list_comes_in_pages(client, users):
    """A big campaign's review list is paged (it rendered every accepted candidate: 826 rows,
    ~1.4 s, on the benchmark's 2,000-node campaign); the tabs still count them all."""
    big = build_campaign(nodes=200, user=users["engineer"], name="many accepted")
    accepted = len(_accepted(big))
    assert accepted > 50
    c = _as(client, users["engineer"])
    with CaptureQueriesContext(connection) as queries:
        first = c.get(f"/campaigns/{big.pk}/reviews/?sort=key").content.decode()
    assert first.count('id="review-row-') == 50
    assert re.search(rf'data-review-state="all">.*?\({accepted}\)', first, re.S)
    assert f"page 1 of 2 · {accepted} candidates" in first
    assert 'href="?sort=key&amp;page=2" rel="next"' in first
    second = c.get(f"/campaigns/{big.pk}/reviews/?sort=key&page=2").content.decode()
    keys = re.findall(r'id="review-row-(n\d+)"', first + second)
    assert len(keys) == len(set(keys)) == accepted
    assert len(queries) <= 12, [q["sql"] for q in queries]


def test_freeze_button_on_the_candidate_page(client, users):
    node = helpers.accepted_node(users["engineer"])
    page = f"/campaigns/{node.campaign_id}/nodes/{node.key}/"
    reviewer = _as(client, users["reviewer"]).get(page).content.decode()
    form = re.search(r'<form[^>]*id="freeze-form".*?</form>', reviewer, re.S).group(0)
    assert 'action="/registry/artifacts/new/"' in form
    assert f'name="node" value="{node.pk}"' in form and 'id="freeze-button"' in form
    # An engineer may not freeze: no button.
    assert 'id="freeze-button"' not in _as(client, users["engineer"]).get(page).content.decode()
    # Changes requested: the button asks first, naming who asked.
    node_review_decide(
        node=node, reviewer=users["admin"], decision="changes_requested", body="fix the mask"
    )
    reviewer = _as(client, users["reviewer"]).get(page).content.decode()
    assert 'data-confirm="admin requested changes to' in reviewer
    # Once frozen, the button is a link to the artifact.
    artifact = artifact_create(node=node, by=users["reviewer"])
    reviewer = client.get(page).content.decode()
    assert 'id="freeze-button"' not in reviewer
    assert f'href="/registry/artifacts/{artifact.pk}/"' in reviewer
    assert f"Frozen as artifact #{artifact.pk}" in reviewer


def _freeze_rows(html):
    return re.findall(r'id="freeze-row-(\d+)" data-fitness="([^"]*)"', html)


def test_freeze_list_sorts_by_fitness_and_filters(client, users, campaign):
    other = build_campaign(
        nodes=8, user=users["engineer"], name="interpret one", timed=False, seed=1
    )
    c = _as(client, users["reviewer"])
    html = c.get("/campaigns/to-freeze/").content.decode()
    rows = _freeze_rows(html)
    accepted = [*_accepted(campaign), *_accepted(other)]
    assert len(rows) == len(accepted)
    timed = [float(f) for _, f in rows if f]
    assert timed == sorted(timed, reverse=True), "best fitness first by default"
    assert all(f == "" for _, f in rows[len(timed) :]), "untimed candidates last"
    ascending = [
        float(f)
        for _, f in _freeze_rows(c.get("/campaigns/to-freeze/?sort=fitness").content.decode())
        if f
    ]
    assert ascending == sorted(timed)
    assert 'aria-sort="ascending"' in c.get("/campaigns/to-freeze/?sort=fitness").content.decode()

    interpret = _freeze_rows(c.get("/campaigns/to-freeze/?platform=interpret").content.decode())
    assert {int(pk) for pk, _ in interpret} == {n.pk for n in _accepted(other)}
    assert other.platform == Platform.INTERPRET

    best = max((n for n in _accepted(campaign)), key=lambda n: n.fitness)
    node_review_decide(node=best, reviewer=users["reviewer"], decision="approved")
    approved = _freeze_rows(c.get("/campaigns/to-freeze/?review=approved").content.decode())
    assert [int(pk) for pk, _ in approved] == [best.pk]
    problem = campaign.problem.name
    by_problem = _freeze_rows(c.get(f"/campaigns/to-freeze/?problem={problem}").content.decode())
    assert {int(pk) for pk, _ in by_problem} == {n.pk for n in _accepted(campaign)}


def test_freeze_list_leaves_frozen_candidates_out_in_fixed_queries(client, users):
    nodes = [helpers.accepted_node(users["engineer"]) for _ in range(2)]
    frozen = artifact_create(node=nodes[0], by=users["reviewer"])
    c = _as(client, users["reviewer"])
    pks = {int(pk) for pk, _ in _freeze_rows(c.get("/campaigns/to-freeze/").content.decode())}
    assert frozen.node_id not in pks and nodes[1].pk in pks

    def queries():
        with CaptureQueriesContext(connection) as ctx:
            assert c.get("/campaigns/to-freeze/").status_code == 200
        return len(ctx)

    small = queries()
    build_campaign(nodes=40, user=users["engineer"], seed=3)
    for n in _accepted(Campaign.objects.get(problem__name="bench-softmax-3"))[:5]:
        node_review_decide(node=n, reviewer=users["reviewer"], decision="approved")
    assert queries() == small


def test_inbox_unread_count_and_mark_all_read(client, users, campaign):
    node = campaign.nodes.get(key="n1")
    for body in ("@reviewer look at this", "@reviewer and this"):
        comment_create(node=node, author=users["engineer"], body=body)
    c = _as(client, users["reviewer"])
    page = c.get("/campaigns/").content.decode()
    assert 'hx-get="/campaigns/inbox/unread/"' in page, "every page asks for the badge"
    badge = c.get("/campaigns/inbox/unread/").content.decode()
    assert re.search(r'class="unread-count"[^>]*>2</span>', badge)
    assert 'hx-trigger="every 60s"' in badge
    inbox = c.get("/campaigns/inbox/").content.decode()
    assert "2 unread" in inbox and 'id="inbox-read-all"' in inbox
    c.post("/campaigns/inbox/read/")
    assert not Mention.objects.filter(read_at=None).exists()
    badge = c.get("/campaigns/inbox/unread/").content.decode()
    assert "unread-count" not in badge and "></span>" in badge
    # Someone else's mentions are theirs.
    comment_create(node=node, author=users["reviewer"], body="@engineer thanks")
    assert (
        ">1</span>"
        in _as(client, users["engineer"]).get("/campaigns/inbox/unread/").content.decode()
    )
    assert Comment.objects.count() == 3


def test_mention_suggestions_match_the_start_of_usernames_in_any_case(client, users):
    c = _as(client, users["engineer"])
    found = c.get("/campaigns/mentions/?q=REV").json()["users"]
    assert [u["username"] for u in found] == ["reviewer"]
    assert c.get("/campaigns/mentions/?q=").json() == {"users": []}
    assert c.get("/campaigns/mentions/?q=nobody").json() == {"users": []}
    users["reviewer"].is_active = False
    users["reviewer"].save()
    assert c.get("/campaigns/mentions/?q=rev").json() == {"users": []}
