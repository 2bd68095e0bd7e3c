"""Matrix products beyond ``x @ W`` (issue 11, KernelBench level 1's batched, transposed and
triangular products): ``torch.bmm``, an einsum of a 4-d tensor and a matrix, either operand
transposed, and ``triu`` / ``tril`` of the product. Each gets a candidate that computes the
reference on the interpreter at two sizes with two tilings; what still does not fit is refused
in one line."""

from __future__ import annotations

import pytest

from tests.workers.search.child import check_rendered
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
    "triu": (_problem("torch.triu(A @ B)", "torch.randn(m, k), torch.randn(k, n)"),
             "epilogue [triu]"),
    "tril-below": (_problem("torch.tril(A @ B, diagonal=-2) * 0.5",
                            "torch.randn(m, k), torch.randn(k, n)"), "epilogue [mul, tril]"),
}  # fmt: skip


def test_each_product_gets_a_correct_candidate(tmp_path):
    problems = {name: source for name, (source, _) in FORMS.items()}
    sizes = {name: [{}, {"b": 3, "m": 33, "k": 40, "n": 19}] for name in problems}
    variants = [{}, {"block_m": 16, "block_n": 16, "block_k": 16}]
    results = check_rendered(problems, variants, sizes, str(tmp_path))
    for name, (_, says) in FORMS.items():
        result = results[name]
        assert result["family"] == "matmul" and says in result["summary"], (name, result)
        assert len(result["errs"]) == 4
        for err in result["errs"]:
            assert not isinstance(err, str) and err < 1e-4, (name, result["errs"])


@pytest.mark.parametrize(
    "forward, inputs, says",
    [
        ("A.t().contiguous() @ B", "torch.randn(k, m), torch.randn(k, n)", "a copy of a permuted"),
        ("torch.bmm(A.transpose(1, 2), B)", "torch.randn(b, k, m), torch.randn(b, k, n)",
         "transposed operand of a batched matmul"),
        ("torch.tril(A) + B", "torch.randn(m, m), torch.randn(m, m)", "outside a matmul"),
    ],
    ids=["copied-transpose", "batched-transpose", "tril-without-product"],
)  # fmt: skip
def test_what_does_not_fit_is_refused_in_one_line(forward, inputs, says):
    with pytest.raises(NoTemplate, match=says):
        trace_problem(_problem(forward, inputs))
