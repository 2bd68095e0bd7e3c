"""An incumbent (the kernel a team serves today) given with a campaign, in the page and the API
(issue 11: "an incumbent where given"): refused in words when it cannot serve, kept across a
form error like the other uploads, carried to the search's engine and shown on the campaign."""

import re
from html import unescape
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from apps.campaigns.models import Campaign
from apps.campaigns.services.problems import catalog_sync

pytestmark = pytest.mark.django_db

LIGER = Path(__file__).resolve().parents[3] / "workers/catalog/peers/liger/rms_norm.py"


def _form(problem, **extra) -> dict:
    return {
        "problem": problem.pk,
        "platform": "cuda",
        "generators": ["template"],
        "policy": "best_first",
        "budget_candidates": 4,
        "budget_device_seconds": 60,
        "budget_wall_seconds": 60,
        "baseline": "incumbent",
        "regression_tolerance": 0.02,
        **extra,
    }


def _hidden(html: str, name: str) -> str:
    match = re.search(rf'<input type="hidden" name="{name}" value="([^"]*)"', html)
    return unescape(match.group(1)) if match else ""


@pytest.fixture
def rms_norm():
    return next(p for p in catalog_sync() if p.name == "rms-norm")


def test_the_page_refuses_an_incumbent_that_cannot_serve_and_says_why(client, users, rms_norm):
    client.force_login(users["engineer"])
    none = client.post("/campaigns/new/", _form(rms_norm))
    assert none.status_code == 400
    assert "the Incumbent baseline needs the incumbent kernel" in none.content.decode()

    broken = SimpleUploadedFile("served.py", b"import torch\nclass ModelNew(:\n    pass\n")
    page = client.post("/campaigns/new/", _form(rms_norm, incumbent_file=broken))
    html = page.content.decode()
    assert page.status_code == 400
    assert "not Python: line 2" in html and 'id="incumbent-not-kept"' in html
    assert _hidden(html, "incumbent_source") == ""

    other = SimpleUploadedFile("served.py", b"class Model:\n    pass\n")
    page = client.post("/campaigns/new/", _form(rms_norm, incumbent_file=other))
    assert "defines no class ModelNew" in page.content.decode()
    assert not Campaign.objects.exists()


def test_an_incumbent_survives_a_form_error_and_reaches_the_search(client, users, rms_norm):
    client.force_login(users["engineer"])
    source = LIGER.read_text()
    upload = SimpleUploadedFile("liger_rms_norm.py", source.encode())
    page = client.post(
        "/campaigns/new/", _form(rms_norm, budget_candidates=0, incumbent_file=upload)
    )
    html = page.content.decode()
    assert page.status_code == 400
    assert "Kept from your last submit: the incumbent <strong>liger_rms_norm.py</strong>" in html
    kept = {name: _hidden(html, name) for name in ("incumbent_source", "incumbent_filename")}
    assert kept["incumbent_source"] == source

    done = client.post("/campaigns/new/", _form(rms_norm, baseline="best", **kept))
    assert done.status_code == 302
    campaign = Campaign.objects.get()
    assert campaign.incumbent_source == source and campaign.incumbent_name == "liger_rms_norm.py"
    assert campaign.engine_state["config"]["incumbent_source"] == source
    detail = client.get(f"/campaigns/{campaign.pk}/").content.decode()
    assert "Incumbent: <strong>liger_rms_norm.py</strong>" in detail
    assert "one of the peers" in detail
    assert "the fastest of torch.compile, max-autotune and the incumbent" in detail


def test_the_api_takes_an_incumbent_and_refuses_one_without_modelnew(users, rms_norm):
    api = APIClient()
    api.force_authenticate(users["engineer"])
    body = {"problem": rms_norm.name, "platform": "cuda", "baseline": "incumbent"}
    missing = api.post("/api/campaigns/", body, format="json")
    assert missing.status_code == 400
    assert "needs the incumbent kernel" in str(missing.json()["incumbent_source"])
    wrong = api.post("/api/campaigns/", {**body, "incumbent_source": "x = 1\n"}, format="json")
    assert wrong.status_code == 400 and "no class ModelNew" in str(wrong.json())
    made = api.post(
        "/api/campaigns/",
        {**body, "incumbent_source": LIGER.read_text(), "incumbent_name": "liger"},
        format="json",
    )
    assert made.status_code == 201, made.content
    assert made.json()["incumbent_name"] == "liger" and made.json()["baseline"] == "incumbent"
