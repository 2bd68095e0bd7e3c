"""The demo seed freezes the imported GPU campaigns' best candidates (once)."""

import json
from pathlib import Path

import pytest
from django.contrib.auth.models import User

from apps.accounts.services import demo_users_seed
from apps.campaigns.services.imports import campaign_import
from apps.campaigns.services.problems import catalog_sync
from apps.registry.models import Artifact
from apps.registry.services.demo import registry_demo_seed

DEMO = Path(__file__).resolve().parents[3] / "docs" / "demo"


@pytest.mark.django_db
def test_demo_seed_freezes_imported_gpu_candidates_once():
    demo_users_seed()
    catalog_sync()
    summaries = [json.loads(f.read_text()) for f in sorted(DEMO.glob("*.json"))]
    improved = [s for s in summaries if s["outcome"] == "improved"]
    if not improved:
        pytest.skip("no imported GPU campaign with an accepted candidate in docs/demo")
    campaign_import(summary=improved[0], created_by=User.objects.get(username="engineer"))
    lines = registry_demo_seed()
    artifact = Artifact.objects.get()
    assert artifact.region.platform == "cuda" and artifact.stage == "shadow", lines
    assert artifact.body["binaries"] or artifact.body["evidence"]["gates"]
    registry_demo_seed()
    assert Artifact.objects.count() == 1
