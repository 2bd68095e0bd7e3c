"""Attention whose heads are split out of one projection (minGPT's ``CausalSelfAttention``,
KernelBench level 3's 43, 44 and 50; issue 11). The query, key and value come from one
``c_attn`` product, split and viewed as ``(B, nh, T, hs)``; no strides read that as one batch
dimension, so each copy eager makes is a move kernel of the chain. The causal mask is a buffer
sized for ``max_seqlen`` and sliced to ``T``: the slice's bound is the input's length, not a
fraction of the buffer's. The heads go back side by side into ``c_proj``, whose rows merge the
last two dimensions. The scale ``1 / sqrt(hs)`` is computed from the sizes at run time, though
the problem asserts ``n_embd % n_head == 0`` at most sizes the trace is moved to.

Before: "after the matrix product, a copy of a permuted matmul operand; no template fits"."""

from __future__ import annotations

import pytest

from tests.workers.search.child import check_rendered, run_child
from workers.search.lowering_move import fit_ints
from workers.search.trace import trace_problem

_ATTENTION = """
class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, max_seqlen):
        super().__init__()
        assert n_embd % n_head == 0
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        mask = torch.tril(torch.ones(max_seqlen, max_seqlen))
        self.register_buffer("bias", mask.view(1, 1, max_seqlen, max_seqlen))
        self.n_head = n_head
        self.n_embd = n_embd

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = ACTIVATION
        y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)
"""
_HEAD = "import math\n\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"
_SIZES = """
batch_size = 2
max_seqlen = 12
seq_len = 8
n_embd = 16
n_head = 4


def get_inputs():
    return [torch.randn(batch_size, seq_len, n_embd)]


def get_init_inputs():
    return [n_embd, n_head, max_seqlen]
"""
PROBLEMS = {
    # The layer itself is the model (level 3's 43).
    "causal_attention": _HEAD
    + _ATTENTION.replace("ACTIVATION", "F.softmax(att, dim=-1)").replace(
        "class CausalSelfAttention", "class Model"
    )
    + _SIZES,
    # The layer is a module the model builds (level 3's 44: a transformer block's parts): its
    # class is copied beside the candidate, its forward left out.
    "attention_in_a_block": _HEAD
    + _ATTENTION.replace("ACTIVATION", "F.relu(att)")
    + """

class Model(nn.Module):
    def __init__(self, n_embd, n_head, max_seqlen):
        super().__init__()
        self.attn = CausalSelfAttention(n_embd, n_head, max_seqlen)

    def forward(self, x):
        return x + self.attn(x)
"""
    + _SIZES,
}
# A padding mask given with the input: the scores of the padded keys are -inf.
PROBLEMS["padding_mask"] = (
    _HEAD
    + _ATTENTION.replace("ACTIVATION", "att.softmax(-1)")
    .replace("class CausalSelfAttention", "class Model")
    .replace("def forward(self, x):", "def forward(self, x, keep):")
    .replace("self.bias[:, :, :T, :T] == 0", "~keep[:, None, None, :]")
    + _SIZES.replace(
        "[torch.randn(batch_size, seq_len, n_embd)]",
        "[torch.randn(batch_size, seq_len, n_embd),\n"
        "            (torch.arange(seq_len) < seq_len - 2).expand(batch_size, -1).clone()]",
    )
)
# Other lengths, embeddings and batches than traced, the mask buffer's length kept.
SIZES = {
    name: [{}, {"seq_len": 5, "n_embd": 8, "batch_size": 3}, {"seq_len": 12, "n_embd": 24}]
    for name in PROBLEMS
}
# Numbers that are an input's size (a slice bound, an expand): the same rule as the mask's.
_SMALL = (
    _HEAD
    + """
batch, channels, height, width = 2, 4, 6, 8


class Model(nn.Module):
    def forward(self, x, y):
        return FORWARD


def get_inputs():
    return [torch.randn(batch, 64, height, width), torch.randn(channels)]


def get_init_inputs():
    return []
"""
)
PROBLEMS["slice_to_another_input"] = _SMALL.replace("FORWARD", "x[:, : y.shape[0]] * 2.0")
PROBLEMS["expand_to_a_size_of_the_input"] = _SMALL.replace(
    "FORWARD", "x[:, None].expand(-1, x.shape[2], -1, -1, -1).contiguous()"
)
for name in ("slice_to_another_input", "expand_to_a_size_of_the_input"):
    SIZES[name] = [{}, {"channels": 7, "height": 3, "batch": 1}]


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return check_rendered(PROBLEMS, [{}], SIZES, str(tmp_path_factory.mktemp("heads")))


@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_each_is_computed_at_every_size(name, results):
    got = results[name]
    assert len(got["errs"]) == len(SIZES[name]), got
    assert all(not isinstance(e, str) and e < 1e-5 for e in got["errs"]), got["errs"]


