"""Per-case launch tables for the row template (issue 11): a tuned configuration is used for
its shape and only there, every configuration the tuner may pick computes the same result on
the interpreter, and the candidate still passes the static gate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.workers.search.child import run_child
from tests.workers.search.per_case import (
    PerCaseEvaluator,
    per_case_fitness,
    softmax_campaign,
)
from workers.catalog import catalog_get
from workers.gates.static import check_static
from workers.search.generators.template import DEFAULTS, _moment_pairs, render, row_launch_ok
from workers.search.trace import trace_problem
from workers.search.tune import row_space, variants

ROOT = Path(__file__).resolve().parents[3]

VARIANCE = """
import torch
import torch.nn as nn

M = 7
N = 50


class Model(nn.Module):
    def forward(self, x):
        m = x.mean(-1, keepdim=True)
        v = (x - m).pow(2).sum(-1, keepdim=True)
        return (x - m) / torch.sqrt(v + 1.0), x.var(-1, keepdim=True)


def get_inputs():
    return [torch.randn(M, N) * 3 + 100]


def get_init_inputs():
    return []
"""

# (one_pass, ROWS, BLOCK_N, warps, stages, programs, hints): one pass, one pass over several
# rows, looped, looped persistent with hints, one pass persistent; one pass over two chunks
# (32 + 32 lanes for rows of 50), over several rows with hints, and persistent; and looped,
# one pass persistent and two chunks compiled for the shape (M and N constants).
CONFIGS = [
    [1, 1, 64, 2, 1, 0, 0],
    [1, 4, 64, 4, 1, 0, 1],
    [0, 1, 16, 2, 2, 0, 0],
    [0, 2, 16, 1, 3, 3, 1],
    [1, 2, 64, 2, 1, 2, 0],
    [2, 1, 32, 2, 1, 0, 0],
    [2, 4, 32, 4, 1, 0, 1],
    [2, 2, 32, 1, 1, 3, 0],
    [0, 1, 16, 2, 2, 0, 1, 1],
    [1, 2, 64, 2, 1, 2, 0, 1],
    [2, 1, 32, 2, 1, 0, 0, 1],
]

_CHECK = r"""
import json, sys, torch
from workers.contract import problem as P
from workers.search.generators.template import DEFAULTS, render
from workers.search.trace import trace_problem

src, configs = sys.argv[1], json.loads(sys.argv[2])
plan = trace_problem(src)
out = []
for i, cfg in enumerate(configs):
    table = {"7,50,float32": cfg}
    cand = P.load_module(render(plan, {**DEFAULTS["row"], "table": table}), f"c{i}", sys.argv[3])
    prob = P.load_module(src, f"p{i}", sys.argv[3])
    sizes = {"M": 7, "N": 50, "num_tokens": 7, "hidden_size": 50, "batch_size": 7, "dim": 50}
    overrides = {k: v for k, v in sizes.items() if hasattr(prob, k)}
    _, ref, new = P.make_models(prob, cand, overrides, torch.float32, 0, "cpu", None)
    x = P.make_inputs(prob, overrides, torch.float32, 0, "cpu")
    got, want = new(*x), ref(*x)
    got = [got] if isinstance(got, torch.Tensor) else list(got)
    want = [want] if isinstance(want, torch.Tensor) else list(want)
    err = max(float((g - w).abs().max()) for g, w in zip(got, want))
    used = [list(v) for k, v in cand._CONFIGS.items()]
    out.append({"config": cfg, "err": err, "used": used})
print("RESULTS" + json.dumps(out))
"""


def _interpret(src: str, tmp_path) -> list[dict]:
    return run_child(_CHECK, src, json.dumps(CONFIGS), str(tmp_path))


@pytest.mark.parametrize("name", ["layer_norm", "softmax", "residual_rms_norm"])
def test_every_tuned_configuration_computes_the_reference(name, tmp_path):
    """Whatever configuration the tuner picks for a shape, the kernel is still the operator;
    and the table's entry is the one the candidate launches for that shape."""
    results = _interpret(catalog_get(name).problem_source(), tmp_path)
    for r in results:
        assert r["err"] < 1e-4, r
        assert r["used"] == [(r["config"] + [0])[:8]], r


