"""The attention family: attention written out (Hugging Face's eager spelling, a causal mask
built from shapes) or called as ``F.scaled_dot_product_attention`` gets flash-attention
candidates, and they compute the reference on the interpreter at shapes other than the traced
one (decode, a chunk of queries, prefill; grouped key/value heads; a KV cache's strided slice;
the key range split across programs). Attention it does not take written out (an input mask,
an op after the product with v) is a chain of unfused kernels; an SDPA mask is refused in
words."""

from __future__ import annotations

import json

import pytest

from tests.workers.search.child import check_chained, run_child
from workers.catalog import catalog_get
from workers.search.trace import NoTemplate, trace_problem

HEADER = "import math\n\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"
INPUTS = """

def get_inputs():
    return [torch.randn(2, 8, 16, 32), torch.randn(2, 2, 16, 32), torch.randn(2, 2, 16, 32)]


def get_init_inputs():
    return []
"""

# Hugging Face's repeat_kv and an additive -inf triangle, scaled before the product.
HF_EAGER = (
    HEADER
    + """
def repeat_kv(x, n):
    b, h, s, d = x.shape
    return x[:, :, None, :, :].expand(b, h, n, s, d).reshape(b, h * n, s, d)


class Model(nn.Module):
    def forward(self, q, k, v):
        t, s = q.shape[-2], k.shape[-2]
        groups = q.shape[1] // k.shape[1]
        k, v = repeat_kv(k, groups), repeat_kv(v, groups)
        q = q / math.sqrt(q.shape[-1])
        bias = torch.full((t, s), float("-inf")).triu(s - t + 1)
        scores = torch.matmul(q, k.transpose(2, 3)) + bias
        return torch.matmul(torch.softmax(scores, dim=-1), v)
"""
    + INPUTS.replace("torch.randn(2, 8, 16, 32)", "torch.randn(2, 8, 4, 32)")  # the last 4
)

SDPA = (
    HEADER
    + """
class Model(nn.Module):
    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
"""
    + INPUTS
)

NO_MASK = (
    HEADER
    + """
class Model(nn.Module):
    def forward(self, q, k, v):
        return torch.softmax(q @ k.transpose(-2, -1) * 0.3, dim=-1) @ v
"""
    + INPUTS.replace(
        "torch.randn(2, 8, 16, 32), torch.randn(2, 2, 16, 32), torch.randn(2, 2, 16, 32)",
        "torch.randn(8, 5, 32), torch.randn(8, 16, 32), torch.randn(8, 16, 32)",
    )
)

WIDE_HEADS = (
    HEADER
    + """
class Model(nn.Module):
    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v)
"""
    + INPUTS.replace(", 32)", ", 1024)").replace("2, 8, 16", "2, 2, 16")
)

_CHECK = r"""
import json, sys
import torch
from workers.search.generators.template import render
from workers.search.trace import load_problem, trace_problem

source, shapes, params = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
plan = trace_problem(source)
out = {"family": plan.family, "summary": plan.summary, "extra": plan.extra, "cases": []}
for p in params:
    cand = {"__name__": "candidate_under_test"}
    exec(compile(render(plan, p), "candidate", "exec"), cand)
    for shape in shapes:
        torch.manual_seed(0)
        q_shape, kv_shape, sliced = shape["q"], shape["kv"], shape.get("sliced", False)
        q = torch.randn(q_shape)
        if sliced:  # a KV cache's slice: [:, :, :end] of a longer cache
            big = list(kv_shape)
            big[-2] += 7
            k, v = (torch.randn(big)[..., : kv_shape[-2], :] for _ in range(2))
        else:
            k, v = torch.randn(kv_shape), torch.randn(kv_shape)
        ns = load_problem(source)
        want = ns["Model"]()(q, k, v)
        got = cand["ModelNew"]()(q, k, v)
        err = (got - want).abs().max().item()
        out["cases"].append({"params": p, "shape": shape, "err": err, "dtype": str(got.dtype)})
print("RESULTS" + json.dumps(out))
"""

