"""Nearest upsampling (issue 11, generality): ``F.interpolate(x, scale_factor=2)`` and its 1-d
and 3-d forms were "upsample_nearest2d.default, which no template expresses". By a whole
factor, output element ``i`` reads input ``i // f``: each element repeated, the view, expand
and copy the move kernel writes. Each candidate computes the reference on the interpreter at
two sizes; a factor that is not whole is refused in one line."""

from __future__ import annotations

import pytest

from tests.workers.search.child import check_rendered
from workers.search.trace import NoTemplate, trace_problem


def _problem(forward: str, shape: str) -> str:
    return (
        "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"
        "n = 2\nc = 3\nh = 5\nw = 6\n\n\nclass Model(nn.Module):\n"
        f"    def forward(self, x):\n        return {forward}\n\n\n"
        f"def get_inputs():\n    return [torch.randn({shape})]\n\n\n"
        "def get_init_inputs():\n    return []\n"
    )


CASES = {
    "2d-by-2": _problem("F.interpolate(x, scale_factor=2, mode='nearest')", "n, c, h, w"),
    "module-by-3": _problem("nn.Upsample(scale_factor=3)(x)", "n, c, h, w"),
    "1d": _problem("F.interpolate(x, scale_factor=4)", "n, c, w"),
    "3d": _problem("F.interpolate(x, scale_factor=(1, 2, 2))", "n, c, 2, h, w"),
}


def test_each_upsampling_is_one_move_kernel_that_computes_the_reference(tmp_path):
    for name, source in CASES.items():
        plan = trace_problem(source)
        assert plan.family == "move" and not plan.stages, (name, plan.summary)
    sizes = dict.fromkeys(CASES, [{}, {"n": 1, "c": 4, "h": 7, "w": 3}])
    results = check_rendered(CASES, [{}], sizes, str(tmp_path))
    for name, result in results.items():
        assert len(result["errs"]) == 2, (name, result)
        assert all(err == 0.0 for err in result["errs"]), (name, result["errs"])


@pytest.mark.parametrize(
    "forward",
    [
        "F.interpolate(x, scale_factor=1.5, mode='nearest')",  # not whole
        "F.interpolate(x, size=(3 * h, 2 * w))",  # a fixed size, whatever the input's
    ],
    ids=["factor-not-whole", "fixed-size"],
)
def test_what_is_not_a_whole_scale_factor_is_refused_in_one_line(forward):
    with pytest.raises(NoTemplate, match="upsample_nearest2d") as info:
        trace_problem(_problem(forward, "n, c, h, w"))
    assert "\n" not in str(info.value)