def test_variance_is_one_pass_with_its_mean_and_stays_correct(tmp_path):
    """A centred second moment (LayerNorm's variance, ``var``, ``(x - m).pow(2).sum()``) is
    computed beside its mean in the looped kernel: one read of the row fewer, same numbers,
    on data whose mean is far larger than its spread."""
    plan = trace_problem(VARIANCE)
    assert len(_moment_pairs(plan)) == 2
    assert len(_moment_pairs(trace_problem(catalog_get("layer_norm").problem_source()))) == 1
    assert _moment_pairs(trace_problem(catalog_get("rms_norm").problem_source())) == {}
    source = render(plan, {**DEFAULTS["row"], "strategy": "looped", "block_n": 16})
    looped = source[source.index("def _ke_row_looped") :]
    assert looped.count("for start in range(0, N, BLOCK_N)") == 2 * 2  # two passes, twice
    for r in _interpret(VARIANCE, tmp_path):
        assert r["err"] < 1e-4, r


def test_a_tuned_candidate_passes_the_static_gate():
    for name in ("layer_norm", "softmax"):
        src = catalog_get(name).problem_source()
        table = {"4096,4096,bfloat16": CONFIGS[3], "1,4096,bfloat16": CONFIGS[0]}
        result = check_static(render(trace_problem(src), {**DEFAULTS["row"], "table": table}), src)
        assert result.passed, result.findings


def test_other_shapes_keep_the_policy():
    src = catalog_get("rms_norm").problem_source()
    plan = trace_problem(src)
    table = {"4096,4096,bfloat16": [0, 1, 1024, 8, 2, 264, 1]}
    tuned = render(plan, {**DEFAULTS["row"], "table": table})
    assert '"4096,4096,bfloat16": [0, 1, 1024, 8, 2, 264, 1]' in tuned
    plain = render(plan, DEFAULTS["row"])
    # The policy is the same code in both: only the table differs.
    cut = tuned.index("def _ke_policy")
    assert tuned[cut:] == plain[plain.index("def _ke_policy") :]


def test_search_space_respects_registers_and_row_length():
    for m, n in [(1, 4096), (4096, 5120), (512, 32768), (7, 50)]:
        space = row_space(m, n)
        assert space, (m, n)
        full = 1 << (n - 1).bit_length()
        for one_pass, rows, block, warps, _stages in space:
            per_thread = rows * block // (32 * warps)
            if one_pass == 2:  # two chunks, only where the row is not a power of two
                lanes = block + (1 << (n - block - 1).bit_length())
                assert n != full and block == full // 2 and lanes < full
                assert 1 <= rows * lanes // (32 * warps) <= 64
            elif one_pass:
                assert block == full and 1 <= per_thread <= 64
            else:
                assert block <= full and rows in (1, 2) and 1 <= block // (32 * warps) <= 32
    # Few long rows whose partials combine: segments too, each a launch the template takes.
    few = row_space(16, 1 << 18, segmentable=True)
    cut = [cfg for cfg in few if cfg[0] == 3]
    assert {cfg[5] for cfg in cut} == {32, 64, 128} and all(len(cfg) == 7 for cfg in cut)
    assert all(row_launch_ok(list(cfg), 16, 1 << 18) for cfg in cut)
    assert not any(cfg[0] == 3 for cfg in row_space(16, 1 << 18))
    assert not any(cfg[0] == 3 for cfg in row_space(4096, 4096, segmentable=True))
    assert [v[5:] for v in variants([cut[0]], tiles=1, sms=132)] == [(cut[0][5], 0), (cut[0][5], 1)]
    assert any(cfg[0] == 2 for cfg in row_space(4096, 5120))
    assert not any(cfg[0] == 2 for cfg in row_space(4096, 4096))
    # Persistent launches only where there are more tiles than programs.
    assert all(v[5] == 0 for v in variants([(1, 1, 4096, 8, 1)], tiles=100, sms=132))
    assert any(v[5] == 132 for v in variants([(1, 1, 4096, 8, 1)], tiles=4096, sms=132))


