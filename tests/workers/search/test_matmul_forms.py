"""Matrix products beyond ``x @ W`` (issue 11, KernelBench level 1's batched, transposed and
triangular products): ``torch.bmm``, an einsum of a 4-d tensor and a matrix, either operand
transposed, and ``triu`` / ``tril`` of the product. Each gets a candidate that computes the
reference on the interpreter at two sizes with two tilings; what still does not fit is refused
in one line."""

from __future__ import annotations

import pytest
import torch

from tests.workers.search.child import check_rendered, compile_matmul_sm90
from workers.contract.problem import load_module
from workers.search.generators.template import render
from workers.search.trace import NoTemplate, trace_problem

HEADER = "import torch\nimport torch.nn as nn\n\nb = 2\nm = 20\nk = 17\nn = 30\n\n\n"
FOOTER = "\n\ndef get_init_inputs():\n    return []\n"


def _problem(forward: str, inputs: str) -> str:
    return (
        HEADER
        + f"class Model(nn.Module):\n    def forward(self, A, B):\n        return {forward}\n\n\n"
        + f"def get_inputs():\n    return [{inputs}]\n"
        + FOOTER
    )


FORMS = {
    "bmm": (_problem("torch.bmm(A, B)", "torch.randn(b, m, k), torch.randn(b, k, n)"),
            "batched matmul A @ B"),
    "einsum-4d": (
        _problem('torch.einsum("bijl,lk->bijk", A, B)',
                 "torch.randn(b, 3, m, k), torch.randn(k, n)"),
        "batched matmul A @ B",
    ),
    "a-transposed": (_problem("A.T @ B", "torch.randn(k, m), torch.randn(k, n)"),
                     "matmul A.T @ B"),
    "both-transposed": (_problem("torch.matmul(A.T, B.T)", "torch.randn(k, m), torch.randn(n, k)"),
                        "matmul A.T @ B.T"),
    # batched operands read transposed, and 4-d heads (the product's output viewed back)
    "batched-a-transposed": (_problem("torch.bmm(A.transpose(1, 2), B)",
                                      "torch.randn(b, k, m), torch.randn(b, k, n)"),
                             "batched matmul A.T @ B"),
    "batched-both-transposed": (_problem("torch.matmul(A.mT, B.mT)",
                                         "torch.randn(b, k, m), torch.randn(b, n, k)"),
                                "batched matmul A.T @ B.T"),
    "attention-scores": (_problem("(A @ B.transpose(-2, -1)) * 0.125",
                                  "torch.randn(b, 3, m, k), torch.randn(b, 3, n, k)"),
                         "batched matmul A @ B.T"),
    "heads-product": (_problem("torch.relu(A @ B)",
                               "torch.randn(b, 3, m, k), torch.randn(b, 3, k, n)"),
                      "batched matmul A @ B"),
    # einsum views the bmm's output as [b, h, q, 1, k] and moves the 1 before its last view
    # (refused as "a view that changes the row layout" until session 51's held-out run)
    "einsum-scores": (_problem('torch.einsum("bhqd,bhkd->bhqk", A, B)',
                               "torch.randn(b, 3, m, k), torch.randn(b, 3, n, k)"),
                      "batched matmul A @ B.T"),
    "einsum-attention-out": (_problem('torch.einsum("bhqk,bhkd->bhqd", A, B)',
                                      "torch.randn(b, 3, m, k), torch.randn(b, 3, k, n)"),
                             "batched matmul A @ B"),
    "einsum-bmm": (_problem('torch.einsum("bij,bjk->bik", A, B)',
                            "torch.randn(b, m, k), torch.randn(b, k, n)"), "batched matmul A @ B"),
    "triu": (_problem("torch.triu(A @ B)", "torch.randn(m, k), torch.randn(k, n)"),
             "epilogue [triu]"),
    "tril-below": (_problem("torch.tril(A @ B, diagonal=-2) * 0.5",
                            "torch.randn(m, k), torch.randn(k, n)"), "epilogue [mul, tril]"),
}  # fmt: skip


