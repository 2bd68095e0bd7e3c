"""Tracing runs the reference's own code, and a reference is untrusted (an upload): the template
generator traces it behind the sandbox boundary and gets back only a checked plan."""

import os
import secrets

import pytest

from workers.boundary import REPO_ROOT
from workers.catalog import catalog_get
from workers.search.generators.template import DEFAULTS, TemplateGenerator, render
from workers.search.trace import NoTemplate, plan_from_dict, plan_to_dict, trace_problem

HOSTILE = """
import torch
import torch.nn as nn
open({marker!r}, "w").write("pwned")
raise RuntimeError(open({secret!r}).read())

class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)

def get_inputs():
    return [torch.randn(4, 64)]

def get_init_inputs():
    return []
"""


def test_the_plan_survives_its_trip_as_json():
    source = catalog_get("rms_norm").problem_source()
    plan = trace_problem(source)
    again = plan_from_dict(plan_to_dict(plan))
    assert render(again, DEFAULTS[again.family]) == render(plan, DEFAULTS[plan.family])


def test_a_malformed_plan_is_refused():
    with pytest.raises(NoTemplate, match="malformed: nodes"):
        plan_from_dict({"family": "row", "nodes": "rm -rf /"})


def test_a_hostile_reference_is_traced_in_the_sandbox(tmp_path):
    data = os.path.join(REPO_ROOT, "data")
    os.makedirs(data, exist_ok=True)
    token = secrets.token_hex(12)
    secret = os.path.join(data, f"trace-probe-{token[:6]}")
    with open(secret, "w") as fh:
        fh.write(token)
    marker = tmp_path / "pwned"
    try:
        described = TemplateGenerator().describe(HOSTILE.format(marker=str(marker), secret=secret))
    finally:
        os.remove(secret)
    assert described["fits"] is False
    assert "could not be traced" in described["summary"] or "No such file" in described["summary"]
    assert token not in described["summary"]
    assert not marker.exists()


def test_the_generator_still_writes_candidates_for_the_catalog():
    described = TemplateGenerator().describe(catalog_get("softmax").problem_source())
    assert described == {"fits": True, "family": "row", "summary": described["summary"]}
