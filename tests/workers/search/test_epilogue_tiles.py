"""A product's epilogue reading another tensor of its output's shape (issue 11, generality): a
residual added to ``Linear``'s output, a gate computed before the product (``sigmoid(g) *
bmm(a, b)``), a bias over attention scores, and the LLaMA MLP ``w2(silu(w1(x)) * w3(x))``. The
MLP was refused ("after the matrix product, value _ke_s0 is not expressible"): the gated product
reads the other product's output, written by the stage before, at each of its elements. Each
candidate computes the reference on the interpreter at two sizes, with one tile and with
split-K (the epilogue then runs in the reduction kernel); the tile is read by the output's own
offsets, so the one kernel compiles for sm_90 too."""

from __future__ import annotations

from tests.workers.search.child import check_rendered, compile_matmul_sm90
from workers.search.trace import trace_problem

HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"


def _problem(init: str, forward: str, inputs: str, sizes: str, init_args: str = "") -> str:
    return (
        HEADER
        + sizes
        + "\n\nclass Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        + "".join(f"        {line}\n" for line in init.splitlines() if line)
        + "\n"
        + f"    def forward(self, {forward[0]}):\n        return {forward[1]}\n\n\n"
        + f"def get_inputs():\n    return [{inputs}]\n\n\ndef get_init_inputs():\n    return []\n"
    )


MLP = "self.w1 = nn.Linear(d, h, bias=False)\nself.w2 = nn.Linear(h, d, bias=False)\n"
MLP += "self.w3 = nn.Linear(d, h, bias=False)\n"
SIZES = "b = 2\ns = 12\nd = 24\nh = 40\n"
# name: (problem, the plan's stages, what the product's kernel says its epilogue holds)
CASES = {
    "residual-linear": (
        _problem("self.proj = nn.Linear(d, d)", ("x, r", "r + self.proj(x) * 0.5"),
                 "torch.randn(b, s, d), torch.randn(b, s, d)", SIZES),
        ["matmul"], "epilogue [add, mul]",
    ),
    "gate-before-product": (
        _problem("", ("a, c, g", "torch.sigmoid(g) * torch.bmm(a, c)"),
                 "torch.randn(b, s, d), torch.randn(b, d, h), torch.randn(b, s, h)", SIZES),
        ["matmul"], "epilogue [mul, sigmoid]",
    ),
    "scores-bias": (
        _problem("", ("q, k, bias", "(q @ k.transpose(-2, -1)) * 0.125 + bias"),
                 "torch.randn(b, 3, s, d), torch.randn(b, 3, h, d), torch.randn(b, 3, s, h)",
                 SIZES),
        ["matmul"], "epilogue [add, mul]",
    ),
    "llama-mlp": (
        _problem(MLP, ("x", "self.w2(F.silu(self.w1(x)) * self.w3(x))"), "torch.randn(b, s, d)",
                 SIZES),
        ["matmul", "matmul", "matmul"], "epilogue [",
    ),
    "llama-mlp-residual": (
        _problem(MLP, ("x", "x + self.w2(F.silu(self.w1(x)) * self.w3(x))"),
                 "torch.randn(s, d)", SIZES),
        ["matmul", "matmul", "matmul"], "epilogue [add]",
    ),
}  # fmt: skip


def test_each_epilogue_reads_its_tile_in_one_kernel_per_product():
    for name, (source, stages, says) in CASES.items():
        plan = trace_problem(source)
        got = [s.family for s in plan.stages] if plan.stages else [plan.family]
        assert got == stages, (name, plan.summary)
        assert says in plan.summary, (name, plan.summary)
    # The MLP's gate is the second product's epilogue, reading the first product's output
    # (``x @ w1.T`` written, then ``silu(s0) * (x @ w3.T)``: each product its own stage).
    mlp = trace_problem(CASES["llama-mlp"][0])
    assert mlp.stages[0].summary == "matmul x @ self.w1.weight.T with epilogue []"
    gated = mlp.stages[1]
    assert gated.summary == "matmul x @ self.w3.weight.T with epilogue [mul, silu]", gated.summary
    tiles = [n.attrs["ref"] for n in gated.nodes if n.kind == "input" and n.attrs["role"] == "tile"]
    assert tiles == ["acc", "_ke_s0"], gated.summary  # the accumulator, the other product


def test_each_candidate_computes_the_reference_with_and_without_split_k(tmp_path):
    problems = {name: source for name, (source, _, _) in CASES.items()}
    sizes = dict.fromkeys(problems, [{}, {"b": 3, "s": 5, "d": 40, "h": 17}])
    variants = [
        {},
        {"block_m": 16, "block_n": 16, "block_k": 16, "split_k": 2},
        {"mm_block_m": 16, "mm_block_n": 16, "mm_block_k": 16, "mm_split_k": 2},
    ]
    results = check_rendered(problems, variants, sizes, str(tmp_path))
    for name, result in results.items():
        assert len(result["errs"]) == len(variants) * 2, (name, result)
        for err in result["errs"]:
            assert not isinstance(err, str) and err < 1e-4, (name, result["errs"])


def test_the_residual_epilogue_compiles_for_sm90_and_loads_the_tile(tmp_path):
    """Both launches that hold the epilogue (the one-pass kernel and split-K's reduction)
    compile for the H200 with the residual's load in them."""
    source = CASES["residual-linear"][0]
    got = compile_matmul_sm90(source, str(tmp_path), "tf32")
    plain = compile_matmul_sm90(source.replace("r + ", ""), str(tmp_path), "tf32")
    # Each launch that runs the epilogue (the one-pass launch, split-K's reduction) loads the
    # residual on top of what the same product without it loads; the partial launch runs no
    # epilogue and loads as much with it as without.
    for launch in ("whole", "reduce"):
        assert got[launch]["loads"] > plain[launch]["loads"], (launch, got, plain)
    assert got["split"]["loads"] == plain["split"]["loads"], (got, plain)
