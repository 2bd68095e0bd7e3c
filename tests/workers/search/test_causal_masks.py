"""Causal masks made in the forward from sizes alone (issue 11, "generality"): ``tril`` /
``triu`` of ``ones`` or ``full``, as attention code writes them, beside a softmax or a pointwise
op. They were "ones.default, which no template expresses". Each element's mask is computed from
its coordinates (its column less its row within the matrix, against the diagonal), so the
kernel reads no mask at all; the candidate computes the reference on the interpreter at the
traced sizes and at others, with every row kernel."""

from __future__ import annotations

import pytest

from tests.workers.search.child import check_rendered
from workers.search.trace import NoTemplate, trace_problem


def _problem(forward: str, extra: str = "") -> str:
    return (
        "import torch\nimport torch.nn as nn\n\nb = 2\nh = 3\nt = 24\n\n\n"
        f"class Model(nn.Module):\n    def forward(self, x, y):\n{extra}"
        f"        return {forward}\n\n\n"
        "def get_inputs():\n    return [torch.randn(b, h, t, t), torch.randn(b, h, t, t)]\n\n\n"
        "def get_init_inputs():\n    return []\n"
    )


T = "        T = x.shape[-1]\n"
CASES = {
    # the boolean mask, filled with -inf, then the softmax (GPT-style code written inline)
    "triu-bool-softmax": (
        _problem(
            "x.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool, device=x.device), "
            "diagonal=1), float('-inf')).softmax(-1) * y",
            T,
        ),
        "reductions [max, sum]",
    ),
    # a float lower triangle compared with 0 (the nanoGPT buffer, made in the forward)
    "tril-float-eq-zero": (
        _problem(
            "torch.softmax(x.masked_fill(torch.tril(torch.ones(T, T, device=x.device)) == 0, "
            "float('-inf')) / 8.0, dim=-1) + y",
            T,
        ),
        "reductions [max, sum]",
    ),
    # an additive mask: -inf above the diagonal, 0 on and below it
    "additive-full-triu": (
        _problem(
            "torch.log_softmax(x + torch.full((T, T), float('-inf'), device=x.device).triu(1), "
            "dim=-1) * y.sigmoid()",  # -inf above the diagonal: compared as such
            T,
        ),
        "reductions [max, sum]",
    ),
    # aranges compared: i >= j
    "arange-compared": (
        _problem(
            "torch.where(torch.arange(T, device=x.device)[:, None] >= "
            "torch.arange(T, device=x.device)[None, :], x, -1e9).softmax(-1) + y",
            T,
        ),
        "reductions [max, sum]",
    ),
    # a band two below the diagonal, no reduction: an elementwise kernel
    "tril-of-the-input": (_problem("torch.tril(x * y, diagonal=-2) + y"), "elementwise"),
    "masked-fill-no-reduction": (
        _problem(
            "x.masked_fill(torch.ones(T, T, dtype=torch.bool, device=x.device).triu(3), 0.0) - y",
            T,
        ),
        "elementwise",
    ),
}


def test_each_mask_is_computed_from_coordinates_and_matches_the_reference(tmp_path):
    problems = {name: source for name, (source, _) in CASES.items()}
    sizes = {name: [{}, {"t": 37, "h": 1}, {"t": 5, "b": 3}] for name in problems}
    variants = [
        {},
        {"strategy": "looped", "block_n": 16},
        {"strategy": "one_pass", "max_rows": 4, "tile": 256},
        {"block": 64},
    ]
    results = check_rendered(problems, variants, sizes, str(tmp_path))
    for name, (_, says) in CASES.items():
        result = results[name]
        assert says in result["summary"], (name, result["summary"])
        assert "a band of each matrix (tril/triu" in result["summary"], result["summary"]
        for err in result["errs"]:
            assert not isinstance(err, str) and err < 1e-5, (name, result["errs"])


def test_a_mask_not_over_the_rows_matrices_is_refused_in_one_line():
    """A triangle of a tensor whose last two sizes are not the rows' (here the mask is [t, 1]
    against rows [b, h, t, t]) has no (row, column) of the rows to be computed from."""
    forward = "x.masked_fill(torch.triu(torch.ones(T, 1, dtype=torch.bool, device=x.device)), 0.0)"
    with pytest.raises(NoTemplate, match="whose last two dimensions are not the rows'"):
        trace_problem(_problem(forward, T))


def _kv_problem(forward: str) -> str:
    return (
        "import torch\nimport torch.nn as nn\n\nb = 2\nh = 3\ntq = 8\ntk = 24\n\n\n"
        "class Model(nn.Module):\n    def forward(self, x):\n"
        "        tq, tk = x.shape[-2], x.shape[-1]\n"
        f"        return {forward}\n\n\n"
        "def get_inputs():\n    return [torch.randn(b, h, tq, tk)]\n\n\n"
        "def get_init_inputs():\n    return []\n"
    )


# Queries against a longer KV cache: the last tq of tk positions, each seeing the keys up to
# its own (the mask offset by tk - tq); the arange of the queries is each row within its matrix.
KV_CACHE = {
    "arange-offset": _kv_problem(
        "x.masked_fill(torch.arange(tk, device=x.device)[None, :] > "
        "torch.arange(tq, device=x.device)[:, None] + (tk - tq), float('-inf')).softmax(-1)"
    ),
    "tril-offset": _kv_problem(
        "x.masked_fill(~torch.ones(tq, tk, dtype=torch.bool, device=x.device).tril(tk - tq), "
        "float('-inf')).softmax(-1)"
    ),
}


def test_a_kv_cache_mask_is_computed_from_coordinates(tmp_path):
    sizes = dict.fromkeys(KV_CACHE, [{}, {"tq": 3, "tk": 9}, {"tq": 1, "tk": 20}])
    results = check_rendered(KV_CACHE, [{}, {"strategy": "looped", "block_n": 16}], sizes,
                             str(tmp_path))  # fmt: skip
    for name, result in results.items():
        assert result["family"] == "row", (name, result["summary"])
        for err in result["errs"]:
            assert not isinstance(err, str) and err < 1e-5, (name, result["errs"])
