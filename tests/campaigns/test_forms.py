"""The campaign author form: hostile uploads are refused with a reason, not a server error."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

pytestmark = pytest.mark.django_db

PROBLEM = b"""import torch
class Model(torch.nn.Module):
    def forward(self, x):
        return x
def get_inputs():
    return [torch.ones(4)]
def get_init_inputs():
    return []
"""


def _author(client, **files):
    return client.post(
        "/campaigns/new/",
        {
            "problem_file": SimpleUploadedFile("deep.py", PROBLEM),
            "problem_name": "deep",
            "platform": "interpret",
            "generators": ["template"],
            "policy": "best_first",
            "budget_candidates": 4,
            "budget_device_seconds": 60,
            "budget_wall_seconds": 60,
            "baseline": "eager",
            "regression_tolerance": 0.02,
            "preview": "1",
            **files,
        },
    )


def test_a_deeply_nested_workload_upload_is_refused_on_the_page(client, users):
    client.force_login(users["engineer"])
    deep = b'{"cases": ' + b"[" * 50_000 + b"]" * 50_000 + b"}"
    response = _author(client, workload_file=SimpleUploadedFile("w.json", deep))
    assert response.status_code == 400
    assert "nested deeper than 64 levels" in response.content.decode()


def test_a_damaged_carried_workload_is_refused_on_the_page(client, users):
    client.force_login(users["engineer"])
    response = _author(client, workload_json="[" * 50_000 + "]" * 50_000)
    assert response.status_code == 400
    assert "the previewed workload was damaged" in response.content.decode()


def test_the_llm_generator_without_an_endpoint_is_refused_with_the_reason(
    client, users, monkeypatch
):
    from apps.campaigns.models import Campaign, Problem
    from apps.campaigns.services.problems import catalog_sync

    monkeypatch.delenv("KERNELEVOLVE_LLM_URL", raising=False)
    problem = next(p for p in catalog_sync() if p.name == "softmax")
    client.force_login(users["engineer"])
    form = {
        "problem": problem.pk,
        "platform": "interpret",
        "generators": ["llm"],
        "policy": "best_first",
        "budget_candidates": 4,
        "budget_device_seconds": 60,
        "budget_wall_seconds": 60,
        "baseline": "eager",
        "regression_tolerance": 0.02,
    }
    response = client.post("/campaigns/new/", form)
    assert response.status_code == 400
    assert "the llm generator needs KERNELEVOLVE_LLM_URL" in response.content.decode()
    assert not Campaign.objects.exists() and Problem.objects.filter(pk=problem.pk).exists()
