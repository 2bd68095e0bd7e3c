"""The ``pool`` family (issue 11: KernelBench level 1's six pooling problems, and the pooling
layers of every CNN): max and average pooling over 1, 2 and 3 spatial dimensions with stride,
padding, dilation, ceil mode, count_include_pad and divisor_override. Each candidate computes the
reference on the interpreter at the traced sizes and at others (a window from the model's own
module when the case changes it); what the template does not do is refused in one line."""

from __future__ import annotations

import pytest

from tests.workers.search.child import SM90, check_chained, check_rendered, run_child
from workers.search.trace import NoTemplate, trace_problem


def _problem(layer: str, shape: str, forward: str = "self.pool(x)") -> str:
    return f"""import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 2
channels = 3
depth = 6
height = 11
width = 13
kernel_size = 3


class Model(nn.Module):
    def __init__(self, kernel_size):
        super().__init__()
        self.pool = {layer}

    def forward(self, x):
        return {forward}


def get_inputs():
    return [torch.randn({shape})]


def get_init_inputs():
    return [kernel_size]
"""


D1, D2, D3 = (
    "batch_size, channels, width",
    "batch_size, channels, height, width",
    ("batch_size, channels, depth, height, width"),
)
POOLS = {
    "max1d-dilated-ceil": (
        _problem("nn.MaxPool1d(kernel_size, stride=2, padding=1, dilation=2, ceil_mode=True)", D1),
        "max pooling over x (1-d as traced): window 1x3",
    ),
    "max2d": (_problem("nn.MaxPool2d(kernel_size, stride=2, padding=1)", D2), "window 3x3"),
    "max3d": (_problem("nn.MaxPool3d(kernel_size, stride=1, dilation=2)", D3), "window 3x3x3"),
    "avg1d-no-pad-count": (
        _problem("nn.AvgPool1d(kernel_size, stride=1, padding=1, count_include_pad=False)", D1),
        "padding not counted",
    ),
    "avg2d-ceil-divisor": (
        _problem("nn.AvgPool2d(kernel_size, stride=2, ceil_mode=True, divisor_override=5)", D2),
        "divisor 5",
    ),
    "avg3d-padded": (_problem("nn.AvgPool3d(kernel_size, stride=2, padding=1)", D3), "stride"),
    "functional": (_problem("nn.Identity()", D2, "F.max_pool2d(x, 2)"), "window 2x2"),
}


def test_each_pooling_gets_a_correct_candidate(tmp_path):
    problems = {name: source for name, (source, _) in POOLS.items()}
    sizes = [{}, {"height": 7, "width": 20, "depth": 5, "channels": 1}, {"kernel_size": 2}]
    # static 1 (the default): a kernel per shape, its sizes constants; 0: sizes at run time
    variants = [{}, {"block": 64, "warps": 2, "static": 0}, {"window": "tile", "block": 64}]
    variants += [{"window": "flat", "block": 256}, {"window": "flat", "static": 0}]
    results = check_rendered(problems, variants, {n: sizes for n in problems}, str(tmp_path))
    for name, (_, says) in POOLS.items():
        result = results[name]
        assert result["family"] == "pool" and says in result["summary"], (name, result)
        assert len(result["errs"]) == len(sizes) * len(variants)
        for err in result["errs"]:
            assert not isinstance(err, str) and err < 1e-5, (name, result["errs"])


_NAN = r"""
import json, sys, torch
from workers.contract import problem as P
from workers.search.generators.template import DEFAULTS, render
from workers.search.trace import trace_problem

src = sys.argv[1]
prob = P.load_module(src, "p", sys.argv[2])
x = torch.randn(2, 3, 11, 13)
x[0, 0, 4, 4] = float("nan")
x[1, 2] = float("-inf")
want = prob.Model(3)(x)
same = {}
for window in ("loop", "tile", "flat"):
    params = {**DEFAULTS["pool"], "window": window}
    cand = P.load_module(render(trace_problem(src), params), "c" + window, sys.argv[2])
    got = cand.ModelNew(3)(x)
    same[window] = torch.equal(got.isnan(), want.isnan()) and torch.allclose(
        got, want, equal_nan=True
    )
print("RESULTS" + json.dumps({"same": same}))
"""


def test_max_pooling_propagates_nan_and_keeps_minus_infinity_as_torch_does(tmp_path):
    result = run_child(_NAN, POOLS["max2d"][0], str(tmp_path))
    assert result["same"] == {"loop": True, "tile": True, "flat": True}


def test_what_the_template_does_not_do_is_refused_in_one_line():
    layer = "nn.MaxPool2d(kernel_size, return_indices=True)"
    with pytest.raises(NoTemplate, match="its indices"):
        trace_problem(_problem(layer, D2, "self.pool(x)"))


def test_a_pooling_beside_other_ops_is_a_chain(tmp_path):
    """An activation after the pooling, a pooling of a computed value (each refused in one
    kernel): the pool family's kernel and an elementwise one, in order (test_chain.py)."""
    chained = {
        "activation-after": _problem("nn.MaxPool2d(kernel_size)", D2, "torch.relu(self.pool(x))"),
        "computed-input": _problem("nn.MaxPool2d(kernel_size)", D2, "self.pool(x * 2.0)"),
    }
    check_chained(chained, str(tmp_path))


def test_a_wide_window_starts_as_one_vector_per_window():
    """KernelBench 45 (11 x 11 windows at stride 11) was 0.55x of compile with a thread per
    output walking its window and 0.76x with a window row per vector; compile reads each window
    as one vector. A wide window's first seed does; a 3 x 3 window's first is the loop."""
    from workers.search.generators.base import GenerationContext
    from workers.search.generators.template import TemplateGenerator

    wide = _problem("nn.AvgPool2d(11, stride=11)", D2).replace(
        "kernel_size = 3", "kernel_size = 11"
    )
    first = TemplateGenerator().propose(GenerationContext(wide, platform="interpret"), 1)[0]
    assert first.params["window"] == "flat"
    narrow = TemplateGenerator().propose(
        GenerationContext(POOLS["max2d"][0], platform="interpret"), 1
    )
    assert narrow[0].params["window"] == "loop"


_AOT = (
    SM90
    + r"""
out = {}
for static in (1, 0):
    params = {"window": "flat", "static": static}
    module = P.load_module(render(trace_problem(sys.argv[1]), params), f"c{static}", sys.argv[2])
    fn = module._ke_pool_flat
    # an 11 x 11 window at stride 11 over 64 x 64 planes (KernelBench 45's, scaled)
    ce = dict(KD=1, KH=11, KW=11, SD=1, SH=11, SW=11, PD=0, PH=0, PW=0, DD=1, DH=1, DW=1,
              MAX=False, INCLUDE_PAD=True, DIVISOR=0, BLOCK=8, KP=128, I32=True)
    if static:
        ce.update(TOTAL=25600, D=1, H=64, W=64, OD=1, OH=5, OW=5)
    out[static] = len(sm90_ptx(fn, ce))
print("RESULTS" + json.dumps(out))
"""
)


def test_the_whole_window_kernel_compiles_for_sm90(tmp_path):
    """The interpreter runs Python; the GPU compiler must take the [outputs, window] tile and
    its reduction, with the sizes constant and at run time."""
    wide = _problem("nn.AvgPool2d(kernel_size, stride=kernel_size)", D2)
    got = run_child(_AOT, wide, str(tmp_path), interpret=False)
    assert set(got) == {"1", "0"} and all(n > 1000 for n in got.values()), got
