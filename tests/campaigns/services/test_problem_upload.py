"""Uploading a problem (`services.problems.problem_upload`): the reference runs once behind the
sandbox before anything is saved; a file that is not a KernelBench problem, a reference that
fails, or a workload naming a constant the problem lacks is refused with the field and the
reason, and nothing is saved."""

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError

from apps.campaigns.models import Problem
from apps.campaigns.services.problems import problem_upload

GOOD = (
    "import torch\nimport torch.nn as nn\n\nn = 64\n\n\n"
    "class Model(nn.Module):\n    def forward(self, x):\n        return torch.relu(x) * 2\n\n\n"
    "def get_inputs():\n    return [torch.randn(4, n)]\n\n\n"
    "def get_init_inputs():\n    return []\n"
)


@pytest.fixture
def author(db):
    return User.objects.create_user("uploader", password="pw-upload-1")


def _upload(author, source, workload=None):
    return problem_upload(name="relu2", source=source, workload=workload, created_by=author)


@pytest.mark.django_db
def test_a_problem_whose_reference_runs_is_saved_with_its_workload(author):
    workload = {"cases": [{"name": "small", "overrides": {"n": 32}, "weight": 1}]}
    problem = _upload(author, GOOD, workload)
    assert Problem.objects.get(pk=problem.pk).source == GOOD
    assert problem.workload["cases"][0]["overrides"] == {"n": 32}
    assert problem.created_by == author


@pytest.mark.parametrize(
    "source, workload, field, says",
    [
        (GOOD.replace("def get_inputs", "def inputs"), None, "source", "no top-level get_inputs"),
        (GOOD.replace("torch.relu(x) * 2", "x @ x"), None, "source", "the reference failed"),
        (GOOD.replace("return torch", "retrun torch"), None, "source", "line 9"),
        (GOOD, {"cases": [{"name": "c", "overrides": {"width": 8}}]}, "workload", "width"),
    ],
    ids=["not-kernelbench", "reference-raises", "syntax", "unknown-constant"],
)
@pytest.mark.django_db
def test_a_bad_upload_is_refused_naming_the_field_and_nothing_is_saved(
    author, source, workload, field, says
):
    with pytest.raises(ValidationError) as raised:
        _upload(author, source, workload)
    errors = raised.value.message_dict
    assert says in " ".join(errors[field]), errors
    assert not Problem.objects.filter(name="relu2").exists()