def test_each_product_gets_a_correct_candidate(tmp_path):
    problems = {name: source for name, (source, _) in FORMS.items()}
    sizes = {name: [{}, {"b": 3, "m": 33, "k": 40, "n": 19}] for name in problems}
    # tf32x3_split: each operand split into TF32 high parts and remainders first (the
    # interpreter's TF32 products are exact: the parts must add up to the operand)
    small = {"block_m": 16, "block_n": 16, "block_k": 16}
    variants = [{}, small, {**small, "fp32_dot": "tf32x3_split"}]
    results = check_rendered(problems, variants, sizes, str(tmp_path))
    for name, (_, says) in FORMS.items():
        result = results[name]
        assert result["family"] == "matmul" and says in result["summary"], (name, result)
        assert len(result["errs"]) == 6
        for err in result["errs"]:
            assert not isinstance(err, str) and err < 1e-4, (name, result["errs"])


@pytest.mark.parametrize(
    "forward, inputs, says",
    [
        ("torch.matmul(A.permute(1, 0, 2), B)", "torch.randn(m, b, k), torch.randn(b, k, n)",
         "a matmul operand with strides"),
    ],
    # (a tril without a product: a move kernel, tests/workers/search/test_move.py)
    ids=["batch-not-leading"],
)  # fmt: skip
def test_what_does_not_fit_is_refused_in_one_line(forward, inputs, says):
    with pytest.raises(NoTemplate, match=says):
        trace_problem(_problem(forward, inputs))


# The heads moved after the product (attention's output as [b, q, h, d]): torch views the bmm's
# output as [b, h, q, 1, d] and permutes that. The product's kernel returns its output in that
# view, the move's kernel permutes it (refused until session 52). The operands are named ``p``
# and ``v``, as attention code names them: ``p`` is also the wrappers' parameters (the
# candidate's argument is ``p_``; before, its first call read the parameters' dict as ``p``).
MOVED_HEADS = {
    "attention-out-heads-moved": ("bhqk,bhkd->bqhd",
                                  "torch.randn(b, 3, m, k), torch.randn(b, 3, k, n)"),
    "scores-heads-moved": ("bhqd,bhkd->bqhk", "torch.randn(b, 3, m, k), torch.randn(b, 3, n, k)"),
}  # fmt: skip


def test_an_einsum_that_moves_the_heads_after_the_product_is_a_product_then_a_move(tmp_path):
    problems = {
        name: HEADER
        + "class Model(nn.Module):\n    def forward(self, p, v):\n"
        + f"        return torch.einsum({eq!r}, p, v)\n\n\n"
        + f"def get_inputs():\n    return [{inputs}]\n"
        + FOOTER
        for name, (eq, inputs) in MOVED_HEADS.items()
    }
    sizes = {name: [{}, {"b": 3, "m": 33, "k": 40, "n": 19}] for name in problems}
    results = check_rendered(problems, [{}], sizes, str(tmp_path))
    for name, result in results.items():
        assert result["family"] == "matmul+move", (name, result["summary"])
        assert len(result["errs"]) == 2
        for err in result["errs"]:
            assert not isinstance(err, str) and err < 1e-4, (name, result["errs"])
        code = render(trace_problem(problems[name]), {})
        # p (bound by the wrappers) is p_ inside, and still p to a caller
        assert "def forward(self, p, v):\n        p_ = p\n" in code and ".unsqueeze(3)" in code


def test_a_copy_of_a_permuted_operand_is_a_kernel_of_its_own():
    # Eager copies it; so does the chain (heads split from one projection need it: no
    # strides read them as one batch dimension, tests/workers/search/test_heads.py).
    plan = trace_problem(_problem("A.t().contiguous() @ B", "torch.randn(k, m), torch.randn(k, n)"))
    assert [s.family for s in plan.stages] == ["elementwise", "matmul"], plan.summary


