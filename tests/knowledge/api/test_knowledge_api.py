"""The knowledge API: viewers read, curators write, others get 403 saying which role is needed;
list endpoints run a fixed number of queries."""

import pytest
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db
NEEDS_CURATOR = "roles that have it: curator, admin"


def client_for(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_viewer_reads_but_cannot_write(make_entry, people):
    entry = make_entry(tags=["softmax"])
    viewer = client_for(people["viewer"])
    listed = viewer.get("/api/knowledge/entries/").json()
    assert listed["count"] == 1 and listed["results"][0]["tags"] == ["softmax"]
    detail = viewer.get(f"/api/knowledge/entries/{entry.pk}/").json()
    assert detail["body"] == entry.body and detail["version"] == 1
    assert viewer.get(f"/api/knowledge/entries/{entry.pk}/versions/").json()["count"] == 1
    for role in ("viewer", "engineer"):
        client = client_for(people[role])
        for method, url, data in [
            ("post", "/api/knowledge/entries/", {"title": "t", "body": "b", "kind": "pattern"}),
            ("patch", f"/api/knowledge/entries/{entry.pk}/", {"body": "x", "reason": "r"}),
            ("post", f"/api/knowledge/entries/{entry.pk}/curate/", {"action": "retire"}),
            ("post", f"/api/knowledge/entries/{entry.pk}/revert/", {"version": 1}),
            ("post", "/api/knowledge/retire/", {"ids": [entry.pk], "reason": "r"}),
            ("post", "/api/knowledge/import/", {"files": []}),
        ]:
            response = getattr(client, method)(url, data, format="json")
            assert response.status_code == 403, (role, url)
            assert NEEDS_CURATOR in response.json()["detail"]


def test_anonymous_gets_401():
    assert APIClient().get("/api/knowledge/entries/").status_code == 401


def test_curator_writes_through_the_services(people):
    curator = client_for(people["curator"])
    created = curator.post(
        "/api/knowledge/entries/",
        {
            "title": "Use fp32 accumulation",
            "body": "Accumulate in **fp32**.",
            "kind": "pattern",
            "tags": ["fp32"],
            "platforms": ["cuda"],
            "provenance": {"triton": "3.6.0"},
        },
        format="json",
    )
    assert created.status_code == 201, created.json()
    pk = created.json()["id"]
    missing_reason = curator.patch(f"/api/knowledge/entries/{pk}/", {"body": "x"}, format="json")
    assert missing_reason.status_code == 400 and "reason" in missing_reason.json()
    bad_kind = curator.patch(
        f"/api/knowledge/entries/{pk}/", {"kind": "rumour", "reason": "r"}, format="json"
    )
    assert bad_kind.status_code == 400
    revised = curator.patch(
        f"/api/knowledge/entries/{pk}/", {"body": "Changed.", "reason": "clearer"}, format="json"
    )
    assert revised.json()["version"] == 2
    reverted = curator.post(
        f"/api/knowledge/entries/{pk}/revert/", {"version": 1, "reason": "undo"}, format="json"
    )
    assert reverted.json()["body"] == "Accumulate in **fp32**." and reverted.json()["version"] == 3
    bad = curator.post(f"/api/knowledge/entries/{pk}/curate/", {"action": "accept"}, format="json")
    assert bad.status_code == 400 and "cannot accept an entry that is active" in str(bad.json())
    retired = curator.post("/api/knowledge/retire/", {"ids": [pk], "reason": "old"}, format="json")
    assert retired.json()[0]["status"] == "retired"
    versions = curator.get(f"/api/knowledge/entries/{pk}/versions/").json()["results"]
    assert [v["number"] for v in versions] == [4, 3, 2, 1]
    assert versions[0]["author"] == "curator" and versions[0]["reason"] == "old"


def test_import_and_export_over_the_api(make_entry, people):
    make_entry(slug="one", tags=["a"])
    files = client_for(people["viewer"]).get("/api/knowledge/export/").json()
    assert [f["name"] for f in files] == ["one.md"]
    text = files[0]["content"].replace("slug: one", "slug: two")
    result = client_for(people["curator"]).post(
        "/api/knowledge/import/", {"files": [{"name": "two.md", "content": text}]}, format="json"
    )
    assert result.json()["created"] == ["two"]


@pytest.mark.parametrize("url", ["/api/knowledge/entries/", "/api/knowledge/entries/?q=softmax"])
def test_list_query_count_does_not_grow_with_entries(
    url, make_entry, people, django_assert_max_num_queries
):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    viewer = client_for(people["insider"])

    def count() -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert viewer.get(url).status_code == 200
        return len(ctx.captured_queries)

    for i in range(3):
        make_entry(title=f"softmax note {i}", visibility="restricted", group=people["group"])
    count()  # the first request also caches the user's permissions
    few = count()
    for i in range(12):
        make_entry(title=f"softmax more {i}", tags=["softmax", str(i)])
    assert count() == few
    with django_assert_max_num_queries(4):
        viewer.get(url)


def test_writes_refuse_a_past_expiry_and_unknown_platforms(people):
    curator = client_for(people["curator"])
    entry = {"title": "t", "body": "b", "kind": "pattern"}
    past = curator.post(
        "/api/knowledge/entries/", {**entry, "expires_on": "2020-01-01"}, format="json"
    )
    assert past.status_code == 400
    assert "2020-01-01 is in the past" in past.json()["expires_on"][0]
    rocm = curator.post("/api/knowledge/entries/", {**entry, "platforms": ["rocm"]}, format="json")
    assert rocm.status_code == 400 and "unknown platform 'rocm'" in rocm.json()["platforms"][0]
    pk = curator.post("/api/knowledge/entries/", entry, format="json").json()["id"]
    patched = curator.patch(
        f"/api/knowledge/entries/{pk}/", {"platforms": ["gpu"], "reason": "r"}, format="json"
    )
    assert patched.status_code == 400 and "unknown platform 'gpu'" in str(patched.json())


def test_search_keeps_unicode_and_ignores_symbols(make_entry, people):
    make_entry(title="Notes on ünïcødé kernels")
    make_entry(title="Checked ✓ note")
    viewer = client_for(people["viewer"])
    found = viewer.get("/api/knowledge/entries/", {"q": "ünïcødé"}).json()
    assert [e["title"] for e in found["results"]] == ["Notes on ünïcødé kernels"]
    assert viewer.get("/api/knowledge/entries/", {"q": "✓"}).json()["count"] == 0
