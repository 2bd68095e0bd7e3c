"""A 404 is the portal's page (JSON under /api/), under DEBUG (`make run`) too, where Django
would show its technical page listing every route; `/api/` itself says where to start."""

import pytest
from django.contrib.auth.models import Group
from django.test import Client

from apps.accounts.services import user_upsert
from apps.knowledge.services.entries import knowledge_entry_create

pytestmark = pytest.mark.django_db

TECHNICAL = "DEBUG = True"


@pytest.fixture(params=[True, False], ids=["debug", "no-debug"])
def debug(request, settings):
    settings.DEBUG = request.param
    return request.param


@pytest.fixture
def viewer():
    client = Client()
    client.force_login(user_upsert(username="viewer", password="viewer-pw", roles=["viewer"]))
    return client


def test_api_root_lists_where_to_start(debug, viewer):
    response = viewer.get("/api/")
    assert response.status_code == 200
    links = response.json()
    assert links["schema"].endswith("/api/schema/") and links["docs"].endswith("/api/docs/")
    assert links["campaigns"].endswith("/api/campaigns/")


def test_unknown_api_path_is_a_json_404(debug, viewer):
    response = viewer.get("/api/nothing-here/")
    assert response.status_code == 404
    assert response.json() == {"detail": "Not found."}
    missing = viewer.get("/api/campaigns/999999/")
    assert missing.status_code == 404 and "detail" in missing.json()


def test_unknown_page_is_the_portals_404(debug, viewer):
    response = viewer.get("/nowhere/at/all/")
    assert response.status_code == 404
    page = response.content.decode()
    assert TECHNICAL not in page and "urlpatterns" not in page
    assert "There is no page at /nowhere/at/all/." in page and 'class="topbar"' in page
    assert viewer.get("/campaigns").status_code == 301, "a missing slash still redirects"


def test_hidden_knowledge_entry_is_the_portals_404(debug, viewer):
    partners = Group.objects.create(name="hopper-partners")
    entry = knowledge_entry_create(
        by=None,
        title="Proprietary trick",
        body="Unreleased.",
        kind="pattern",
        visibility="restricted",
        group=partners,
    )
    response = viewer.get(f"/knowledge/{entry.pk}/")
    assert response.status_code == 404
    page = response.content.decode()
    assert TECHNICAL not in page and "Proprietary" not in page
    assert 'id="not-found-message"' in page and "No such entry" in page
