"""A candidate timed before issue 10's paired graph-replay rounds says so on its page: its
numbers are not comparable with the current gate's (the imported H200 demo searches)."""

from pathlib import Path

import pytest
from django.core.management import call_command

from apps.campaigns.models import Campaign
from tests.campaigns.support.builders import build_campaign

DEMO = Path(__file__).resolve().parents[3] / "docs" / "demo"

pytestmark = pytest.mark.django_db


def test_an_imported_search_timed_the_old_way_is_marked(client, users):
    call_command("import_campaign", str(DEMO / "h200-rms_norm.json"))
    campaign = Campaign.objects.get()
    client.force_login(users["viewer"])
    page = client.get(f"/campaigns/{campaign.pk}/nodes/{campaign.best_node.key}/").content
    assert b'id="timing-note"' in page and b"CUDA events around each" in page


def test_a_candidate_timed_with_paired_rounds_is_not_marked(client, users):
    campaign = build_campaign(nodes=5, user=users["engineer"])
    best = campaign.best_node
    for case in best.report["cases"]:  # as the current gate writes them
        case["timing"].update(mode="graph", device_median_ms=case["timing"]["median_ms"])
    best.save(update_fields=["report"])
    client.force_login(users["viewer"])
    page = client.get(f"/campaigns/{campaign.pk}/nodes/{campaign.best_node.key}/").content
    assert b'id="timing-note"' not in page
