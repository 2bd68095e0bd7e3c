"""A candidate page shows the knowledge its generator was given, within the viewer's visibility."""

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client

from apps.accounts.services import demo_users_seed
from apps.knowledge.services.entries import knowledge_entry_create
from tests.campaigns.support.builders import build_campaign

pytestmark = pytest.mark.django_db


def test_candidate_page_lists_retrieved_knowledge_the_viewer_may_see():
    demo_users_seed()
    curator = User.objects.get(username="curator")
    secret_group = Group.objects.create(name="hw-partners")
    public = knowledge_entry_create(
        by=curator,
        title="Hopper copy bandwidth is 4.16 TB/s",
        body="measured",
        kind="hardware_rule",
    )
    restricted = knowledge_entry_create(
        by=curator,
        title="Unreleased accelerator tile limits",
        body="confidential",
        kind="hardware_rule",
        visibility="restricted",
        group=secret_group,
    )
    campaign = build_campaign(nodes=3, user=User.objects.get(username="engineer"))
    node = campaign.nodes.get(key="n1")
    node.retrieved_knowledge = [public.pk, restricted.pk]
    node.save(update_fields=["retrieved_knowledge"])

    client = Client()
    client.force_login(User.objects.get(username="viewer"))
    page = client.get(f"/campaigns/{campaign.pk}/nodes/n1/").content.decode()
    assert "Knowledge given to the generator" in page
    assert public.title in page
    assert restricted.title not in page

    insider = User.objects.get(username="engineer2")
    insider.groups.add(secret_group)
    client.force_login(insider)
    assert restricted.title in client.get(f"/campaigns/{campaign.pk}/nodes/n1/").content.decode()