VECTOR_PRODUCTS = {
    "matrix-vector": (_problem("torch.matmul(A, B)", "torch.randn(m, k), torch.randn(k, 1)"),
                      "reductions [sum]"),
    "matrix-vector-op": (_problem("(A @ B) * 2.0", "torch.randn(m, k), torch.randn(k, 1)"),
                         "reductions [sum]"),
    # a dot per (batch, head) as einsum; a batched matrix times a vector
    "einsum-dot": (_problem('torch.einsum("bmk,bmk->bm", A, B)',
                            "torch.randn(b, m, k), torch.randn(b, m, k)"), "reductions [sum]"),
    "bmm-vector": (_problem("torch.bmm(A, B)", "torch.randn(b, m, k), torch.randn(b, k, 1)"),
                   "reductions [sum]"),
    "bmm-dot": (_problem("torch.bmm(A, B)", "torch.randn(b, 1, k), torch.randn(b, k, 1)"),
                "reductions [sum]"),
    "einsum-matvec": (_problem('torch.einsum("mk,k->m", A, B)',
                               "torch.randn(m, k), torch.randn(k)"), "reductions [sum]"),
    # an in-place op on a value the forward made is the functional op
    "in-place-norm": (_problem("(A * A).sum(-1).add_(1.0).sqrt_() * 2.0",
                               "torch.randn(m, k), torch.randn(m, k)"), "reductions [sum]"),
}  # fmt: skip


def test_a_matrix_times_a_vector_is_a_row_reduction(tmp_path):
    """A matrix-vector product as a 128 x 128 tile grid had M / 128 programs (0.05x of compile
    on the H200): it is traced as the reduction it is, and computes the product."""
    problems = {name: source for name, (source, _) in VECTOR_PRODUCTS.items()}
    sizes = {name: [{}, {"m": 33, "k": 300, "n": 19}] for name in problems}
    results = check_rendered(problems, [{}, {"strategy": "looped", "block_n": 16}], sizes,
                             str(tmp_path))  # fmt: skip
    for name, (_, says) in VECTOR_PRODUCTS.items():
        result = results[name]
        assert result["family"] == "row" and says in result["summary"], (name, result)
        for err in result["errs"]:
            assert not isinstance(err, str) and err < 1e-5, (name, result["errs"])
    # a product of two matrices stays one, and so does a vector times a matrix
    assert trace_problem(FORMS["a-transposed"][0]).family == "matmul"
    vm = _problem("torch.mm(A, B)", "torch.randn(1, k), torch.randn(k, n)")
    assert trace_problem(vm).family == "matmul"
    gemm = _problem('torch.einsum("mk,kn->mn", A, B)', "torch.randn(m, k), torch.randn(k, n)")
    assert trace_problem(gemm).family == "matmul"
    # writing into a slice changes the value it views: left in place, and refused
    sliced = _problem("A", "torch.randn(m, k), torch.randn(m, k)").replace(
        "        return A", "        y = A * 2\n        y[:, :3].zero_()\n        return y"
    )
    with pytest.raises(NoTemplate, match="zero_"):
        trace_problem(sliced)


SPLIT_K = {
    "long-k": _problem("A @ B", "torch.randn(m, k), torch.randn(k, n)"),
    "long-k-epilogue": _problem("torch.relu(A @ B) * 2.0", "torch.randn(m, k), torch.randn(k, n)"),
    "bmm-long-k": _problem("torch.bmm(A, B)", "torch.randn(b, m, k), torch.randn(b, k, n)"),
    "linear-bias": (
        "import torch\nimport torch.nn as nn\n\nm = 20\nk = 300\nn = 30\n\n\n"
        "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.fc = nn.Linear(k, n)\n\n    def forward(self, A):\n"
        "        return torch.tanh(self.fc(A)) * 2.0\n\n\n"
        "def get_inputs():\n    return [torch.randn(m, k)]\n" + FOOTER
    ),
}


def test_a_long_k_is_cut_into_ranges_whose_partials_add_in_order(tmp_path):
    """A 256 x 256 output over K = 65536 was 4 tiles on a 132-SM device (0.036x of compile):
    K is cut into ranges, each program sums one, and a second launch adds the fp32 partials in
    a fixed order before the epilogue (bias, activation). Forced here (split_k), and the
    automatic choice on the CPU (132 SMs assumed): none for 5 blocks of K, two ranges for 19."""
    sizes = {name: [{"k": 300}, {"b": 3, "m": 33, "k": 129, "n": 19}] for name in SPLIT_K}
    variants = [{"split_k": 4, "block_k": 16}, {"split_k": 32, "block_k": 16}, {}, {"block_k": 16}]
    results = check_rendered(SPLIT_K, variants, sizes, str(tmp_path))
    for name, result in results.items():
        assert result["family"] == "matmul", (name, result)
        assert len(result["errs"]) == 8
        for err in result["errs"]:
            assert not isinstance(err, str) and err < 1e-4, (name, result["errs"])


