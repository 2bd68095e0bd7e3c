"""The inbox lists the promotions a reviewer may approve, never their own campaign's."""

import pytest
from django.test import Client

from apps.registry.selectors.registry import approvals_awaiting
from apps.registry.services import artifact_approve, artifact_create, artifact_promote

pytestmark = pytest.mark.django_db


def test_inbox_shows_what_this_reviewer_may_approve(node, users):
    artifact = artifact_create(node=node, by=users["reviewer"])
    assert list(approvals_awaiting(user=users["reviewer"])) == [artifact]
    assert list(approvals_awaiting(user=users["author"])) == [], "authors never approve"
    assert list(approvals_awaiting(user=users["viewer"])) == []

    client = Client()
    client.force_login(users["reviewer"])
    page = client.get("/campaigns/inbox/").content.decode()
    assert f"#{artifact.pk}" in page and "Promotions awaiting your approval" in page
    api = client.get("/api/inbox/").json()
    assert api["to_approve"][0]["id"] == artifact.pk
    assert api["to_approve"][0]["stage"] == "candidate"

    artifact_approve(artifact=artifact, by=users["reviewer"])
    assert list(approvals_awaiting(user=users["reviewer"])) == [], "approved: nothing awaits"
    artifact_promote(artifact=artifact, by=users["reviewer"])
    assert list(approvals_awaiting(user=users["reviewer"])) == [artifact], "next stage awaits"
