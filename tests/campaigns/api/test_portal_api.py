"""The portal's actions through the REST API: schema, filters, graph pages, comments, reviews,
inbox, portfolio, exports, uploads; role refusals say which role is needed; bounded queries."""

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from apps.campaigns.models import Campaign, Comment, Problem
from tests.campaigns.support.builders import PROBLEM_SOURCE, build_campaign

pytestmark = pytest.mark.django_db


def api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_openapi_schema_validates_without_warnings(tmp_path):
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "s.yml"))
    schema = (tmp_path / "s.yml").read_text()
    for path in (
        "/api/campaigns/{id}/graph/",
        "/api/campaigns/{id}/nodes/{key}/comments/",
        "/api/campaigns/{id}/nodes/{key}/comments/{comment_id}/",
        "/api/campaigns/{id}/nodes/{key}/comments/{comment_id}/resolve/",
        "/api/campaigns/{id}/nodes/{key}/review/",
        "/api/campaigns/{id}/compare/",
        "/api/campaigns/{id}/export/",
        "/api/campaigns/upload/",
        "/api/problems/preview/",
        "/api/inbox/",
        "/api/portfolio/",
    ):
        assert path in schema


def test_campaign_list_filters_with_bounded_queries(users, big, django_assert_max_num_queries):
    for seed in range(4):
        build_campaign(
            nodes=3, user=users["engineer"], seed=10 + seed, timed=False, name=f"i{seed}"
        )
    client = api(users["viewer"])
    # 2 permission lookups, the count, the page (with problem, author and best node joined).
    with django_assert_max_num_queries(4):
        data = client.get("/api/campaigns/?platform=interpret&sort=name").json()
    assert [c["name"] for c in data["results"]] == ["i0", "i1", "i2", "i3"]
    assert client.get("/api/campaigns/?q=big").json()["count"] == 1


def test_node_list_and_detail_bounded(users, big, django_assert_max_num_queries):
    client = api(users["viewer"])
    # permissions (2), campaign, count, page, in-edges with parents (2): not one per node.
    with django_assert_max_num_queries(7):
        data = client.get(f"/api/campaigns/{big.pk}/nodes/").json()
    assert data["count"] == 300 and len(data["results"]) == 50
    with django_assert_max_num_queries(8):
        node = client.get(f"/api/campaigns/{big.pk}/nodes/{big.best_node.key}/").json()
    assert node["measurements"] and node["gates"]


def test_graph_pages_and_charts(users, big, django_assert_max_num_queries):
    client = api(users["viewer"])
    # permissions (2), campaign, the whole graph (one query): not one per node.
    with django_assert_max_num_queries(4):
        page = client.get(f"/api/campaigns/{big.pk}/graph/").json()
    assert page["count"] == 300 and page["next"] is None
    charts = client.get(f"/api/campaigns/{big.pk}/charts/").json()
    assert charts["funnel"]["data"][0]["x"][0] == 300
    assert charts["fitness"]["data"][2]["y"] == [1.0, 1.0]  # the baseline line


def test_comments_reviews_inbox_through_the_api(users, big):
    node = big.best_node
    eng = api(users["engineer"])
    created = eng.post(
        f"/api/campaigns/{big.pk}/nodes/{node.key}/comments/",
        {"body": "ask @reviewer", "line": 3},
        format="json",
    )
    assert created.status_code == 201 and created.json()["author"] == "engineer"
    rev = api(users["reviewer"])
    inbox = rev.get("/api/inbox/").json()
    assert inbox["mentions"][0]["body"] == "ask @reviewer"
    assert inbox["to_review"][0]["id"] == big.pk
    assert rev.post(f"/api/campaigns/{big.pk}/nodes/{node.key}/review/").status_code == 201
    assert rev.get("/api/inbox/").json()["to_review"] == []
    listed = rev.get(f"/api/campaigns/{big.pk}/nodes/{node.key}/comments/").json()
    assert listed["results"][0]["line"] == 3


def test_viewer_is_refused_with_the_role_named(users, big):
    viewer = api(users["viewer"])
    response = viewer.post(
        f"/api/campaigns/{big.pk}/nodes/n1/comments/", {"body": "x"}, format="json"
    )
    assert response.status_code == 403
    assert "roles that have it: engineer, reviewer, curator, admin" in response.json()["detail"]
    response = viewer.post("/api/campaigns/upload/", {}, format="json")
    assert response.status_code == 403 and "engineer" in response.json()["detail"]
    assert not Comment.objects.exists()


def test_compare_export_portfolio(users, big):
    client = api(users["viewer"])
    compared = client.get(f"/api/campaigns/{big.pk}/compare/?a=n1&b=n2").json()
    assert compared["unified_diff"].startswith("--- n1")
    rows = client.get(f"/api/campaigns/{big.pk}/export/").json()
    assert len({r["node"] for r in rows}) == 300
    csv_text = client.get(f"/api/campaigns/{big.pk}/export/?as=csv").content.decode()
    assert csv_text.startswith("node,round")
    portfolio = client.get("/api/portfolio/").json()
    assert portfolio[0]["family"] == "softmax" and portfolio[0]["improved"] == 1


BROKEN_SOURCE = PROBLEM_SOURCE.replace("torch.softmax(x, dim=-1)", "torch.softmax(x, dim=-1) + y")


