"""Login, logout, roles on pages and in the API, tokens, the published schema."""

import re

import pytest
from django.test import Client
from drf_spectacular.validation import validate_schema
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db


@pytest.fixture
def users(db):
    from apps.accounts.services import demo_users_seed

    return {username: password for username, password, _ in demo_users_seed()}


def test_anonymous_users_see_only_the_login_page(client: Client):
    for url in ["/", "/campaigns/", "/registry/", "/knowledge/", "/campaigns/inbox/"]:
        response = client.get(url)
        assert response.status_code == 302
        assert response["Location"].startswith("/accounts/login/?next=")
    assert client.get("/accounts/login/").status_code == 200


def test_login_shows_navigation_and_logout_ends_the_session(client: Client, users):
    response = client.post(
        "/accounts/login/", {"username": "viewer", "password": users["viewer"]}, follow=True
    )
    page = response.content.decode()
    for section in ["Campaigns", "Registry", "Knowledge", "Inbox"]:  # the inbox with its badge
        assert re.search(rf"<a [^>]*>{section}( <span [^>]*></span>)?</a>", page), section
    assert "viewer" in page
    client.post("/accounts/logout/")
    assert client.get("/campaigns/").status_code == 302


def test_wrong_password_is_refused_with_a_message(client: Client, users):
    response = client.post("/accounts/login/", {"username": "viewer", "password": "nope"})
    assert response.status_code == 200
    assert "didn't match" in response.content.decode()


def test_role_restricted_page_says_which_role_is_needed(client: Client, users):
    client.login(username="viewer", password=users["viewer"])
    response = client.get("/accounts/team/")
    assert response.status_code == 403
    assert "roles that have it: admin" in response.content.decode()
    client.login(username="admin", password=users["admin"])
    assert client.get("/accounts/team/").status_code == 200


def test_api_refuses_anonymous_with_401_and_wrong_role_with_403(users):
    api = APIClient()
    assert api.get("/api/me/").status_code == 401
    api.login(username="engineer", password=users["engineer"])
    assert api.get("/api/me/").json()["roles"] == ["engineer"]
    refused = api.get("/api/team/")
    assert refused.status_code == 403
    assert "manage_team" not in refused.json()["detail"]
    assert "admin" in refused.json()["detail"]


def test_token_authentication(users):
    api = APIClient()
    bad = api.post("/api/auth/token/", {"username": "reviewer", "password": "wrong"})
    assert bad.status_code == 400
    token = api.post(
        "/api/auth/token/", {"username": "reviewer", "password": users["reviewer"]}
    ).json()["token"]
    api.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    me = api.get("/api/me/").json()
    assert me["username"] == "reviewer"
    assert "accounts.approve_promotion" in me["permissions"]
    api.credentials(HTTP_AUTHORIZATION="Token not-a-token")
    assert api.get("/api/me/").status_code == 401


def test_roles_carry_the_permissions_design_gives_them(users):
    from django.contrib.auth.models import User

    def can(username, codename):
        return User.objects.get(username=username).has_perm(f"accounts.{codename}")

    assert can("viewer", "view_portal") and not can("viewer", "author_campaign")
    assert can("engineer", "author_campaign") and not can("engineer", "approve_promotion")
    assert can("reviewer", "approve_promotion") and can("reviewer", "rollback_artifact")
    assert can("curator", "curate_knowledge") and not can("curator", "author_campaign")
    assert all(can("admin", c) for c in ["manage_team", "curate_knowledge", "rollback_artifact"])


def test_openapi_schema_is_published_and_valid(users):
    api = APIClient()
    api.login(username="viewer", password=users["viewer"])
    response = api.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    schema = response.json()
    validate_schema(schema)
    assert "/api/me/" in schema["paths"] and "/api/auth/token/" in schema["paths"]
    docs = api.get("/api/docs/")
    assert docs.status_code == 200
    assert "cdn" not in docs.content.decode().lower()


def test_anonymous_users_cannot_read_the_schema_or_the_docs(client: Client):
    schema = client.get("/api/schema/")
    assert schema.status_code == 401
    docs = client.get("/api/docs/")
    assert docs.status_code == 302 and docs["Location"].startswith("/accounts/login/?next=")
    assert client.get("/api/docs/?script").status_code == 302


def test_asking_for_a_token_again_keeps_other_clients_working(users):
    def ask(**extra):
        body = {"username": "reviewer", "password": users["reviewer"], **extra}
        return APIClient().post("/api/auth/token/", body, format="json").json()["token"]

    def works(token) -> bool:
        api = APIClient()
        api.credentials(HTTP_AUTHORIZATION=f"Token {token}")
        return api.get("/api/me/").status_code == 200

    first = ask()
    assert ask() == first and works(first)  # a second client gets the same token
    rotated = ask(rotate=True)
    assert rotated != first and works(rotated) and not works(first)


def test_a_refused_request_logs_one_line_not_a_traceback(client: Client, users, caplog):
    import logging

    client.login(username="viewer", password=users["viewer"])
    with caplog.at_level(logging.WARNING, logger="django.request"):
        assert client.get("/accounts/team/").status_code == 403
    refused = [r for r in caplog.records if r.name == "django.request"]
    assert refused and "Forbidden" in refused[0].getMessage()
    assert all(r.exc_info is None for r in refused)
