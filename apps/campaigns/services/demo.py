"""Demo data: the catalog, a few campaigns for the local worker, imported GPU searches and
benchmark-suite runs (docs/demo/suites/)."""

import json
from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import User

from apps.campaigns.models import Campaign
from apps.campaigns.services.campaigns import campaign_create
from apps.campaigns.services.imports import campaign_import
from apps.campaigns.services.problems import catalog_sync
from apps.campaigns.services.suites import suite_run_import

DEMO_CAMPAIGNS = [("softmax", 8), ("rms-norm", 8), ("gelu", 6), ("layer-norm", 6)]
DEMO_GPU_DIR = Path(settings.BASE_DIR) / "docs" / "demo"
DEMO_SUITES_DIR = DEMO_GPU_DIR / "suites"


def demo_campaigns_seed() -> list[str]:
    """Load the catalog; on an empty database, start demo campaigns and import GPU searches and
    suite runs (each named after its file)."""
    problems = {p.name: p for p in catalog_sync()}
    lines = [f"catalog: {len(problems)} problems"]
    if Campaign.objects.exists():
        return [*lines, "campaigns exist already: none added"]
    author = User.objects.get(username="engineer")
    for gpu_file in sorted(DEMO_GPU_DIR.glob("*.json")):
        campaign = campaign_import(summary=json.loads(gpu_file.read_text()), created_by=author)
        lines.append(f"imported {gpu_file.name} as campaign {campaign.pk} ({campaign.outcome})")
    for suite_file in sorted(DEMO_SUITES_DIR.glob("*.json")):
        run = suite_run_import(
            doc=json.loads(suite_file.read_text()), name=suite_file.stem, imported_by=author
        )
        lines.append(f"imported {suite_file.name} as suite run {run.pk}")
    for name, budget in DEMO_CAMPAIGNS:
        campaign = campaign_create(
            problem=problems[name], created_by=author, budget_candidates=budget
        )
        lines.append(f"campaign {campaign.pk}: {campaign.name}, {budget} candidates")
    return lines