def _upload(client, **extra):
    body = {
        "problem_name": "my-softmax",
        "problem_source": PROBLEM_SOURCE,
        "platform": "interpret",
        "budget_candidates": 2,
        **extra,
    }
    return client.post("/api/campaigns/upload/", body, format="json")


@pytest.mark.parametrize(
    ("extra", "field", "message"),
    [
        ({"problem_source": BROKEN_SOURCE}, "source", "NameError: name 'y' is not defined"),
        ({"problem_source": "class Model:\n    pass\n"}, "source", "no top-level get_inputs"),
        (
            {"workload": {"cases": [{"name": "a", "overrides": {"dim": 64}, "wieght": 2}]}},
            "workload",
            "cases[0].wieght: unknown case field",
        ),
        (
            {"workload": {"cases": [{"name": "a", "overrides": {"nope": 64}}]}},
            "workload",
            "overrides.nope: the problem has no such module constant",
        ),
        ({"trace": "batch_size,dim,count\n16,1024,5\n8,512,-3\n"}, "trace", "trace[1].count"),
    ],
)
def test_bad_uploads_create_nothing(users, extra, field, message):
    response = _upload(api(users["engineer"]), **extra)
    assert response.status_code == 400, response.content
    assert message in " ".join(response.json()[field])
    assert not Problem.objects.exists() and not Campaign.objects.exists()


def test_upload_with_a_trace_creates_problem_and_campaign(users, monkeypatch):
    from apps.campaigns.services import campaigns as campaign_services

    monkeypatch.setattr(campaign_services, "_enqueue_step", lambda campaign, countdown=0: None)
    preview = api(users["engineer"]).post(
        "/api/problems/preview/",
        {"source": PROBLEM_SOURCE, "trace": "batch_size,dim,count\n16,1024,30\n4,256,10\n"},
        format="json",
    )
    assert preview.status_code == 200, preview.content
    assert [c["share"] for c in preview.json()["cases"]] == [0.75, 0.25]
    assert preview.json()["reference_check"]["ok"] is True
    response = _upload(api(users["engineer"]), trace="batch_size,dim,count\n16,1024,30\n4,256,10\n")
    assert response.status_code == 201, response.content
    campaign = Campaign.objects.get()
    assert campaign.problem.name == "my-softmax"
    assert [c["weight"] for c in campaign.workload["cases"]] == [30.0, 10.0]


def test_comment_threads_through_the_api(users, big):
    """Reply, resolve and reopen, edit and delete (author or admin only); @mentions are matched
    whatever their case and unknown names are returned to the author."""
    url = f"/api/campaigns/{big.pk}/nodes/n1/comments/"
    eng, rev = api(users["engineer"]), api(users["reviewer"])
    created = eng.post(url, {"body": "ask @Reviewer and @nobody", "line": 2}, format="json")
    assert created.status_code == 201, created.content
    thread = created.json()
    assert thread["notified"] == ["reviewer"] and thread["unknown_mentions"] == ["nobody"]
    assert rev.get("/api/inbox/").json()["mentions"][0]["body"] == "ask @Reviewer and @nobody"

    reply = rev.post(url, {"body": "looks fine", "parent": thread["id"]}, format="json").json()
    assert reply["parent"] == thread["id"] and reply["line"] == 2
    one = f"{url}{thread['id']}/"
    resolved = rev.post(f"{one}resolve/", {}, format="json").json()
    assert resolved["resolved"] is True and resolved["resolved_by"] == "reviewer"
    again = rev.post(f"{one}resolve/", {}, format="json")
    assert again.status_code == 400 and "resolved already" in again.content.decode()
    assert (
        rev.post(f"{one}resolve/", {"resolved": False}, format="json").json()["resolved"] is False
    )

    refused = rev.patch(one, {"body": "mine now"}, format="json")
    assert refused.status_code == 403 and "engineer" in refused.json()["detail"]
    edited = eng.patch(one, {"body": "ask @reviewer (edited)"}, format="json").json()
    assert edited["body"] == "ask @reviewer (edited)" and edited["edited_at"]
    assert rev.delete(one).status_code == 403
    assert api(users["admin"]).delete(f"{url}{reply['id']}/").status_code == 204
    assert eng.delete(one).status_code == 204
    assert eng.get(url).json()["results"] == []
    line = eng.post(url, {"body": "x", "line": 10_000}, format="json")
    assert line.status_code == 400 and "the source has lines 1 to" in line.json()["line"][0]


def test_continue_through_the_api_takes_budget_and_platform(users, big):
    node = big.best_node
    created = api(users["engineer"]).post(
        f"/api/campaigns/{big.pk}/nodes/{node.key}/continue/",
        {"budget_candidates": 2, "platform": "interpret"},
        format="json",
    )
    assert created.status_code == 201, created.content
    campaign = Campaign.objects.get(pk=created.json()["id"])
    assert (campaign.platform, campaign.budget_candidates) == ("interpret", 2)
    refused = api(users["engineer"]).post(
        f"/api/campaigns/{big.pk}/nodes/{node.key}/continue/", {"platform": "rocm"}, format="json"
    )
    assert refused.status_code == 400 and "platform" in refused.json()
