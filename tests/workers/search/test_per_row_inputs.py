"""Inputs with one value per row beside row reductions (issue 11, generality): a ``[rows]``
input that meets a row reduction's value (``(a * a).sum(-1) * t``, a cosine embedding loss's
targets, float or int64) was bound as a weight along the row and refused. It is now read one
value per row, in the row kernels' per-row stage, after any reduction (sum, mean, max, norms)
and in epilogues of its own; each candidate computes the reference on the interpreter with
every row kernel at the traced sizes and at others (odd widths, a square input), compiles for
sm_90, and what stays refused says so in words."""

from __future__ import annotations

import json

import pytest

from tests.workers.search.child import check_chained, run_child
from workers.search.trace import NoTemplate, trace_problem

ROWS = "rows = 16\nn = 8"
OTHER_SIZES = [{}, {"rows": 5, "n": 33}, {"rows": 3, "n": 300}, {"rows": 7, "n": 7}]


def _problem(args: str, body: str, inputs: str, sizes: str = ROWS) -> str:
    return (
        "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"
        f"{sizes}\n\n\nclass Model(nn.Module):\n    def forward(self, {args}):\n"
        f"        return {body}\n\n\ndef get_inputs():\n    return [{inputs}]\n\n\n"
        "def get_init_inputs():\n    return []\n"
    )


X_T = "torch.randn(rows, n), torch.randn(rows)"
TARGETS = "torch.randint(-1, 2, (rows,))"  # +1, -1, and 0 (a target the loss ignores)
PAIR = "torch.randn(rows, n), torch.randn(rows, n)"

# {name: (source, sizes, what the plan's summary says)}
CASES = {
    "sum-times-target": (
        _problem("a, t", "(a * a).sum(-1) * t", X_T), OTHER_SIZES, "reductions [sum]"),
    "mean-keepdim-times-target": (
        _problem("x, t", "x.mean(-1, keepdim=True) * t[:, None]", X_T), OTHER_SIZES,
        "reductions [mean]"),
    "norm-plus-target": (
        _problem("x, t", "torch.linalg.vector_norm(x, dim=-1) + t", X_T), OTHER_SIZES,
        "reductions [sum]"),
    "max-or-min-by-target": (
        _problem("x, t", "torch.where(t > 0, x.amax(-1), x.amin(-1))", X_T), OTHER_SIZES,
        "reductions [max, min]"),
    # broadcast back across the row (worked before; its scale is now loaded once per row)
    "centred-and-scaled-per-row": (
        _problem("x, t", "(x - x.mean(-1, keepdim=True)) * t[:, None]", X_T), OTHER_SIZES,
        "t [16, 1] broadcast (one value per row)"),
    "softmax-weighted-sum-and-epilogue": (
        _problem("x, t", "(x.softmax(-1) * x).sum(-1) * t + t * t", X_T), OTHER_SIZES,
        "reductions [max, sum, sum]"),
    "target-alone-as-an-output": (
        _problem("x, t", "x.sum(-1), t * 2.0 + 1.0", X_T), OTHER_SIZES, "reductions [sum]"),
    "integer-target-times-sum": (
        _problem("x, y", "x.sum(-1) * y", f"torch.randn(rows, n), {TARGETS}"), OTHER_SIZES,
        "y [16, 1] broadcast (one value per row)"),
    "target-folded-as-an-output": (
        _problem("x, t", "x.sum(-1), t.sum()", X_T), OTHER_SIZES,
        "then the sum of a per-row value over every row"),
    "mean-over-rows-of-weighted-sums": (
        _problem("x, t", "(x.sum(-1) * t).mean()", X_T), OTHER_SIZES,
        "then the mean of a per-row value over every row"),
    # one vector both ways: along the row inside the sum, one value per row after it
    "square-input-both-ways": (
        _problem("x, w", "(x * w).sum(-1) * w", "torch.randn(n, n), torch.randn(n)", "n = 8"),
        [{}, {"n": 33}, {"n": 7}], "1 vector(s), w [8, 1] broadcast (one value per row)"),
    # a table per row of 3-d rows
    "table-per-row": (
        _problem("x, t", "x.sum(-1) * t - t", "torch.randn(b, h, n), torch.randn(b, h)",
                 "b = 2\nh = 3\nn = 8"),
        [{}, {"b": 1, "h": 5, "n": 33}], "t [2, 3, 1] broadcast (one value per row)"),
    # other losses with a target per row, from their own decompositions
    "margin-ranking-of-row-sums": (
        _problem("x1, x2, y", "F.margin_ranking_loss(x1.sum(-1), x2.sum(-1), y, margin=0.5)",
                 f"{PAIR}, torch.randn(rows).sign()"), OTHER_SIZES, "reductions [sum, sum]"),
    "hinge-embedding-of-row-norms": (
        _problem("x, y", "F.hinge_embedding_loss(x.norm(dim=-1), y, margin=3.0)",
                 "torch.randn(rows, n), torch.randn(rows).sign()"), OTHER_SIZES,
        "then the mean of a per-row value over every row"),
    "cosine-embedding-float-targets": (
        _problem("x1, x2, y", "F.cosine_embedding_loss(x1, x2, y, margin=0.2)",
                 f"{PAIR}, {TARGETS}.float()"), OTHER_SIZES,
        "reductions [sum, sum, sum], 2 row input(s), 0 vector(s), then the mean"),
    "cosine-embedding-int64-sum": (
        _problem("x1, x2, y", "F.cosine_embedding_loss(x1, x2, y, reduction='sum')",
                 f"{PAIR}, {TARGETS}"), OTHER_SIZES, "then the sum of a per-row value"),
    "cosine-embedding-int64-none": (
        _problem("x1, x2, y", "F.cosine_embedding_loss(x1, x2, y, margin=-0.1, "
                 "reduction='none')", f"{PAIR}, {TARGETS}"), OTHER_SIZES,
        "y [16, 1] broadcast (one value per row)"),
}  # fmt: skip

