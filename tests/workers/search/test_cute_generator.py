"""The ``cute`` generator (issue 15): CuTe DSL candidates for any reference whose traced graph
computes RMSNorm, LayerNorm or softmax over its rows, found by evaluating the graph, not by its
text."""

from __future__ import annotations

import re

import pytest

from workers import constants as C
from workers.catalog import catalog_get
from workers.gates.static import check_static
from workers.search.generators.base import EDGE_MUTATION, EDGE_SEED, GenerationContext
from workers.search.generators.cute import CuteGenerator


def _problem(init: str, forward: str, inputs: str = "torch.randn(4, 64)") -> str:
    return (
        "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\n"
        f"class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n{init}"
        f"    def forward(self, x):\n        return {forward}\n\n\n"
        f"def get_inputs():\n    return [{inputs}]\n\n\ndef get_init_inputs():\n    return []\n"
    )


def _ce(kwargs: str) -> str:
    return (
        "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\n"
        "class Model(nn.Module):\n    def forward(self, logits, labels):\n"
        f"        return F.cross_entropy(logits, labels, {kwargs})\n\n\n"
        "def get_inputs():\n    return [torch.randn(4, 50), torch.randint(0, 50, (4,))]\n\n\n"
        "def get_init_inputs():\n    return []\n"
    )


SCALE = "        self.scale = nn.Parameter(torch.rand(64) + 0.5)\n\n"
LLAMA = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, hidden_size=64, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


def get_inputs():
    return [torch.randn(4, 64)]


def get_init_inputs():
    return []
"""
REFERENCES = {
    "rms-catalog": (catalog_get("rms_norm").problem_path.read_text(), "rms_norm"),
    "rms-written-otherwise": (
        _problem(SCALE, "x / torch.sqrt(x.square().mean(-1, keepdim=True) + 1e-5) * self.scale"),
        "rms_norm",
    ),
    "rms-llama": (LLAMA, "rms_norm"),  # as Llama's modelling code writes it (fp32 inside)
    "rms-without-weight": (
        _problem("", "x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True))"),
        "rms_norm",
    ),
    "softmax-catalog": (catalog_get("softmax").problem_path.read_text(), "softmax"),
    "softmax-by-hand": (
        _problem(
            "",
            "torch.exp(x - x.amax(-1, keepdim=True)) / "
            "torch.exp(x - x.amax(-1, keepdim=True)).sum(-1, keepdim=True)",
        ),
        "softmax",
    ),  # fmt: skip
    "log-softmax": (_problem("", "torch.log_softmax(x, dim=-1)"), None),
    "layer-norm": (catalog_get("layer_norm").problem_path.read_text(), "layer_norm"),
    "layer-norm-by-hand": (
        _problem(
            SCALE,
            "(x - x.mean(-1, keepdim=True)) / (x.var(-1, keepdim=True, "
            "unbiased=False) + 1e-5).sqrt() * self.scale",
        ),
        "layer_norm",
    ),  # fmt: skip
    "gelu": (catalog_get("gelu").problem_path.read_text(), None),
    # KernelBench level 1's shapes of these (36 and 40): rows the template must read otherwise
    "rms-over-channels": (
        _problem(
            "",
            "x / torch.sqrt(torch.mean(x ** 2, dim=1, keepdim=True) + 1e-5)",
            "torch.randn(2, 8, 4, 4)",
        ),
        None,
    ),  # fmt: skip
    "layer-norm-over-trailing-dims": (
        _problem(
            "        self.ln = nn.LayerNorm((8, 4, 4))\n\n", "self.ln(x)", "torch.randn(2, 8, 4, 4)"
        ),
        "layer_norm",
    ),  # fmt: skip
    "cross-entropy": (catalog_get("cross_entropy").problem_path.read_text(), "cross_entropy"),
    "cross-entropy-sum-smoothed": (_ce('reduction="sum", label_smoothing=0.1'), "cross_entropy"),
    "cross-entropy-per-row": (_ce('reduction="none"'), None),
}


@pytest.fixture(scope="module")
def generator():
    return CuteGenerator()


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_it_recognises_norms_and_softmax_by_what_they_compute(generator, name):
    source, op = REFERENCES[name]
    described = generator.describe(source)
    if op is None:
        assert not described["fits"]
        assert described["summary"].startswith("no CuTe template fits: ")
        assert generator.propose(GenerationContext(source, platform="cuda"), 3) == []
        return
    assert described == {"fits": True, "family": "cute_row", "summary": f"{op} in CuTe DSL"}
    seeds = generator.propose(GenerationContext(source, platform="cuda"), 3)
    assert len(seeds) == 3 and {s.edge for s in seeds} == {EDGE_SEED}
    for seed in seeds:
        static = check_static(seed.source, source)
        assert static.passed and static.backend == C.BACKEND_CUTE, static.reason
    if name == "cross-entropy-sum-smoothed":  # its reduction and smoothing, its names
        assert "_ke_t = labels.reshape(-1).contiguous()" in seeds[0].source
        call = re.search(r"_ke_ce_run\(_ke_x2, _ke_t, _ke_out, -100, ([0-9.e-]+), False\)",
                         seeds[0].source)  # fmt: skip
        assert call and float(call.group(1)) == pytest.approx(0.1)
    if "written-otherwise" in name:  # the reference's own weight and epsilon
        assert "self.scale.detach()" in seeds[0].source
        assert "cutlass.Float32(1e-05)" in seeds[0].source
    # no candidates where nothing could check them
    assert generator.propose(GenerationContext(source, platform="interpret"), 3) == []


def test_children_move_one_launch_parameter_of_their_parent(generator):
    source = REFERENCES["softmax-catalog"][0]
    (seed, *_) = generator.propose(GenerationContext(source, platform="cuda"), 1)
    parent = {"generator": "cute", "params": seed.params, "source": seed.source}
    ctx = GenerationContext(source, platform="cuda", mode=EDGE_MUTATION, parents=[parent])
    children = generator.propose(ctx, 4)
    assert children and all(c.edge == EDGE_MUTATION for c in children)
    for child in children:
        moved = {k for k in child.params if child.params[k] != seed.params[k]}
        assert len(moved) == 1, child.params


def _gates_on_interpret(problem: str, candidate: str) -> dict:
    """The candidate's gates on ``interpret``, in the sandbox, by name."""
    from workers.evaluate import EvaluationRequest, Evaluator

    request = EvaluationRequest(
        problem_source=problem, candidate_source=candidate, platform="interpret", trials=1
    )
    with Evaluator() as ev:
        report = ev.evaluate(request)
    return {g.name: g for g in report.gates}


