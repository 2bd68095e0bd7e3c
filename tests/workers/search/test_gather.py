"""Rows of a table picked by integer indices (issue 11, "generality"): an embedding lookup,
``table[idx]``, ``index_select``, alone, scaled, with a position table per token added and
layer-normed (a transformer's input embedding), the first rows of a longer position table
(``pos[: idx.shape[1]]``, or the table looked up at ``arange(T)``). Each gets a candidate that
reads each table row where its index points (no copy of the table) and computes the reference
on the interpreter at the traced sizes and at others; ``table[idx]`` counts a negative index
from the end as torch does."""

from __future__ import annotations

import pytest

from tests.workers.search.child import check_chained, check_rendered
from workers.search.trace import NoTemplate, trace_problem


def _problem(forward: str, inputs: str, args: str = "idx, table") -> str:
    return (
        "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"
        "b = 3\nt = 10\nd = 24\nvocab = 50\n\n\n"
        f"class Model(nn.Module):\n    def forward(self, {args}):\n        return {forward}\n\n\n"
        f"def get_inputs():\n    return [{inputs}]\n\n\n"
        "def get_init_inputs():\n    return []\n"
    )


TOKENS = "torch.randint(0, vocab, (b, t)), torch.randn(vocab, d)"
GATHERS = {
    "embedding-scaled": (
        _problem("F.embedding(idx, table) * math.sqrt(table.shape[-1])", TOKENS).replace(
            "import torch\n", "import math\nimport torch\n", 1
        ),
        "elementwise",
    ),
    "negative-indices": (
        _problem("table[idx] + 1.0", "torch.randint(-vocab, vocab, (b, t)), torch.randn(vocab, d)"),
        "elementwise",
    ),
    "index-select": (
        _problem(
            "torch.sigmoid(table.index_select(0, idx))",
            "torch.randint(0, vocab, (b,)), torch.randn(vocab, d)",
        ),
        "elementwise",
    ),
    "embedding-positions-layernorm": (
        _problem(
            "F.layer_norm(F.embedding(idx, table) + pos, (pos.shape[-1],))",
            TOKENS + ", torch.randn(t, d)",
            "idx, table, pos",
        ),
        "row",
    ),
    "positions-prefix": (
        _problem(
            "F.embedding(idx, table) + pos[: idx.shape[1]]",
            TOKENS + ", torch.randn(t + 5, d)",
            "idx, table, pos",
        ),
        "elementwise",
    ),
    # GPT-2's input: the position table looked up at arange(T), its first T rows (session 47)
    "positions-by-arange": (
        _problem(
            "F.embedding(idx, table) + F.embedding(torch.arange(idx.shape[1]), pos)[None]",
            TOKENS + ", torch.randn(t + 5, d)",
            "idx, table, pos",
        ),
        "elementwise",
    ),
    # the prefix given a leading 1 before it is added (its dimensions were misplaced)
    "positions-prefix-unsqueezed": (
        _problem(
            "F.embedding(idx, table) + pos[: idx.shape[1]][None]",
            TOKENS + ", torch.randn(t + 5, d)",
            "idx, table, pos",
        ),
        "elementwise",
    ),
}


def test_gathered_rows_match_the_reference(tmp_path):
    problems = {name: source for name, (source, _) in GATHERS.items()}
    sizes = dict.fromkeys(problems, [{}, {"b": 1, "t": 7, "d": 33, "vocab": 5}])
    variants = [{}, {"strategy": "looped", "block_n": 16, "block": 64}]
    results = check_rendered(problems, variants, sizes, str(tmp_path))
    for name, (_, family) in GATHERS.items():
        assert results[name]["family"] == family, (name, results[name]["summary"])
        assert "table rows gathered by idx" in results[name]["summary"], results[name]["summary"]
        for err in results[name]["errs"]:
            assert not isinstance(err, str) and err < 1e-5, (name, results[name]["errs"])


def test_what_no_gather_covers_says_why():
    with pytest.raises(NoTemplate, match="index is computed"):
        trace_problem(_problem("F.embedding(idx * 2, table)", TOKENS))


def test_gathers_one_kernel_does_not_hold_are_chains(tmp_path):
    """An index also read as a value, gathered rows summed over the tokens (each refused in
    one kernel): the gathered rows are written first, then the rest (test_chain.py)."""
    chained = {
        "index-also-a-value": _problem("F.embedding(idx, table) + idx[..., None]", TOKENS),
        "summed-over-tokens": _problem("table[idx].sum(0)", TOKENS),
    }
    check_chained(chained, str(tmp_path))