@pytest.mark.parametrize("name", ["causal_attention", "padding_mask"])
def test_softmax_attention_is_one_flash_kernel_between_the_projections(name):
    plan = trace_problem(PROBLEMS[name])
    assert [s.family for s in plan.stages] == ["matmul", "attention", "matmul"], plan.summary
    attention = plan.stages[1].extra
    # q, k and v read as views of c_attn's output, each a third of it, heads of 4 columns
    assert attention["bind"]["_ke_q"] == "_ke_s0.unflatten(2, (3, -1)).select(2, 0)" + (
        ".unflatten(2, (4, -1)).transpose(1, 2)"
    )
    assert attention["scale_rule"] == "inv_sqrt_head_dim"
    assert attention["out_ops"] == [(1, 2)]  # stored with the heads side by side
    mask = {"ref": "self.bias", "fill": "eq", "value": 0.0}
    if name == "padding_mask":
        mask = {"ref": "keep.unsqueeze(1).unsqueeze(2)", "fill": "eq", "value": 0.0}
    assert attention["mask"] == mask
    assert plan.stages[2].extra.get("a_merge") == 2  # c_proj reads (B, T, nh, hs) as rows of C


def test_without_a_softmax_the_heads_are_copied_and_the_mask_sliced_to_the_input():
    plan = trace_problem(PROBLEMS["attention_in_a_block"])
    families = [s.family for s in plan.stages]
    # c_attn; q and kᵀ as eager copies them; the scores; the mask's slice; relu; v; att @ v;
    # the heads side by side; c_proj (and the residual in its epilogue).
    assert families[0] == "matmul" and families[-1] == "matmul", families
    assert families.count("matmul") == 4 and families.count("move") >= 3, families
    fits = [f for s in plan.stages if s.family == "move" for f in s.extra.get("fits", [])]
    assert ["size", "x", 1] in fits  # the mask's slice: T, the input's length
    assert [1, 3, 0] in fits  # split(n_embd): a third of c_attn's output
    scale = [n.attrs["ref"] for s in plan.stages for n in s.nodes if n.attrs.get("from_sizes")]
    assert scale and all("math.sqrt" in ref for ref in scale), scale


def test_a_number_equal_to_an_input_size_at_every_traced_size_is_that_size():
    # ``bias[:, :, :T]`` with the buffer's length 12 at every size and T = x.size(1) moving.
    traced = [[[0, 12], [8, 12]], [[0, 12], [16, 12]], [[0, 12], [24, 12]]]
    sizes = [{"x": (2, 8, 16)}, {"x": (4, 16, 32)}, {"x": (6, 24, 48)}]
    assert fit_ints(traced, sizes) == [[0, 1, 0], ["size", "x", 1]]
    # Without the inputs' sizes, that number moves while its dimension does not: refused.
    with pytest.raises(Exception, match="moves with sizes other than its dimension"):
        fit_ints(traced)


# The flash kernel with a mask tensor, compiled ahead of time for sm_90 (no GPU here): the
# mask read at every score (a float buffer, or booleans), the kernel's stores through the
# strides of the output's transposed view.
_AOT = r"""
import json, sys
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from workers.contract import problem as P
from workers.search.generators.template import DEFAULTS, render
from workers.search.trace import trace_problem

plan = trace_problem(sys.argv[1])
module = P.load_module(render(plan, DEFAULTS[plan.family]), "att", sys.argv[2])
fn = module._s1_ke_attention
out = {}
for mask in ("*fp32", "*i1"):
    ce = {"GROUPS": 1, "D": 64, "BLOCK_D": 64, "BLOCK_M": 64, "BLOCK_N": 64, "CAUSAL": False,
          "SPLIT": 1, "PRECISION": "tf32", "UPCAST": False, "FMA": False, "MASK": True,
          "FILL_EQ": True}
    sig = {}
    for a in fn.arg_names:
        if a in ce:
            sig[a] = "constexpr"
        elif a == "m_ptr":
            sig[a] = mask
        elif a.endswith("_ptr"):
            sig[a] = "*fp32" if a in ("part_ptr", "ml_ptr") else "*bf16"
        elif a in ("scale", "mval"):
            sig[a] = "fp32"
        else:
            sig[a] = "i32"
    kernel = triton.compile(ASTSource(fn=fn, signature=sig, constexprs=ce),
                            target=GPUTarget("cuda", 90, 64), options={"num_warps": 4})
    out[mask] = {"mma": kernel.asm["ptx"].count("mma.sync") + kernel.asm["ptx"].count("wgmma")}
print("RESULTS" + json.dumps(out))
"""


def test_the_masked_flash_kernel_compiles_for_sm90(tmp_path):
    got = run_child(_AOT, PROBLEMS["causal_attention"], str(tmp_path), interpret=False)
    assert set(got) == {"*fp32", "*i1"}
    assert all(v["mma"] > 0 for v in got.values()), got  # the products on the tensor cores
