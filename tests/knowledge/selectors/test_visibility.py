"""A restricted entry is seen only by its group and by the knowledge base's curators and admins:
in the selector, full-text search, pages and the API. Retrieval for prompts (bound to the
campaign owner) follows group membership alone, curators and admins included."""

import pytest
from django.test import Client
from rest_framework.test import APIClient

from apps.campaigns.models import Campaign, Problem
from apps.knowledge.selectors.entries import entries_visible
from apps.knowledge.selectors.retrieval import knowledge_retrieve
from apps.knowledge.selectors.search import entry_search

pytestmark = pytest.mark.django_db
QUERY = {"problem_name": "softmax", "family": "softmax", "platform": "cuda", "mode": "seed"}


def test_selector_and_search(secret, make_entry, people):
    make_entry(title="Public softmax note", families=["softmax"])
    assert secret in entries_visible(user=people["insider"])
    # Curators and admins oversee every entry, in the group or not (issue 12, defect 6).
    assert secret in entries_visible(user=people["curator"])
    assert secret in entries_visible(user=people["admin"])
    assert secret not in entries_visible(user=people["viewer"])
    assert secret not in entries_visible(user=people["engineer"])
    assert secret not in entries_visible(user=None)
    for user in ("insider", "curator", "admin"):
        found = entry_search(user=people[user], text="TMA descriptor")
        assert [e.pk for e in found] == [secret.pk], user
    assert entry_search(user=people["viewer"], text="TMA descriptor") == []


def test_retrieval_for_prompts(secret, people):
    assert [h["id"] for h in knowledge_retrieve(user=people["insider"], query=QUERY)] == [secret.pk]
    assert knowledge_retrieve(user=people["viewer"], query=QUERY) == []
    assert knowledge_retrieve(user=None, query=QUERY) == []
    # Seeing an entry as a curator or admin does not put it into their campaigns' prompts.
    assert knowledge_retrieve(user=people["curator"], query=QUERY) == []
    assert knowledge_retrieve(user=people["admin"], query=QUERY) == []


def test_the_search_engine_retrieves_as_the_campaign_owner(secret, people):
    from apps.campaigns.services.search import _engine

    problem = Problem.objects.create(name="softmax", title="softmax", family="softmax", source="")

    def engine_for(owner):
        campaign = Campaign.objects.create(
            name="c", problem=problem, platform="cuda", created_by=owner, engine_state={}
        )
        campaign.engine_state = {"config": {"generators": [], "policy": "best_first"}}
        campaign.engine_state["config"]["policy_args"] = {}
        return _engine(campaign)

    assert [h["id"] for h in engine_for(people["insider"]).retrieve(QUERY)] == [secret.pk]
    assert engine_for(people["engineer"]).retrieve(QUERY) == []
    assert engine_for(None).retrieve(QUERY) == []


def test_pages_hide_it_from_outsiders(secret, people):
    outsider, insider = Client(), Client()
    outsider.force_login(people["viewer"])
    insider.force_login(people["insider"])
    url = f"/knowledge/{secret.pk}/"
    assert outsider.get(url).status_code == 404
    assert outsider.get(url + "history/").status_code == 404
    assert secret.title not in outsider.get("/knowledge/?q=TMA").content.decode()
    assert secret.title not in outsider.get("/knowledge/").content.decode()
    assert secret.title in insider.get("/knowledge/?q=TMA").content.decode()
    assert secret.title in insider.get(url).content.decode()
    for role in ("curator", "admin"):
        client = Client()
        client.force_login(people[role])
        assert client.get(url).status_code == 200, role
        assert secret.title in client.get("/knowledge/?q=TMA").content.decode(), role


def test_api_hides_it_from_outsiders(secret, people):
    outsider, insider = APIClient(), APIClient()
    outsider.force_authenticate(people["viewer"])
    insider.force_authenticate(people["insider"])
    assert outsider.get(f"/api/knowledge/entries/{secret.pk}/").status_code == 404
    assert outsider.get("/api/knowledge/entries/?q=TMA").json()["count"] == 0
    assert insider.get("/api/knowledge/entries/?q=TMA").json()["count"] == 1
    assert outsider.post("/api/knowledge/retrieve/", QUERY, format="json").json() == []
    hits = insider.post("/api/knowledge/retrieve/", QUERY, format="json").json()
    assert [h["id"] for h in hits] == [secret.pk]
    exported = outsider.get("/api/knowledge/export/").json()
    assert all(secret.slug not in f["name"] for f in exported)
    curator = APIClient()
    curator.force_authenticate(people["curator"])
    assert curator.get(f"/api/knowledge/entries/{secret.pk}/").status_code == 200
    assert curator.post("/api/knowledge/retrieve/", QUERY, format="json").json() == []
