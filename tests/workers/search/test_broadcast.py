"""Elementwise graphs whose inputs broadcast along leading dimensions (issue 11: "an input that
broadcasts along a dimension other than the last": a table per token applied to every head, a
mask shared by every head, per-channel weights of an NCHW tensor). Each gets candidates, and
they compute the reference on the interpreter at the problem's sizes and at other sizes."""

from __future__ import annotations

import json

import pytest

from tests.workers.search.child import run_child

HEADER = "import torch\nimport torch.nn as nn\n\n"
FOOTER = "\n\ndef get_init_inputs():\n    return {init}\n"

TABLE = (
    HEADER
    + """num_tokens = 6
num_heads = 4
head_dim = 16


class Model(nn.Module):
    def forward(self, x, cos, sin):
        return x * cos + torch.tanh(x) * sin


def get_inputs():
    return [
        torch.randn(num_tokens, num_heads, head_dim),
        torch.randn(num_tokens, 1, head_dim),
        torch.randn(num_tokens, 1, head_dim),
    ]
"""
    + FOOTER.format(init="[]")
)

NCHW = (
    HEADER
    + """batch_size = 2
channels = 3
height = 5
width = 7


class Model(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(channels))
        self.shift = nn.Parameter(torch.randn(channels))

    def forward(self, x):
        return torch.relu(x * self.scale.view(1, -1, 1, 1) + self.shift.view(1, -1, 1, 1))


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]
"""
    + FOOTER.format(init="[channels]")
)

MASK = (
    HEADER
    + """batch_size = 2
heads = 3
seq = 8


class Model(nn.Module):
    def forward(self, scores, mask):
        return scores * 0.125 + mask


def get_inputs():
    return [torch.randn(batch_size, heads, seq, seq), torch.randn(batch_size, 1, seq, seq)]
"""
    + FOOTER.format(init="[]")
)

_CHECK = r"""
import json, sys, torch
from workers.contract import problem as P
from workers.search.generators.template import DEFAULTS, render
from workers.search.trace import trace_problem

src, sizes = sys.argv[1], json.loads(sys.argv[2])
plan = trace_problem(src)
out = []
for i, overrides in enumerate(sizes):
    for j, params in enumerate([{}, {"block": 16, "tiles": 1}]):
        code = render(plan, {**DEFAULTS[plan.family], **params})
        cand = P.load_module(code, f"c{i}{j}", sys.argv[3])
        prob = P.load_module(src, f"p{i}{j}", sys.argv[3])
        _, ref, new = P.make_models(prob, cand, overrides, torch.float32, 0, "cpu", None)
        x = P.make_inputs(prob, overrides, torch.float32, 0, "cpu")
        with torch.no_grad():
            err = float((new(*x) - ref(*x)).abs().max())
        out.append({"sizes": overrides, "params": params, "err": err})
print("RESULTS" + json.dumps({"family": plan.family, "summary": plan.summary, "runs": out}))
"""


@pytest.mark.parametrize(
    "source, sizes, says",
    [
        (TABLE, [{}, {"num_heads": 1, "head_dim": 40}], "cos [6, 1, 16] broadcast"),
        (NCHW, [{}, {"height": 1, "width": 130}], "self.scale [1, 3, 1, 1] broadcast"),
        (MASK, [{}, {"seq": 33}], "mask [2, 1, 8, 8] broadcast"),
    ],
    ids=["table-per-token", "per-channel-nchw", "mask-per-batch"],
)
def test_broadcast_inputs_get_a_correct_elementwise_kernel(source, sizes, says, tmp_path):
    result = run_child(_CHECK, source, json.dumps(sizes), str(tmp_path))
    assert result["family"] == "elementwise"
    assert says in result["summary"]
    assert len(result["runs"]) == 2 * len(sizes)
    for run in result["runs"]:
        assert run["err"] < 1e-5, run


def test_a_broadcast_input_in_a_reduction_over_a_middle_dimension_is_read_per_row(tmp_path):
    """A mask shared by every head in a softmax over the heads: constant along the rows, so
    the strided row kernel reads it once per row through its strides (it was refused in one
    line, then a chain that wrote the masked scores first)."""
    over_heads = MASK.replace("scores * 0.125 + mask", "torch.softmax(scores + mask, dim=1)")
    result = run_child(_CHECK, over_heads, json.dumps([{}, {"seq": 5}]), str(tmp_path))
    assert result["family"] == "row", result["summary"]
    assert "row-wise over dimension 1 of 4" in result["summary"], result["summary"]
    assert "mask [2, 8, 8, 1] broadcast" in result["summary"], result["summary"]
    for run in result["runs"]:
        assert run["err"] < 1e-5, run


_MISMATCH = r"""
import json, sys, torch
from workers.contract import problem as P
from workers.search.generators.template import DEFAULTS, render
from workers.search.trace import trace_problem

src = sys.argv[1]
cand = P.load_module(render(trace_problem(src), DEFAULTS["elementwise"]), "c", sys.argv[2])
x = torch.randn(6, 4, 16)
try:
    per_head = torch.randn(6, 4, 16)  # varies along the heads, traced as shared by them
    cand.ModelNew()(x, per_head, torch.randn(6, 1, 16))
    print("RESULTS" + json.dumps({"raised": None}))
except ValueError as exc:
    print("RESULTS" + json.dumps({"raised": str(exc)}))
"""


