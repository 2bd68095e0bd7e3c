"""The upload check behind the sandbox: a reference that never returns ends at the limit with a
message that says so, and the interpreter's smaller shapes are reported case by case."""

from workers.reference_check import reference_check

PROBLEM_SOURCE = """import torch
import torch.nn as nn

batch_size = 16
dim = 1024


class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
"""


def test_a_reference_that_never_returns_says_it_timed_out():
    endless = PROBLEM_SOURCE.replace(
        "        return torch.softmax(x, dim=-1)",
        "        while True:\n            pass",
    )
    case = {"name": "b16", "overrides": {"batch_size": 16}}
    answer = reference_check(source=endless, case=case, timeout_s=6)
    assert answer["ok"] is False and answer["field"] == "source"
    assert answer["error"].startswith("the reference did not return within 6 s on case 'b16'")
    assert "nothing was saved" in answer["error"]


def test_interpret_cases_say_which_smaller_shapes_are_checked():
    big = {"name": "big", "overrides": {"batch_size": 64, "dim": 4096}, "weight": 3.0}
    small = {"name": "small", "overrides": {"batch_size": 4, "dim": 256}, "weight": 1.0}
    answer = reference_check(source=PROBLEM_SOURCE, case=small, scale_cases=[big, small])
    assert answer["ok"] is True, answer
    by_name = {c["name"]: c for c in answer["interpret_cases"]}
    assert by_name["big"]["overrides"] == {"batch_size": 64, "dim": 1024}
    assert by_name["big"]["scaled"] == {"orig": {"dim": 4096}, "used": {"dim": 1024}}
    assert by_name["small"]["scaled"] is None
