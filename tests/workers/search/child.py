"""A fresh Python for search tests whose code must run under Triton's interpreter (or must not:
``TRITON_INTERPRET`` has to be chosen before triton is first imported)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def run_child(script: str, *args: str, interpret: bool = True, timeout: int = 300):
    """Run ``script`` with ``args`` in a fresh Python from the repository root and return the
    JSON it prints after ``RESULTS``. ``TRITON_INTERPRET`` is set (or removed) there, since it
    must be chosen before triton is first imported."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(ROOT)
    if interpret:
        env["TRITON_INTERPRET"] = "1"
    proc = subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=timeout,
    )
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULTS")), None)
    assert line, proc.stderr[-3000:]
    return json.loads(line[len("RESULTS") :])


# Every problem's plan rendered with each parameter variant, run against the reference at each
# of its sizes on the interpreter: the largest error relative to 1 + |reference| per run, or a
# string saying how shape or dtype differ.
_RENDERED = r"""
import inspect, json, sys, torch
from workers.contract import problem as P
from workers.search.generators.template import DEFAULTS, render
from workers.search.trace import trace_problem

problems, variants, sizes = (json.loads(a) for a in sys.argv[1:4])
folder = sys.argv[4]
keywords = sys.argv[5:] == ["keywords"]  # the candidate called with its inputs by name
out = {}
for name, src in problems.items():
    plan = trace_problem(src)
    errs = []
    for i, v in enumerate(variants):
        for j, overrides in enumerate(sizes.get(name) or [{}]):
            code = render(plan, {**DEFAULTS[plan.family], **v})
            cand = P.load_module(code, f"c_{name}_{i}_{j}", folder)
            prob = P.load_module(src, f"p_{name}_{i}_{j}", folder)
            _, ref, new = P.make_models(prob, cand, overrides, torch.float32, 0, "cpu", None)
            x = P.make_inputs(prob, overrides, torch.float32, 0, "cpu")
            with torch.no_grad():
                if keywords:  # named as the reference's forward names them
                    names = list(inspect.signature(ref.forward).parameters)
                    got, want = new(**dict(zip(names, x))), ref(*x)
                else:
                    got, want = new(*x), ref(*x)
            got = list(got) if isinstance(got, tuple) else [got]
            want = list(want) if isinstance(want, tuple) else [want]
            err = 0.0
            for g, w in zip(got, want, strict=True):
                if g.shape != w.shape or g.dtype != w.dtype:
                    err = f"{v} {overrides}: {g.shape} {g.dtype} vs {w.shape} {w.dtype}"
                    break
                g, w = g.double(), w.double()
                # NaN and infinities where the reference has them, the same sign (a NaN in the
                # difference would be lost to max() below)
                if not torch.equal(g.isnan(), w.isnan()) or not torch.equal(
                    torch.where(g.isinf(), g, 0.0), torch.where(w.isinf(), w, 0.0)
                ):
                    err = f"{v} {overrides}: NaN or infinities differ from the reference"
                    break
                fin = w.isfinite()
                diff = torch.where(fin, (g - w).abs() / (1 + w.abs()), 0.0)
                err = max(err, float(diff.max()) if diff.numel() else 0.0)
            errs.append(err)
    runtime = [n.attrs["ref"] for n in plan.nodes if n.attrs.get("from_sizes")]
    out[name] = {"family": plan.family, "summary": plan.summary, "errs": errs, "runtime": runtime}
print("RESULTS" + json.dumps(out))
"""


def check_rendered(
    problems: dict, variants: list[dict], sizes: dict, folder: str, keywords: bool = False
) -> dict:
    """{problem: {family, summary, errs, runtime}}: each problem's candidate for every variant
    of its family's parameters at every size in ``sizes[problem]`` (module constants; the
    traced sizes when absent), checked against the reference on the interpreter; with
    ``keywords``, the candidate is called with its inputs named as the reference names them."""
    args = (json.dumps(problems), json.dumps(variants), json.dumps(sizes), folder)
    return run_child(_RENDERED, *args, *(["keywords"] if keywords else []))


def check_chained(problems: dict, folder: str, sizes: dict | None = None) -> None:
    """Graphs one kernel does not hold but a chain of kernels does (each was refused in words
    before the chains, :func:`workers.search.lowering_staged.lower_chain`): each is lowered as a
    chain and its candidate computes the reference on the interpreter, with two launch sets."""
    results = check_rendered(problems, [{}, {"block_n": 16, "block": 64}], sizes or {}, folder)
    for name, got in results.items():
        assert "kernels:" in got["summary"], (name, got["summary"])
        for err in got["errs"]:
            assert not isinstance(err, str) and err < 1e-4, (name, got["errs"])


# The matmul template's kernels compiled ahead of time for sm_90 (no GPU here): a problem's
# The start of a child script that compiles a candidate's kernels ahead of time for the H200's
# architecture (sm_90, no GPU needed): the imports, ``sm90_kernel(fn, constexprs)`` (the
# compiled kernel, its ``asm`` by stage) and ``sm90_ptx(fn, constexprs)``.
SM90 = r"""
import json, sys
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from workers.contract import problem as P
from workers.search.generators.template import DEFAULTS, render
from workers.search.trace import trace_problem


def sm90_kernel(fn, ce, ints=(), types=None):
    # pointers fp32 (int64 where named in ``ints``), the other arguments i32; ``types``
    # overrides any argument's
    sig = {a: ("*i64" if a in ints else "*fp32") if a.endswith("_ptr") else "i32"
           for a in fn.arg_names if a not in ce}
    sig.update({**(types or {}), **{c: "constexpr" for c in ce}})
    return triton.compile(ASTSource(fn=fn, signature=sig, constexprs=ce),
                          target=GPUTarget("cuda", 90, 64), options={"num_warps": 4})


def sm90_ptx(fn, ce, ints=()):
    return sm90_kernel(fn, ce, ints).asm["ptx"]
"""

# plan rendered with the family's defaults, then the one-pass launch, the split-K partial
# launch and the in-order reduction, each compiled with ``PRECISION``. Per launch: the PTX's
# length and its global loads.
_MATMUL_AOT = (
    SM90
    + r"""
module = P.load_module(render(trace_problem(sys.argv[1]), DEFAULTS["matmul"]), "mm", sys.argv[2])
out = {}
tile = {"BLOCK_M": 64, "BLOCK_N": 64, "GROUP_M": 8}
presplit = sys.argv[3] == "tf32x3_split"  # the loop's products are then TF32 ones
dot = {"BLOCK_K": 32, "PRECISION": "tf32" if presplit else sys.argv[3], "UPCAST": False,
       "PRESPLIT": presplit}
launches = [
    ("split", module._ke_matmul, {**tile, **dot, "SPLIT": True}),
    ("whole", module._ke_matmul, {**tile, **dot, "SPLIT": False}),
    ("reduce", module._ke_matmul_reduce, tile),
]
if presplit:
    launches.append(("parts", module._ke_tf32_parts, {"BR": 64, "BC": 64}))
for name, fn, ce in launches:
    ptx = sm90_ptx(fn, ce)
    out[name] = {"length": len(ptx), "loads": ptx.count("ld.global"), "mma": ptx.count("mma.")}
print("RESULTS" + json.dumps(out))
"""
)


def compile_matmul_sm90(source: str, folder: str, precision: str = "ieee") -> dict:
    """{launch: {length, loads}} of the matmul kernels of ``source``'s plan, compiled for sm_90
    (see ``_MATMUL_AOT``)."""
    return run_child(_MATMUL_AOT, source, folder, precision, interpret=False)
