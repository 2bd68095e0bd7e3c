"""The ``conv`` family (issue 11: KernelBench level 1's 35 convolution problems, and the
convolutions that open most of level 2's chains): forward and transposed convolutions over 1, 2
and 3 spatial dimensions with stride, padding, dilation, groups (depthwise too), output padding
and an optional bias, as one implicit-GEMM kernel. Each candidate computes the reference on the
interpreter at the traced sizes and at others (the geometry read from the model's own module
when the case changes it); a convolution among other ops is a chain of kernels; the kernel
compiles for sm_90 ahead of time."""

from __future__ import annotations

import pytest

from tests.workers.search.child import check_rendered, run_child
from workers.search.trace import NoTemplate, trace_problem


def _problem(layer: str, shape: str, forward: str = "self.conv(x)") -> str:
    return f"""import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 2
cin = 4
cout = 6
depth = 5
height = 9
width = 11
k = 3


class Model(nn.Module):
    def __init__(self, cin, cout, k):
        super().__init__()
        self.conv = {layer}

    def forward(self, x):
        return {forward}


def get_inputs():
    return [torch.randn({shape})]


def get_init_inputs():
    return [cin, cout, k]
"""


D1, D2, D3 = (
    "batch_size, cin, width",
    "batch_size, cin, height, width",
    "batch_size, cin, depth, height, width",
)
CONVS = {
    "conv1d-dilated-strided": (
        _problem("nn.Conv1d(cin, cout, k, stride=2, padding=1, dilation=2)", D1),
        "1-d convolution of x by self.conv.weight (3 kernel, stride [2], padding [1], "
        "dilation [2], with bias)",
    ),
    "conv2d-asymmetric-no-bias": (
        _problem("nn.Conv2d(cin, cout, (k, 2), stride=(1, 2), padding=(1, 0), bias=False)", D2),
        "2-d convolution of x by self.conv.weight (3x2 kernel",
    ),
    "conv2d-grouped": (
        _problem("nn.Conv2d(cin, cout, k, padding=2, dilation=2, groups=2)", D2),
        "2 groups",
    ),
    "conv2d-depthwise": (
        _problem("nn.Conv2d(cin, cin, k, padding=1, groups=cin, bias=False)", D2),
        "4 groups",
    ),
    "conv3d": (_problem("nn.Conv3d(cin, cout, k, stride=(2, 1, 1), padding=1)", D3), "3-d"),
    "transposed1d-padded": (
        _problem("nn.ConvTranspose1d(cin, cout, k, stride=3, padding=1, output_padding=2)", D1),
        "1-d transposed convolution",
    ),
    "transposed2d-grouped-dilated": (
        _problem("nn.ConvTranspose2d(cin, cout, k, stride=2, padding=1, dilation=2, groups=2)", D2),
        "2-d transposed convolution",
    ),
    "transposed3d": (_problem("nn.ConvTranspose3d(cin, cout, 2, stride=2)", D3), "3-d transposed"),
    "functional": (
        _problem("nn.Identity()", D2, "F.conv2d(x, self.w, stride=2)").replace(
            "        self.conv = ",
            "        self.w = nn.Parameter(torch.randn(cout, cin, 1, 1))\n        self.conv = ",
        ),
        "2-d convolution of x by self.w (1x1 kernel, stride [2, 2]",
    ),
}


def test_each_convolution_gets_a_correct_candidate(tmp_path):
    problems = {name: source for name, (source, _) in CONVS.items()}
    sizes = [{}, {"height": 6, "width": 16, "depth": 3, "batch_size": 1}, {"k": 2}]
    # the default reads these narrow convolutions in place; the other copies them
    # channels-last and runs the taps outer
    variants = [{}, {"block_m": 16, "block_n": 16, "block_k": 16, "warps": 2, "layout": "cl"}]
    results = check_rendered(problems, variants, {n: sizes for n in problems}, str(tmp_path))
    for name in problems:
        result, says = results[name], CONVS[name][1]
        assert result["family"] == "conv" and says in result["summary"], (name, result)
        assert len(result["errs"]) == len(sizes) * len(variants)
        for err in result["errs"]:
            assert not isinstance(err, str) and err < 1e-5, (name, result["errs"])


def test_wide_channels_take_the_tensor_core_path_and_are_correct(tmp_path):
    """16 output channels or more per group, and K of 16 or more: ``tl.dot`` (as on the GPU),
    with IEEE and tf32x3 products (the interpreter computes both exactly)."""
    wide = _problem("nn.Conv2d(cin, cout, k, stride=2, padding=1)", D2)
    sizes = {"wide": [{"cin": 8, "cout": 40}, {"cin": 3, "cout": 17, "k": 5}, {"cin": 20}]}
    variants = [
        {},
        {"fp32_dot": "tf32x3", "block_n": 32, "block_k": 64, "layout": "cl"},
        {"layout": "native", "block_k": 16},
    ]
    result = check_rendered({"wide": wide}, variants, sizes, str(tmp_path))["wide"]
    for err in result["errs"]:
        assert not isinstance(err, str) and err < 1e-5, result["errs"]


