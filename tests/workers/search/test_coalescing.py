"""Rows along a middle dimension (a sum over dim 1 of (B, R, K)): on the H200 such reductions
ran at 0.87-0.89x of compile (KernelBench 47-49, 53). A tile's rows are adjacent in memory but
their index (``rows // K``, ``rows % K``) hid that from Triton's coalescing analysis, so each
warp spread along the reduced dimension, K elements apart. Compiled for sm_90 here, the
row kernel's tile load must lie along the rows (``order = [0, 1]``) and a last-dimension
reduction's along the columns, as before."""

from __future__ import annotations

import json

from tests.workers.search.child import run_child

_LAYOUT = r"""
import json, re, sys
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from workers.contract import problem as P
from workers.search.generators.template import DEFAULTS, render
from workers.search.trace import trace_problem

out = {}
for name, src in json.loads(sys.argv[1]).items():
    module = P.load_module(render(trace_problem(src), DEFAULTS["row"]), f"l_{name}", sys.argv[2])
    fn = module._ke_row_one_pass
    consts = {"ROWS": 16, "BLOCK_N": 128, "PROGRAMS": 0, "EV_T": "", "EV_V": ""}
    consts.update({"NC": 0, "MC": 0, "I32": False})
    sig = {a: ("*fp32" if a.endswith("_ptr") else "i32") for a in fn.arg_names if a not in consts}
    sig.update({c: "constexpr" for c in consts})
    kernel = triton.compile(ASTSource(fn=fn, signature=sig, constexprs=consts),
                            target=GPUTarget("cuda", 90, 64), options={"num_warps": 4})
    ttgir = kernel.asm["ttgir"]
    layouts = dict(re.findall(r"^(#\w+) = #ttg\.blocked<\{(.*)\}>", ttgir, re.M))
    load = next(line for line in ttgir.splitlines() if "tt.load" in line and "16x128" in line)
    used = re.search(r"16x128x!tt\.ptr<f32>, (#\w+)>", load).group(1)
    out[name] = re.search(r"order = \[(\d), (\d)\]", layouts[used]).groups()
print("RESULTS" + json.dumps(out))
"""

_PROBLEM = (
    "import torch\nimport torch.nn as nn\n\nb = 4\nr = 64\nk = 255\n\n\n"
    "class Model(nn.Module):\n    def forward(self, x):\n        return {expr}\n\n\n"
    "def get_inputs():\n    return [torch.randn(b, r, k)]\n\n\n"
    "def get_init_inputs():\n    return []\n"
)


def test_a_tile_of_rows_along_a_middle_dimension_loads_along_the_rows(tmp_path):
    problems = {
        "middle": _PROBLEM.format(expr="torch.sum(x, dim=1)"),
        "last": _PROBLEM.format(expr="torch.sum(x, dim=-1)"),
    }
    got = run_child(_LAYOUT, json.dumps(problems), str(tmp_path), interpret=False)
    assert got["middle"] == ["0", "1"]  # threads of a warp along the rows: adjacent addresses
    assert got["last"] == ["1", "0"]  # along the row itself