def test_generated_policy_and_its_python_twin_agree(tmp_path):
    """The search reads a parent's configuration per case from its parameters (row_config):
    that must be what the candidate itself launches."""
    import importlib.util
    import random

    from workers.search.generators.template import SPACES, row_config, row_shape

    plan = trace_problem(catalog_get("rms_norm").problem_source())
    rng = random.Random(0)
    for i in range(12):
        params = {**DEFAULTS["row"], **{k: rng.choice(v) for k, v in SPACES["row"].items()}}
        path = tmp_path / f"cand{i}.py"
        path.write_text(render(plan, params))
        spec = importlib.util.spec_from_file_location(f"cand{i}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        for m, n in [(1, 4096), (4096, 5120), (7, 50), (8192, 65536)]:
            want = row_config(params, m, n, "float32", row_shape(plan))
            assert list(module._ke_policy(m, n)) == want, params


def _campaign(evaluator, budget: int) -> dict:
    """A cuda template campaign over softmax with a short-row and a long-row case."""
    return softmax_campaign(evaluator, budget, ["template"])


class _PerCaseEvaluator(PerCaseEvaluator):
    """Speedups per case from the launch configuration each case gets: short rows gain from
    many rows per program, long rows from the looped kernel. No single policy wins both."""

    rows = {"short": (64, 128), "long": (8, 8192)}

    def evaluate(self, req):
        import re

        from workers.search.generators.template import row_config

        params = json.loads(re.search(r"Parameters: (\{.*\})", req.candidate_source).group(1))
        per_case = {}
        for case, (m, n) in self.rows.items():
            cfg = row_config({**DEFAULTS["row"], **params}, m, n, "float32")
            fast = cfg[1] >= 4 if case == "short" else cfg[0] == 0
            per_case[case] = 1.5 if fast else 1.0
        return self.report(fitness=per_case_fitness(per_case))


def test_search_combines_the_fastest_configuration_of_each_case_into_one_candidate(fake_report):
    summary = _campaign(_PerCaseEvaluator(fake_report), budget=12)
    combined = [n for n in summary["nodes"] if n["note"].startswith("per-case crossover")]
    assert combined, [n["note"] for n in summary["nodes"]]
    node = combined[0]
    assert node["edge"] == "crossover" and len(node["parent_ids"]) >= 2
    assert node["fitness"]["per_case"] == {"short": 1.5, "long": 1.5}
    assert set(node["params"]["table"]) == {"64,128,float32", "8,8192,float32"}
    assert summary["best"]["fitness"]["speedup"] == 1.5


class _LandscapeEvaluator(_PerCaseEvaluator):
    """Each case has its own best launch (hidden); a case's speedup falls with the number of
    steps its configuration is from that best."""

    best = {"short": [1, 8, 128, 1, 1, 0, 0], "long": [0, 1, 1024, 4, 2, 0, 1]}

    def evaluate(self, req):
        import math
        import re

        from workers.search.generators.template import row_config

        params = json.loads(re.search(r"Parameters: (\{.*\})", req.candidate_source).group(1))
        per_case = {}
        for case, (m, n) in self.rows.items():
            cfg, want = row_config({**DEFAULTS["row"], **params}, m, n, "float32"), self.best[case]
            steps = 3 * abs(cfg[0] - want[0]) + abs(cfg[4] - want[4]) + abs(cfg[6] - want[6])
            steps += sum(abs(math.log2(cfg[i]) - math.log2(want[i])) for i in (1, 2, 3))
            per_case[case] = round(1.6 * 0.9**steps, 6)
        return self.report(fitness=per_case_fitness(per_case))


def test_per_case_mutation_walks_every_case_to_its_own_best(fake_report):
    """Cases do not share a best launch: the search moves each case's configuration on its own
    (one evaluation measures a step for every case) and combines the winners."""
    summary = _campaign(_LandscapeEvaluator(fake_report), budget=40)
    nodes = summary["nodes"]
    seeds = [n for n in nodes if n["edge"] == "seed"]
    best_seed = max(n["fitness"]["speedup"] for n in seeds)
    assert any(n["note"] == "per-case mutation" for n in nodes)
    assert summary["best"]["fitness"]["speedup"] >= 1.6 * 0.9**1, [
        (n["note"][:40], n["fitness"]["per_case"]) for n in nodes
    ]
    assert summary["best"]["fitness"]["speedup"] > best_seed * 1.2


@pytest.mark.parametrize("name", ["layer_norm", "rms_norm", "residual_rms_norm"])
def test_the_tuned_kernels_in_the_benchmarks_pass_the_static_gate(name):
    """docs/benchmarks.md's re-measurement runs these files as written: they must still be
    candidates the gates accept."""
    src = catalog_get(name).problem_source()
    cand = (ROOT / "docs" / "peers" / f"{name}_tuned_h200.py").read_text()
    result = check_static(cand, src)
    assert result.passed, result.findings


_AOT = r"""
import importlib.util, json, os, sys
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from workers.catalog import catalog_get
from workers.search.generators.template import DEFAULTS, render
from workers.search.trace import trace_problem

path = os.path.join(sys.argv[1], "cand.py")
with open(path, "w") as fh:
    fh.write(render(trace_problem(catalog_get("rms_norm").problem_source()), DEFAULTS["row"]))
spec = importlib.util.spec_from_file_location("cand", path)
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
out = {}
for nc in (0, 8192):
    sig = {"in0_ptr": "*bf16", "in1_ptr": "*bf16", "out0_ptr": "*bf16", "M": "i32", "N": "i32"}
    ce = {"ROWS": 1, "BLOCK_N": 4096, "PROGRAMS": 0, "EV_T": "evict_first",
          "EV_V": "evict_last", "NC": nc, "MC": 8192 if nc else 0, "I32": False, "TREE": True}
    sig.update({k: "constexpr" for k in ce})
    src = ASTSource(fn=mod._ke_row_looped, signature=sig,
                    constexprs={(list(sig).index(k),): v for k, v in ce.items()})
    ptx = triton.compile(src, target=GPUTarget("cuda", 90, 64), options={"num_warps": 8}).asm["ptx"]
    out[nc] = {"branches": ptx.count("bra"), "predicates": ptx.count("setp")}
print("RESULTS" + json.dumps(out))
"""


def test_a_launch_compiled_for_its_shape_loses_its_masks_and_loop_control(tmp_path):
    """The table's shape-constant flag makes M and N compile-time constants (Inductor's
    static-shape kernels have them): for H100/H200 (sm_90) the looped kernel over a row of two
    blocks compiles without its column masks and with a constant trip count."""
    got = run_child(_AOT, str(tmp_path), interpret=False)
    assert got["0"]["branches"] > 0 and got["0"]["predicates"] > 4, got
    assert got["8192"]["branches"] < got["0"]["branches"], got
    assert got["8192"]["predicates"] <= 2, got


_TUNER_PATH = r"""
import json, sys, torch
from workers.search import tune

problem, workload, cand = tune._load(sys.argv[1], sys.argv[2], sys.argv[3])
case = tune._cases(workload)[0]
case["dtype"] = "float32"
key, model, inputs = tune._key_of(problem, cand, case, device="cpu")
out = []
space = tune.row_space(*key[:2], segmentable=bool(cand._SEGMENTS[0]))
segments = [cfg for cfg in space if cfg[0] == 3]
first = None
for cfg in space[:3] + [c[:7] for c in tune.variants(space[:1], 1, 4)] + segments[-2:]:
    tune.set_config(cand, key, cfg)
    got = model(*inputs)
    first = got if first is None else first
    out.append({"config": list(cfg), "used": list(cand._ke_config(*key)),
                "err": float((got - first).abs().max())})
print("RESULTS" + json.dumps({"key": [key[0], key[1]], "runs": out}))
"""


def test_the_tuners_stage_configurations_launch(tmp_path):
    """The tuner sets stage-one configurations (five fields) and stage-two ones (seven) on
    the candidate: each must launch as the full eight-field configuration, or every one
    of them fails and the tuner has nothing to time (as it had on the H200)."""
    problem = tmp_path / "p.py"
    problem.write_text(catalog_get("rms_norm").problem_source())
    workload = tmp_path / "w.json"
    case = {"name": "small", "overrides": {"num_tokens": 3, "hidden_size": 1024}, "weight": 1}
    workload.write_text(json.dumps({"cases": [case]}))
    result = run_child(_TUNER_PATH, str(problem), str(workload), str(tmp_path))
    assert result["key"] == [3, 1024]
    assert len(result["runs"]) >= 6
    # Three rows: rows cut into segments are in the space (their count carried from the
    # start, kept by stage two), and every configuration computes the same values.
    assert sum(run["config"][0] == 3 for run in result["runs"]) >= 3
    for run in result["runs"]:
        assert run["used"] == (run["config"] + [0, 0, 0])[:8], run
        assert run["err"] < 1e-5, run