def _split_policy(folder: str) -> dict:
    """The split-K policy's functions, from a rendered candidate loaded as a module."""
    module = load_module(render(trace_problem(SPLIT_K["long-k"]), {}), "policy", folder)
    return {name: getattr(module, name) for name in ("_ke_split", "_ke_reduce_tile")}


def test_a_small_output_over_a_long_k_is_cut_into_smaller_tiles_first(tmp_path):
    """KernelBench 6 at the bench's size (256 x 256 over K = 16384) on an H100 was 0.22x of
    compile: 128 x 128 tiles cut 64 ways wrote 16 MB of partials that 4 programs read back.
    On 132 SMs the policy now takes 64 x 64 tiles (4 warps) cut 16 ways, about two programs
    per SM (an H100 grid: 16 ways 0.81x of compile, 8 ways 0.66x, 32 ways 0.73x), and the
    partials are added by programs of about 1024 outputs each."""
    policy, cpu = _split_policy(str(tmp_path)), torch.device("cpu")
    split, bm, bn, warps = policy["_ke_split"]({}, 256, 256, 16384, 1, 128, 128, 64, 8, cpu)
    assert (bm, bn, warps) == (64, 64, 4)
    assert split == 16  # 16 tiles of 64 x 64, ranges of 16 blocks of K: 256 programs
    rbm, rbn = policy["_ke_reduce_tile"](256, 256)
    assert rbm * rbn == 1024 and (256 // rbm) * (256 // rbn) >= 64
    # a large output is left whole; a forced split keeps the searched tile
    assert policy["_ke_split"]({}, 4096, 4096, 4096, 1, 128, 128, 64, 8, cpu) == (1, 128, 128, 8)
    forced = policy["_ke_split"]({"split_k": 4}, 256, 256, 16384, 1, 128, 128, 64, 8, cpu)
    assert forced == (4, 128, 128, 8)


def test_the_split_k_launches_compile_for_sm90(tmp_path):
    """The interpreter runs the split on the CPU; the GPU compiler must take both launches
    (the partial store under SPLIT, the epilogue otherwise, and the in-order reduction)."""
    got = compile_matmul_sm90(SPLIT_K["long-k-epilogue"], str(tmp_path))
    assert set(got) == {"split", "whole", "reduce"}
    assert all(v["length"] > 1000 for v in got.values()), got


def test_the_split_operands_launches_compile_for_sm90(tmp_path):
    """Operands split before the product: the splitting pass and the loop of three TF32
    products (tensor-core instructions) compile for sm_90, split-K or not."""
    got = compile_matmul_sm90(SPLIT_K["long-k-epilogue"], str(tmp_path), "tf32x3_split")
    assert set(got) == {"split", "whole", "reduce", "parts"}
    assert got["whole"]["mma"] > 0 and got["split"]["mma"] > 0, got
    assert got["parts"]["loads"] >= 1 and got["parts"]["mma"] == 0


def test_a_batched_dot_written_with_unsqueeze_is_a_row_reduction(tmp_path):
    """``(a.unsqueeze(-2) @ b.unsqueeze(-1)).squeeze()``, a dot per row the way attention code
    writes it, was refused ("a view that changes the row layout"): ``b.unsqueeze(-1)`` made its
    last dimension 1 on the way. A view that only inserts or drops 1s keeps the row layout;
    the product is each row of a times b, summed."""
    src = (
        "import torch\nimport torch.nn as nn\n\nbatch = 6\ndim = 40\n\n\n"
        "class Model(nn.Module):\n    def forward(self, a, b):\n"
        "        return (a.unsqueeze(-2) @ b.unsqueeze(-1)).squeeze(-1).squeeze(-1)\n\n\n"
        "def get_inputs():\n    return [torch.randn(batch, dim), torch.randn(batch, dim)]\n\n\n"
        "def get_init_inputs():\n    return []\n"
    )
    sizes = {"bdot": [{}, {"batch": 3, "dim": 300}]}
    got = check_rendered({"bdot": src}, [{}, {"strategy": "looped", "block_n": 16}], sizes,
                         str(tmp_path))["bdot"]  # fmt: skip
    assert got["family"] == "row", got
    assert all(isinstance(e, float) and e < 1e-4 for e in got["errs"]), got