SHAPES = [
    {"q": [3, 8, 1, 32], "kv": [3, 2, 40, 32], "sliced": True},  # decode over a cache
    {"q": [1, 8, 3, 32], "kv": [1, 2, 20, 32]},  # a chunk of queries at the end
    {"q": [1, 4, 24, 16], "kv": [1, 4, 24, 16]},  # prefill, no grouping
]


@pytest.mark.parametrize(
    "source, align, shapes",
    [
        (HF_EAGER, "bottom_right", SHAPES),
        (SDPA, "top_left", [SHAPES[2], {"q": [2, 8, 5, 32], "kv": [2, 2, 5, 32]}]),
        (NO_MASK, None, [{"q": [4, 3, 32], "kv": [4, 33, 32]}]),
        # KernelBench level 1's SDPA has a head dim of 1024: the tiles shrink to fit registers.
        (WIDE_HEADS, None, [{"q": [1, 2, 20, 1024], "kv": [1, 2, 20, 1024]}]),
    ],
    ids=["hf-eager", "sdpa", "3d-no-mask", "head-dim-1024"],
)
def test_attention_references_get_correct_flash_kernels(source, align, shapes):
    params = [{}, {"split": 4, "block_n": 16}, {"block_m": 16, "block_n": 32, "split": 1}]
    result = run_child(_CHECK, source, json.dumps(shapes), json.dumps(params))
    assert result["family"] == "attention", result["summary"]
    assert result["extra"]["align"] == align
    bad = [c for c in result["cases"] if not c["err"] < 1e-4]
    assert not bad, bad
    assert len(result["cases"]) == len(params) * len(shapes)


def test_the_scale_follows_the_head_size_when_it_is_one_over_its_root():
    """The catalog problem computes 1/sqrt(head_dim) in its constructor: a traced number would
    be wrong for every other head size, so the plan keeps the rule."""
    plan = trace_problem(catalog_get("gqa_attention").problem_source())
    assert plan.extra["scale_rule"] == "inv_sqrt_head_dim"
    assert "over 8 key/value heads (groups of 4)" in plan.summary
    plan = trace_problem(NO_MASK)
    assert plan.extra["scale_rule"] == "constant" and plan.extra["scale"] == pytest.approx(0.3)


def _with_mask(forward: str) -> str:
    return (
        HEADER
        + "class Model(nn.Module):\n    "
        + forward
        + INPUTS.replace(
            "torch.randn(2, 2, 16, 32)]",
            "torch.randn(2, 2, 16, 32), torch.rand(16, 16) > 0.7]",
        ).replace("torch.randn(2, 8, 16, 32)", "torch.randn(2, 2, 16, 32)")
    )


# Attention the flash template does not take whole, written out: a chain of three kernels (the
# scores' product, the softmax over them, the product with v), or the flash kernel and the op
# after it; correct either way. (Both were refused in words while a batched product could not
# read k transposed.)
UNFUSED = {
    "mask-input": _with_mask(
        "def forward(self, q, k, v, mask):\n"
        "        s = (q @ k.transpose(-2, -1)).masked_fill(mask, -1e4)\n"
        "        return torch.softmax(s, -1) @ v"
    ),
    "op-after": _with_mask(
        "def forward(self, q, k, v, mask):\n"
        "        s = torch.softmax(q @ k.transpose(-2, -1), -1)\n"
        "        return torch.tanh(s @ v)"
    ),
}


def test_attention_the_template_does_not_take_is_a_chain_of_products(tmp_path):
    plan = trace_problem(UNFUSED["mask-input"])
    assert plan.family == "matmul+matmul" and len(plan.stages) == 3, plan.summary
    assert "batched matmul q @ k.T" in plan.summary, plan.summary
    # An op after the attention: the flash kernel, then the op (the chain cuts after it).
    plan = trace_problem(UNFUSED["op-after"])
    assert [s.family for s in plan.stages] == ["attention", "elementwise"], plan.summary
    check_chained(UNFUSED, str(tmp_path))


def test_an_sdpa_mask_is_refused_in_words():
    source = _with_mask(
        "def forward(self, q, k, v, mask):\n"
        "        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)"
    )
    with pytest.raises(NoTemplate, match="attn_mask"):
        trace_problem(source)
