"""The preview of a campaign (`services.previews.campaign_preview`): which workload it will run,
each case's share of the weight, and on `interpret` the smaller shapes each case is checked at
instead of those asked; a reference that fails is refused naming the field."""

import pytest
from django.core.exceptions import ValidationError

from apps.campaigns.services.previews import campaign_preview

SOURCE = (
    "import torch\nimport torch.nn as nn\n\nn = 64\nrows = 4\n\n\n"
    "class Model(nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n\n\n"
    "def get_inputs():\n    return [torch.randn(rows, n)]\n\n\n"
    "def get_init_inputs():\n    return []\n"
)
WORKLOAD = {
    "cases": [
        {"name": "small", "overrides": {"n": 64}, "weight": 1},
        {"name": "large", "overrides": {"n": 1 << 20, "rows": 8}, "weight": 3},
    ]
}


def test_an_interpret_preview_says_which_smaller_shapes_it_checks():
    got = campaign_preview(platform="interpret", source=SOURCE, workload=WORKLOAD)
    assert got["interpret"] and got["workload"] == "uploaded"
    small, large = got["cases"]
    assert (small["share"], large["share"]) == (0.25, 0.75)
    assert small["scaled"] is None and small["shrunk"] == []
    # 8 x 2^20 is over the interpreter's cap: checked smaller, and it says how much smaller
    assert got["scaled_cases"] == 1 and large["shrunk"]
    shrunk = {s["name"]: s for s in large["shrunk"]}
    assert shrunk["n"]["asked"] == 1 << 20 and shrunk["n"]["checked"] < 1 << 20
    assert large["checked_overrides"]["n"] == shrunk["n"]["checked"]


def test_a_cuda_preview_runs_the_cases_as_asked():
    got = campaign_preview(platform="cuda", source=SOURCE, workload=WORKLOAD)
    assert not got["interpret"] and got["scaled_cases"] == 0
    assert all(c["checked_overrides"] is None for c in got["cases"])


def test_a_reference_that_fails_is_refused_naming_the_source():
    broken = SOURCE.replace("torch.relu(x)", "x @ x")
    with pytest.raises(ValidationError) as raised:
        campaign_preview(platform="interpret", source=broken, workload=None)
    assert "the reference failed" in " ".join(raised.value.message_dict["source"])
