"""A workload in training mode (``"mode": "train"``) is said where an author looks before and
after starting the campaign: the workload preview and the campaign's page."""

import pytest

from apps.campaigns.services.campaigns import campaign_create
from apps.campaigns.services.previews import campaign_preview
from apps.campaigns.services.problems import catalog_sync

pytestmark = pytest.mark.django_db

SOURCE = (
    "import torch\nimport torch.nn as nn\n\nc = 4\n\n\n"
    "class Model(nn.Module):\n    def __init__(self, c):\n        super().__init__()\n"
    "        self.bn = nn.BatchNorm1d(c)\n\n"
    "    def forward(self, x):\n        return self.bn(x)\n\n\n"
    "def get_inputs():\n    return [torch.randn(8, c)]\n\n\n"
    "def get_init_inputs():\n    return [c]\n"
)


def test_the_preview_and_the_campaign_page_say_training_mode(client, users):
    trained = campaign_preview(
        platform="interpret", source=SOURCE, workload={"mode": "train", "cases": [{"name": "a"}]}
    )
    assert trained["mode"] == "train"
    assert campaign_preview(platform="cuda", source=SOURCE, workload=None)["mode"] == "eval"

    client.force_login(users["engineer"])
    problem = next(p for p in catalog_sync() if p.name == "rms-norm")
    workload = {"mode": "train", "cases": [{"name": "small", "overrides": {}}]}
    campaign = campaign_create(
        problem=problem, created_by=users["engineer"], workload=workload, start=False
    )
    page = client.get(f"/campaigns/{campaign.pk}/").content.decode()
    assert '<strong id="campaign-mode">training mode</strong>' in page
    plain = campaign_create(problem=problem, created_by=users["engineer"], start=False)
    assert 'id="campaign-mode"' not in client.get(f"/campaigns/{plain.pk}/").content.decode()