_CHECK = r"""
import json, sys, torch
from workers.contract import problem as P
from workers.search.generators.template import DEFAULTS, render
from workers.search.trace import trace_problem

cases, folder = json.loads(sys.argv[1]), sys.argv[2]
out = {}
for name, (src, sizes) in cases.items():
    plan = trace_problem(src)
    runs = []
    for i, overrides in enumerate(sizes):
        prob = P.load_module(src, f"p_{name}_{i}", folder)
        x = P.make_inputs(prob, overrides, torch.float32, 0, "cpu")
        m, n = x[0].shape[:-1].numel(), x[0].shape[-1]
        full, key = 1 << (n - 1).bit_length(), f"{m},{n},float32"
        variants = {
            "one pass": {},
            "looped": {"strategy": "looped", "block_n": 16},
            "two chunks": {"table": {key: [2, 2, max(1, full // 2), 2, 1, 0, 0]}},
            "persistent": {"table": {key: [1, 2, full, 2, 1, 3, 1]}},
            "segments": {"table": {key: [3, 1, 16, 1, 1, 3, 0]}},
        }
        for j, (variant, params) in enumerate(variants.items()):
            code = render(plan, {**DEFAULTS["row"], **params})
            cand = P.load_module(code, f"c_{name}_{i}_{j}", folder)
            _, ref, new = P.make_models(prob, cand, overrides, torch.float32, 0, "cpu", None)
            with torch.no_grad():
                got, want = new(*x), ref(*x)
            got = list(got) if isinstance(got, tuple) else [got]
            want = list(want) if isinstance(want, tuple) else [want]
            err = 0.0
            for g, w in zip(got, want, strict=True):
                if g.shape != w.shape or g.dtype != w.dtype:
                    err = f"{g.shape} {g.dtype} vs {w.shape} {w.dtype}"
                    break
                diff = (g.double() - w.double()).abs() / (1 + w.double().abs())
                err = max(err, float(diff.max()) if diff.numel() else 0.0)
            runs.append({"sizes": overrides, "variant": variant, "err": err})
    out[name] = {"family": plan.family, "summary": plan.summary, "runs": runs}
print("RESULTS" + json.dumps(out))
"""


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    cases = {name: [src, sizes] for name, (src, sizes, _) in CASES.items()}
    folder = str(tmp_path_factory.mktemp("per_row"))
    return run_child(_CHECK, json.dumps(cases), folder, timeout=1200)


@pytest.mark.parametrize("name", list(CASES))
def test_a_per_row_input_beside_row_reductions_gets_a_correct_candidate(name, results):
    got = results[name]
    assert got["family"] == "row", got
    assert CASES[name][2] in got["summary"], got["summary"]
    assert len(got["runs"]) == 5 * len(CASES[name][1])
    for run in got["runs"]:
        assert isinstance(run["err"], float) and run["err"] < 1e-5, (name, run)


_EXACT = r"""
import json, sys, torch
from workers.contract import problem as P
from workers.search.generators.template import DEFAULTS, render
from workers.search.trace import trace_problem

src, folder = sys.argv[1], sys.argv[2]
cand = P.load_module(render(trace_problem(src), DEFAULTS["row"]), "c_exact", folder)
prob = P.load_module(src, "p_exact", folder)
_, ref, new = P.make_models(prob, cand, {}, torch.float32, 0, "cpu", None)
x = torch.randn(4, 8)
# Past 2**24 a float32 cannot tell these apart; torch compares int64 targets exactly.
y = torch.tensor([2**24 + 1, 2**24, -(2**24) - 1, 5])
print("RESULTS" + json.dumps([new(x, y).tolist(), ref(x, y).tolist()]))
"""