def test_a_generated_candidate_compiles_for_the_gpu_with_the_references_own_weight(generator):
    """The candidate for a user's RMSNorm (its parameter named ``scale``, its epsilon 1e-5)
    builds, loads the reference's weights and compiles for sm_90a in the sandbox."""
    source = REFERENCES["rms-written-otherwise"][0]
    (seed, *_) = generator.propose(GenerationContext(source, platform="cuda"), 1)
    gates = _gates_on_interpret(source, seed.source)
    assert gates["compile"].status == C.PASSED, gates["compile"].reason
    assert gates["compile"].evidence["artifacts"][0]["ptx_target"] == "sm_90a"
    assert gates["correctness"].rule == C.RULE_NEEDS_GPU


def test_a_norm_over_several_trailing_dimensions_reads_them_as_one_row(generator):
    """LayerNorm over (C, H, W), as KernelBench's 40 is written: the row is the last three
    dimensions flattened, and the weight of their shape is read flat. The candidate builds and
    compiles for sm_90a in the sandbox on the problem's own inputs. A norm over the channels of
    an NCHW tensor (KernelBench's 36) is refused in one line: its rows are not the last dims."""
    source = REFERENCES["layer-norm-over-trailing-dims"][0]
    (seed, *_) = generator.propose(GenerationContext(source, platform="cuda"), 1)
    assert "_ke_x2 = x.reshape(-1, math.prod(x.shape[-3:])).contiguous()" in seed.source
    assert "self.ln.weight.detach().to(_ke_x2.dtype).reshape(-1).contiguous()" in seed.source
    gates = _gates_on_interpret(source, seed.source)
    assert gates["compile"].status == C.PASSED, gates["compile"].reason
    assert gates["correctness"].rule == C.RULE_NEEDS_GPU
    refused = generator.describe(REFERENCES["rms-over-channels"][0])["summary"]
    assert "a reduction over dimension -3, not the last" in refused
