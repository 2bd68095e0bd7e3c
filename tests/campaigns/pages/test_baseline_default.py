"""A new campaign is judged against torch.compile unless its author picks another peer (issue
11: "what users already have is torch.compile"), and its page says against which peer every
case was judged; on the interpreter, that nothing is timed."""

import pytest
from rest_framework.test import APIClient

from apps.campaigns.services.campaigns import campaign_create
from apps.campaigns.services.problems import catalog_sync

pytestmark = pytest.mark.django_db


def test_the_form_and_the_api_default_to_compile_and_the_page_says_so(client, users):
    client.force_login(users["engineer"])
    form = client.get("/campaigns/new/").content.decode()
    assert '<option value="compile" selected>torch.compile</option>' in form

    problem = next(p for p in catalog_sync() if p.name == "rms-norm")
    api = APIClient()
    api.force_authenticate(users["engineer"])
    made = api.post(
        "/api/campaigns/",
        {"problem": problem.name, "platform": "cuda", "name": "on the gpu"},
        format="json",
    )
    assert made.status_code == 201, made.content
    assert made.json()["baseline"] == "compile"

    gpu = campaign_create(
        problem=problem, created_by=users["engineer"], platform="cuda", start=False
    )
    page = client.get(f"/campaigns/{gpu.pk}/").content.decode()
    assert (
        'judged against <strong id="campaign-baseline">torch.compile</strong> on every case '
        "(eager timed beside it)" in page
    )
    local = campaign_create(problem=problem, created_by=users["engineer"], start=False)
    page = client.get(f"/campaigns/{local.pk}/").content.decode()
    assert "baseline torch.compile (not timed on interpret)" in page
