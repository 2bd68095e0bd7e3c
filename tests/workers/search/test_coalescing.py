"""Index arithmetic and memory access of the row and pool kernels, read from their sm_90 compile.

Rows along a middle dimension (a sum over dim 1 of (B, R, K)): on the H200 such reductions
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


_DIVISIONS = r"""
import json, sys
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from workers.contract import problem as P
from workers.search.generators.template import DEFAULTS, render
from workers.search.trace import trace_problem

src, kernel, consts = json.loads(sys.argv[1])
plan = trace_problem(src)
module = P.load_module(render(plan, DEFAULTS[plan.family]), "divs", sys.argv[2])
fn = getattr(module, kernel)
out = {}
for i32 in (True, False):
    ce = {**consts, "I32": i32}
    sig = {a: ("*fp32" if a.endswith("_ptr") else "i32") for a in fn.arg_names if a not in ce}
    sig.update({c: "constexpr" for c in ce})
    ttgir = triton.compile(ASTSource(fn=fn, signature=sig, constexprs=ce),
                           target=GPUTarget("cuda", 90, 64), options={"num_warps": 4}).asm["ttgir"]
    lines = [x for x in ttgir.splitlines() if "arith.divsi" in x or "arith.remsi" in x]
    out[str(i32)] = {w: sum(w in x for x in lines) for w in ("i32", "i64")}
print("RESULTS" + json.dumps(out))
"""

GROUP_NORM = (
    "import torch\nimport torch.nn as nn\n\nb = 2\nc = 8\nh = 6\nw = 5\n\n\n"
    "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
    "        self.gn = nn.GroupNorm(4, c)\n\n    def forward(self, x):\n"
    "        return self.gn(x)\n\n\n"
    "def get_inputs():\n    return [torch.randn(b, c, h, w)]\n\n\n"
    "def get_init_inputs():\n    return []\n"
)
MAX_POOL = (
    "import torch\nimport torch.nn as nn\n\nb = 2\nc = 3\nh = 8\nw = 8\n\n\n"
    "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
    "        self.pool = nn.MaxPool2d(2, 2)\n\n    def forward(self, x):\n"
    "        return self.pool(x)\n\n\n"
    "def get_inputs():\n    return [torch.randn(b, c, h, w)]\n\n\n"
    "def get_init_inputs():\n    return []\n"
)


def test_coordinates_are_divided_in_32_bits_where_the_indices_fit(tmp_path):
    """A 64-bit division per element (a group norm's channel of each element, a pooling
    output's coordinates) cost those kernels about half their speed against compile on the
    H200: where the wrapper says the indices fit (I32), no division is 64-bit."""
    row = {"ROWS": 1, "BLOCK_N": 64, "PROGRAMS": 0, "EV_T": "", "EV_V": "", "NC": 0, "MC": 0}
    pool = dict(KD=1, KH=2, KW=2, SD=1, SH=2, SW=2, PD=0, PH=0, PW=0, DD=1, DH=1, DW=1,
                MAX=True, INCLUDE_PAD=True, DIVISOR=0, BLOCK=256)  # fmt: skip
    for source, kernel, consts in (
        (GROUP_NORM, "_ke_row_one_pass", row),
        (MAX_POOL, "_ke_pool", pool),
    ):
        got = run_child(_DIVISIONS, json.dumps([source, kernel, consts]), str(tmp_path),
                        interpret=False)  # fmt: skip
        assert got["True"]["i64"] == 0 and got["True"]["i32"] > 0, (kernel, got)
        assert got["False"]["i64"] > 0, (kernel, got)  # tensors past 2^31 elements stay exact
