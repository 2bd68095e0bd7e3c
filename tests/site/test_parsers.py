"""JSON request bodies: one hostile body must not crash the API (400/413 with a reason)."""

import pytest

from apps.accounts.services import user_upsert

pytestmark = pytest.mark.django_db


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize("depth", [65, 1_000, 20_000, 100_000])
def test_deeply_nested_json_to_the_unauthenticated_token_endpoint_is_a_400(client, depth):
    response = client.post("/api/auth/token/", _nested(depth), content_type="application/json")
    assert response.status_code == 400
    assert "nested deeper than 64 levels" in response.json()["detail"]


def test_deeply_nested_json_to_an_authenticated_endpoint_is_a_400(client):
    client.force_login(user_upsert(username="parse-engineer", password="pw", roles=["engineer"]))
    body = '{"problem": "softmax", "platform": ' + _nested(50_000) + "}"
    response = client.post("/api/knowledge/retrieve/", body, content_type="application/json")
    assert response.status_code == 400
    assert "nested deeper" in response.json()["detail"]


def test_ordinary_json_still_parses(client):
    user_upsert(username="parse-user", password="pw-parse-1", roles=["viewer"])
    response = client.post(
        "/api/auth/token/",
        {"username": "parse-user", "password": "pw-parse-1"},
        content_type="application/json",
    )
    assert response.status_code == 200 and response.json()["token"]
    bad = client.post("/api/auth/token/", "{not json", content_type="application/json")
    assert bad.status_code == 400 and "JSON parse error" in bad.json()["detail"]
