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
