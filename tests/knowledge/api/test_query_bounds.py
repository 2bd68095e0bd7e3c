"""Oversized knowledge queries are refused with a 400 naming the field, never passed into a
LIKE pattern (SQLite: "LIKE or GLOB pattern too complex") or a database column."""

import pytest
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db
MEGABYTE = "x" * 1_000_000


def client_for(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("platform", MEGABYTE),
        ("family", MEGABYTE),
        ("problem_name", MEGABYTE),
        ("mode", MEGABYTE),
        ("feedback", {"gate": "correctness", "reason": MEGABYTE}),
    ],
)
def test_retrieve_with_an_oversized_field_is_a_400(make_entry, people, field, value):
    make_entry(platforms=["cuda"], families=["softmax"])
    response = client_for(people["viewer"]).post(
        "/api/knowledge/retrieve/", {"problem_name": "softmax", field: value}, format="json"
    )
    assert response.status_code == 400
    assert "at most" in str(response.json()[field]) or "no more than" in str(response.json()[field])


@pytest.mark.parametrize("param", ["platform", "family", "tag", "q"])
def test_entry_list_with_an_oversized_filter_is_a_400(make_entry, people, param):
    make_entry(tags=["softmax"])
    response = client_for(people["viewer"]).get("/api/knowledge/entries/", {param: MEGABYTE})
    assert response.status_code == 400
    assert param in response.json()


def test_entry_list_filters_still_work(make_entry, people):
    make_entry(tags=["softmax"], platforms=["cuda"])
    client = client_for(people["viewer"])
    assert client.get("/api/knowledge/entries/", {"tag": "softmax"}).json()["count"] == 1
    assert client.get("/api/knowledge/entries/", {"tag": "gemm"}).json()["count"] == 0
    assert client.get("/api/knowledge/entries/", {"q": "softmax row"}).json()["count"] == 1


def test_entry_labels_longer_than_their_column_are_a_400(people):
    response = client_for(people["curator"]).post(
        "/api/knowledge/entries/",
        {"title": "t", "body": "b", "kind": "pattern", "tags": [f"tag{i}" for i in range(200)]},
        format="json",
    )
    assert response.status_code == 400
    assert "at most 500 characters" in str(response.json()["tags"])


def test_bulk_retire_with_an_id_past_the_column_is_a_400(people):
    response = client_for(people["curator"]).post(
        "/api/knowledge/retire/", {"ids": [10**30], "reason": "r"}, format="json"
    )
    assert response.status_code == 400
    assert "less than or equal to" in str(response.json()["ids"])