def test_an_input_that_varies_where_it_was_traced_as_broadcast_is_an_error(tmp_path):
    """The kernel reads a broadcast input once per row of the dimensions it varies in; an input
    that varies in another one would be read wrong, so the candidate says so instead."""
    result = run_child(_MISMATCH, TABLE, str(tmp_path))
    assert "cos varies along a dimension the kernel broadcasts it over" in result["raised"]


MASKED_SOFTMAX = MASK.replace(
    "scores * 0.125 + mask", "torch.softmax(scores * 0.125 + mask, dim=-1)"
).replace("torch.randn(batch_size, 1, seq, seq)", "torch.randn(1, 1, seq, seq)")
MASKED_LOG_SOFTMAX = MASK.replace(
    "scores * 0.125 + mask", "torch.log_softmax(scores + mask, dim=-1) * mask"
)

_ROW_CHECK = r"""
import json, sys, torch
from workers.contract import problem as P
from workers.search.generators.template import DEFAULTS, render
from workers.search.trace import trace_problem

src, sizes = sys.argv[1], json.loads(sys.argv[2])
plan = trace_problem(src)
out = []
for i, overrides in enumerate(sizes):
    prob = P.load_module(src, f"p{i}", sys.argv[3])
    b, h, s = (overrides.get(k, getattr(prob, k)) for k in ("batch_size", "heads", "seq"))
    key = f"{b * h * s},{s},float32"
    variants = {
        "one pass": {"strategy": "one_pass"},
        "looped": {"strategy": "looped", "block_n": 16},
        "two chunks": {"table": {key: [2, 2, (1 << (s - 1).bit_length()) // 2, 2, 1, 0, 0]}},
        "persistent": {"table": {key: [1, 2, 1 << (s - 1).bit_length(), 2, 1, 3, 1]}},
    }
    for j, (name, params) in enumerate(variants.items()):
        code = render(plan, {**DEFAULTS["row"], **params})
        cand = P.load_module(code, f"c{i}{j}", sys.argv[3])
        _, ref, new = P.make_models(prob, cand, overrides, torch.float32, 0, "cpu", None)
        x = P.make_inputs(prob, overrides, torch.float32, 0, "cpu")
        with torch.no_grad():
            err = float((new(*x) - ref(*x)).abs().max())
        out.append({"sizes": overrides, "variant": name, "err": err})
print("RESULTS" + json.dumps({"family": plan.family, "summary": plan.summary, "runs": out}))
"""


@pytest.mark.parametrize("source", [MASKED_SOFTMAX, MASKED_LOG_SOFTMAX], ids=["softmax", "log"])
def test_a_mask_shared_by_every_head_in_a_row_reduction(source, tmp_path):
    """A masked softmax (the mask shared by every head, or by the batch too): every row
    kernel (one pass, looped, two chunks, persistent) reads the mask through its strides."""
    sizes = [{}, {"seq": 20, "heads": 1}]
    result = run_child(_ROW_CHECK, source, json.dumps(sizes), str(tmp_path))
    assert result["family"] == "row" and "broadcast" in result["summary"]
    assert len(result["runs"]) == 4 * len(sizes)
    for run in result["runs"]:
        assert run["err"] < 1e-5, run


_ROW_LOADS = r"""
import json, re, sys
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from workers.contract import problem as P
from workers.search.generators.template import DEFAULTS, render
from workers.search.trace import trace_problem

plan = trace_problem(sys.argv[1])
fn = P.load_module(render(plan, DEFAULTS["elementwise"]), "rows", sys.argv[2])._ke_broadcast
ce = {"ROWS": 4, "BLOCK": 256, "NC": 0, "I32": True}
sig = {a: ("*fp32" if a.endswith("_ptr") else "i32") for a in fn.arg_names if a not in ce}
sig.update({c: "constexpr" for c in ce})
ttgir = triton.compile(ASTSource(fn=fn, signature=sig, constexprs=ce),
                       target=GPUTarget("cuda", 90, 64), options={"num_warps": 4}).asm["ttgir"]
shapes = re.findall(r"tt\.load %\S+, %\S+(?:, %\S+)? : tensor<([\dx]+)x!tt\.ptr<f32>", ttgir)
print("RESULTS" + json.dumps(sorted(shapes)))
"""


def test_an_input_constant_along_the_row_is_loaded_once_per_row(tmp_path):
    """A diagonal matrix times B (KernelBench 12, ``diag(a) @ B`` traced as ``a[:, None] * B``)
    read ``a`` once per column, a [ROWS, BLOCK] gather of one address, and sat at 0.97x of
    compile on the H200: the row's value is now one load per row (compiled for sm_90)."""
    src = NCHW.replace("height = 5\nwidth = 7", "height = 1\nwidth = 7")
    got = run_child(_ROW_LOADS, src, str(tmp_path), interpret=False)
    assert got.count("4x256") == 1 and got.count("4x1") == 2, got  # x; scale and shift