def _with(source: str, line: str) -> str:
    """``source`` with ``line`` added to the constructor."""
    return source.replace("        self.conv = ", f"        {line}\n        self.conv = ")


EPILOGUES = {
    # KernelBench level 2's shape: a bias of shape (C, 1, 1), an activation, a scaling
    "bias-relu-scale": (
        _with(
            _problem("nn.Conv2d(cin, cout, k)", D2, "torch.relu(self.conv(x) + self.bias) * 0.5"),
            "self.bias = nn.Parameter(torch.randn(cout, 1, 1))",
        ),
        "with epilogue [add, mul, relu]",
    ),
    # a residual of the output's shape, a 0-d parameter, a clamp (transposed, 3-d)
    "residual-cell-clamp": (
        _with(
            _problem(
                "nn.ConvTranspose3d(cin, cout, k, stride=2)",
                D3,
                "(lambda y: torch.clamp(y * self.s + y.detach() ** 2, -1.0, 1.0))(self.conv(x))",
            ),
            "self.s = nn.Parameter(torch.tensor(1.5))",
        ),
        "with epilogue [",
    ),
    # BatchNorm in eval mode: its running statistics, of shape (C,), viewed as (C, 1, 1)
    "batchnorm-relu": (
        _with(
            _problem(
                "nn.Conv2d(cin, cout, k, bias=False)", D2, "torch.relu(self.bn(self.conv(x)))"
            ),
            "self.bn = nn.BatchNorm2d(cout)\n"
            "        self.bn.running_mean.uniform_(-1.0, 1.0)\n"
            "        self.bn.running_var.uniform_(0.5, 2.0)",
        ),
        "with epilogue [add, mul, relu, rsqrt, sub]",
    ),
    "number-made-a-tensor": (
        _problem(
            "nn.Conv1d(cin, cout, k, padding=1)", D1, "torch.min(self.conv(x), torch.tensor(0.25))"
        ),
        "with epilogue [min",
    ),
}


def test_pointwise_ops_after_a_convolution_are_its_epilogue_in_one_kernel(tmp_path):
    problems = {name: source for name, (source, _) in EPILOGUES.items()}
    sizes = {n: [{}, {"cout": 17, "height": 5}] for n in problems}
    # the default reads these narrow convolutions in place; the other copies them
    # channels-last and runs the taps outer
    variants = [{}, {"block_m": 16, "block_n": 16, "block_k": 16, "warps": 2, "layout": "cl"}]
    results = check_rendered(problems, variants, sizes, str(tmp_path))
    for name, (_, says) in EPILOGUES.items():
        got = results[name]
        assert got["family"] == "conv" and says in got["summary"], (name, got)
        for err in got["errs"]:
            assert not isinstance(err, str) and err < 1e-5, (name, got["errs"])


def test_a_convolution_among_other_ops_is_a_chain_of_kernels(tmp_path):
    """A depthwise-separable pair; a computed input; a reduction after the convolution (a
    softmax over the channels). Each is the conv family's kernel and the rest's, in order."""
    chained = {
        "separable": _with(
            _problem("nn.Conv2d(cin, cin, k, groups=cin)", D2, "self.pw(self.conv(x))"),
            "self.pw = nn.Conv2d(cin, cout, 1)",
        ),
        "computed-input": _problem("nn.Conv1d(cin, cout, k)", D1, "self.conv(x * 2.0).sum(1)"),
        # a channel shuffle between two convolutions (ShuffleNet): a copy kernel, then the
        # second convolution reads it viewed back as (B, C, H, W)
        "channel-shuffle": _problem(
            "nn.Conv2d(cin, cout, 1)",
            D2,
            "self.pw(self.conv(x).view(x.shape[0], 2, 3, x.shape[2], x.shape[3])"
            ".transpose(1, 2).contiguous().view(x.shape[0], 6, x.shape[2], x.shape[3]))",
        ).replace(
            "        self.conv = ", "        self.pw = nn.Conv2d(6, 5, 3)\n        self.conv = "
        ),
        # a small CNN: a product after the convolution (the chain that cuts at products)
        "cnn-with-a-head": _with(
            _problem(
                "nn.Conv2d(cin, cout, k, padding=1, bias=False)",
                D2,
                "self.fc(torch.flatten(F.adaptive_avg_pool2d(torch.relu(self.bn(self.conv(x))),"
                " 1), 1))",
            ),
            "self.bn = nn.BatchNorm2d(cout)\n        self.fc = nn.Linear(cout, 5)",
        ),
        # a vision transformer's patch embedding, then a LayerNorm whose weight has the
        # channels' length (read whole by the norm, not per channel: it crashed the lowering)
        "patch-embedding-layernorm": _with(
            _problem(
                "nn.Conv2d(cin, cout, 2, stride=2)",
                D2,
                "self.norm(self.conv(x).flatten(2).transpose(1, 2))",
            ),
            "self.norm = nn.LayerNorm(cout)",
        ),
        # a band after the convolution: not its epilogue (the tile is positions by channels)
        "tril-after": _problem("nn.Conv2d(cin, cout, k)", D2, "torch.tril(self.conv(x)) * 2.0"),
        "softmax-over-channels": _problem(
            "nn.Conv2d(cin, cout, k)", D2, "torch.softmax(torch.relu(self.conv(x)) * 2.0, dim=1)"
        ),
    }
    results = check_rendered(chained, [{}], {}, str(tmp_path))
    for name, got in results.items():
        assert "convolution" in got["summary"] and "kernels:" in got["summary"], (name, got)
        for err in got["errs"]:
            assert not isinstance(err, str) and err < 1e-5, (name, got["errs"])
    assert results["separable"]["family"] == "conv+conv"
    assert results["channel-shuffle"]["summary"].startswith("3 kernels"), results
    head = results["cnn-with-a-head"]
    assert head["family"].startswith("matmul+"), head
    # the BatchNorm and ReLU go into the pooling's mean (one pass), then the product
    assert head["summary"].startswith("3 kernels: 2-d convolution"), head
    # the activation and the scaling are the convolution's epilogue; the softmax a row kernel
    softmax = results["softmax-over-channels"]
    assert softmax["family"] == "conv+row", softmax
    assert softmax["summary"].startswith("2 kernels: 2-d convolution"), softmax
    assert "with epilogue [mul, relu]" in softmax["summary"], softmax


