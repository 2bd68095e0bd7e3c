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


CLASSES = """import torch
import torch.nn as nn

batch_size = 4096
num_classes = 4096
input_shape = (num_classes,)


class Model(nn.Module):
    def forward(self, predictions, targets):
        return torch.nn.functional.cross_entropy(predictions, targets)


def get_inputs():
    return [torch.rand(batch_size, *input_shape), torch.randint(0, num_classes, (batch_size,))]


def get_init_inputs():
    return []
"""


def test_a_size_tuple_built_from_a_constant_is_scaled_with_it():
    """KernelBench 95's ``input_shape = (num_classes,)``: the tuple is read at import, and the
    targets are drawn below ``num_classes``. Halving the tuple alone drew targets past the
    scaled classes, and the reference failed ("Target 2797 is out of bounds"); the constant
    is halved with it."""
    answer = reference_check(source=CLASSES, case={"name": "default"}, timeout_s=60)
    assert answer["ok"], answer
    used = answer["scaled_for_interpreter"]["used"]
    assert used["num_classes"] == used["input_shape"][0] < 4096


DILATED = """import torch
import torch.nn as nn

batch_size = 8
channels = 32
height = 512
width = 512


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(channels, 8, (5, 9), padding=(2, 4), dilation=(2, 3))

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.rand(batch_size, channels, height, width)]


def get_init_inputs():
    return []
"""


def test_sizes_the_reference_refuses_are_not_chosen_for_the_interpreter():
    """KernelBench 80: a dilated 5x9 window spans 9x25 inputs. Halving the image to fit the
    interpreter's limit made it smaller than that, and the upload failed ("Kernel size can't
    be greater than actual input size"); the scaling steps back to sizes the reference runs."""
    answer = reference_check(source=DILATED, case={"name": "default"}, timeout_s=60)
    assert answer["ok"], answer
    used = answer["scaled_for_interpreter"]["used"]
    # padded by (2, 4) a side: at least the window's 9x25
    assert used["height"] + 4 >= 9 and 25 <= used["width"] + 8 < 512 + 8, used