def test_integer_targets_are_compared_exactly(tmp_path):
    """An int64 target is loaded as it is and compared with a whole number as an integer, so
    targets past float32's exact integers select the rows torch selects."""
    src = _problem(
        "x, y",
        "torch.where(y == 16777217, x.sum(-1), -x.amax(-1))",
        "torch.randn(4, 8), torch.randint(0, 3, (4,))",
    )
    got, want = run_child(_EXACT, src, str(tmp_path))
    assert got == pytest.approx(want, rel=1e-6, abs=1e-6)


_SM90 = r"""
import json, re, sys
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from workers.contract import problem as P
from workers.search.generators.template import DEFAULTS, render
from workers.search.trace import trace_problem

src, folder = sys.argv[1], sys.argv[2]
plan = trace_problem(src)
module = P.load_module(render(plan, DEFAULTS["row"]), "sm90", folder)
types = ["*i64" if n.attrs.get("int_dtype") else "*fp32" for n in plan.inputs()]
row = {"ROWS": 4, "BLOCK_N": 64, "PROGRAMS": 0, "EV_T": "", "EV_V": "", "NC": 0, "MC": 0,
       "I32": False}
launches = [("_ke_row_one_pass", row), ("_ke_row_looped", {**row, "TREE": True}),
            ("_ke_row_split", {**row, "BLOCK_B": 16})]
segs = {"ROWS": 1, "BLOCK_N": 64, "SP": 32, "EV_T": "", "EV_V": "", "I32": False, "TREE": True}
launches += [("_ke_row_segmented", {**segs, "LEVEL": level})
             for level in range(1, module._SEGMENTS[2] + 1)]
out = {}
for name, consts in launches:
    fn = getattr(module, name)
    sig = {a: "i32" for a in fn.arg_names if a not in consts}
    sig.update({f"in{k}_ptr": t for k, t in enumerate(types)})
    sig.update({a: "*fp32" for a in fn.arg_names if a.startswith(("out", "part"))})
    if "count_ptr" in sig:
        sig["count_ptr"] = "*i32"
    sig.update({c: "constexpr" for c in consts})
    kernel = triton.compile(ASTSource(fn=fn, signature=sig, constexprs=consts),
                            target=GPUTarget("cuda", 90, 64), options={"num_warps": 4})
    loads = re.findall(r"tt\.load %\S+, %\S+(?:, %\S+)? : tensor<([\dx]+)x!tt\.ptr<(\w+)>",
                       kernel.asm["ttgir"])
    shapes = sorted(set(map(tuple, loads)))
    out[f"{name}:{consts.get('LEVEL', '')}"] = [len(kernel.asm["ptx"]), shapes]
print("RESULTS" + json.dumps(out))
"""


def test_the_cosine_embedding_loss_kernels_compile_for_sm90(tmp_path):
    """Every row kernel of a cosine embedding loss with int64 targets compiles ahead of time
    for the H200's architecture, and the targets are one [ROWS, 1] load of int64 per row, not a
    load per element."""
    src = _problem("x1, x2, y", "F.cosine_embedding_loss(x1, x2, y)", f"{PAIR}, {TARGETS}")
    got = run_child(_SM90, src, str(tmp_path), interpret=False)
    assert set(got) == {
        "_ke_row_one_pass:", "_ke_row_looped:", "_ke_row_split:", "_ke_row_segmented:1",
    }  # fmt: skip
    for name, (ptx, loads) in got.items():
        assert ptx > 1000, name
        targets = [shape for shape, dtype in loads if dtype == "i64"]
        assert targets == (["1x1"] if "segmented" in name else ["4x1"]), (name, loads)


def test_what_stays_refused_is_said_in_words():
    # an integer input read along the row (no template computes integers per element)
    src = _problem("x, y", "x * (y == 2)", "torch.randn(rows, n), torch.randint(0, 3, (rows, n))")
    with pytest.raises(NoTemplate, match="non-floating input y of dtype torch.int64 is covered"):
        trace_problem(src)


def test_per_row_values_one_kernel_does_not_hold_are_chains(tmp_path):
    """The fold of a target over every row used inside the rows (a weighted mean's divisor), a
    row viewed with a new dimension beside a target per row: each refused in one kernel, each
    a chain now (test_chain.py)."""
    chained = {
        "fold-used-in-the-rows": _problem("x, t", "(x.sum(-1) * t) / t.sum()", X_T),
        "reshaped-row": _problem("x, t", "x.unsqueeze(1).sum(-1).squeeze(1) * t", X_T),
    }
    check_chained(chained, str(tmp_path))