def test_padding_modes_other_than_zeros_pad_first(tmp_path):
    """``padding_mode="reflect"`` traces as a pad, then a convolution with none: two kernels,
    the geometry as traced (the module's padding is the pad's, not the convolution's)."""
    reflect = _problem("nn.Conv2d(cin, cout, k, padding=1, padding_mode='reflect')", D2)
    result = check_rendered({"reflect": reflect}, [{}], {}, str(tmp_path))["reflect"]
    assert result["family"] == "conv+conv" or "kernels" in result["summary"], result
    for err in result["errs"]:
        assert not isinstance(err, str) and err < 1e-5, result["errs"]


_AOT = r"""
import json, sys
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from workers.contract import problem as P
from workers.search.generators.template import DEFAULTS, render
from workers.search.trace import trace_problem

module = P.load_module(render(trace_problem(sys.argv[1]), DEFAULTS["conv"]), "cv", sys.argv[2])
fn = module._ke_conv
out = {}
for name, dot, transposed, dtype, precision, taps_outer in (
    ("dot-fp32", True, False, "*fp32", "ieee", False),
    ("dot-tf32x3", True, False, "*fp32", "tf32x3", True),
    ("dot-tf32x3-native", True, False, "*fp32", "tf32x3", False),
    ("dot-bf16-transposed", True, True, "*bf16", "tf32", True),
    ("depthwise", False, False, "*fp32", "ieee", False),
):
    ce = dict(KD=1, KH=3, KW=3, SD=1, SH=2, SW=2, PD=0, PH=1, PW=1, DD=1, DH=1, DW=1,
              TD=1, TH=2 if transposed else 1, TW=2 if transposed else 1,
              TRANSPOSED=transposed, HAS_BIAS=True, DOT=dot, TAPS_OUTER=taps_outer,
              PRECISION=precision,
              UPCAST=False, I64=False, BLOCK_M=64, BLOCK_N=64 if dot else 1,
              BLOCK_K=32)
    sig = {a: (dtype if a.endswith("_ptr") else "i32") for a in fn.arg_names if a not in ce}
    sig.update({c: "constexpr" for c in ce})
    kernel = triton.compile(ASTSource(fn=fn, signature=sig, constexprs=ce),
                            target=GPUTarget("cuda", 90, 64), options={"num_warps": 4})
    ptx = kernel.asm["ptx"]
    out[name] = {"mma": ("mma.sync" in ptx) or ("wgmma" in ptx), "cubin": len(kernel.asm["cubin"])}
print("RESULTS" + json.dumps(out))
"""


def test_the_kernel_compiles_for_sm90_with_tensor_core_products(tmp_path):
    source = CONVS["conv2d-grouped"][0]
    got = run_child(_AOT, source, str(tmp_path), interpret=False)
    for name in ("dot-fp32", "dot-tf32x3", "dot-tf32x3-native", "dot-bf16-transposed"):
        assert got[name]["cubin"] > 0, got
    assert got["depthwise"]["cubin"] > 0, got
    for name in ("dot-bf16-transposed", "dot-tf32x3", "dot-tf32x3-native"):
        assert got[name]["mma"], (name, got)
    assert not got["dot-fp32"]["mma"], "IEEE float32 products stay off the tensor cores"


def test_a_convolution_beside_what_no_kernel_writes_is_refused_saying_what():
    """A chain cannot help a sort: the reason names it, not the convolutions' count."""
    two = _problem("nn.Conv2d(cin, cout, k)", D2, "self.conv(x) + self.conv(torch.sort(x).values)")
    with pytest.raises(NoTemplate, match="sort.default: the values' order decides"):
        trace_problem(two)
