"""The template generator: parametric Triton kernels for traced operator families, no LLM.

The problem's reference is traced (:mod:`workers.search.trace`) into a family and an expression
IR; this module writes a complete candidate (``ModelNew`` with the reference's constructor and
Triton kernels for its forward) from that IR and a parameter dict. Parameters are policies more
than numbers (a target tile size and elements per thread rather than a fixed ``num_warps``) so
one candidate adapts to every case of a workload; the search mutates them.

Families and their parameters:

- ``elementwise``: ``block``, ``vec`` (elements per thread: sets warps), ``tiles`` per program.
- ``row``: ``strategy`` (``one_pass``: the whole row in registers; ``looped``: one pass per
  reduction level over ``block_n`` chunks; ``auto``: one-pass up to ``max_one_pass``), ``tile``
  (elements per program, so short rows pack several per program), ``max_rows``, ``vec``,
  ``stages``.
- ``matmul``: ``block_m`` (shrunk to the case's M), ``block_n``, ``block_k``, ``group_m``,
  ``warps``, ``stages``; the epilogue (bias, activation) is fused on the accumulator.
- ``attention``: ``block_m`` (rows per program: every query of the query heads that share a
  key/value head), ``block_n``, ``warps``, ``stages`` (and ``decode_*`` for one-tile decode
  rows), ``split`` (flash-decoding parts of the
  key range; 0 fills the GPU), ``causal_align`` (searched only where the trace cannot tell).
- ``cross_entropy``: ``strategy`` (``online`` log-sum-exp in one pass, or ``two_pass``),
  ``block_v``, ``vec``; a second single-program kernel reduces the per-row losses in a fixed
  order, so the result is deterministic.
- ``scan``: ``block`` (columns scanned at once), ``rows`` (per program), ``warps``.
- ``pool``: ``block`` (output elements per program), ``warps``; the window is unrolled.
- ``conv``: ``block_m`` (output positions), ``block_n`` (a group's output channels),
  ``block_k`` (input channels x window), ``warps``, ``stages``, ``fp32_dot``, ``layout``
  (channels-last copies or in place): an implicit GEMM
  over any stride, padding, dilation, groups, transposed or not; ``conv+<family>`` a chain a
  convolution leads (its parameters under ``cv_``).
- ``move``: ``block`` (output elements per program), ``warps``: one op that moves elements
  along any dimension (a cat, a stack, a slice, a pad, a repeat, a flip), alone or as one
  kernel of a chain.
- ``matmul+<family>``: a chain of kernels (products, then the rest: ``Linear`` then a norm or a
  softmax, an MLP): the products' ``matmul`` parameters under ``mm_``, then the last stage's
  family's (:mod:`workers.search.generators.templates.staged`).
"""

from __future__ import annotations

import hashlib
import json
import math
import random

from workers.search.generators.base import (
    EDGE_ALTERNATIVE,
    EDGE_CROSSOVER,
    EDGE_MUTATION,
    EDGE_REPAIR,
    EDGE_SEED,
    GenerationContext,
    Proposal,
    split_tf32_allowed,
    tf32_allowed,
    training,
)
from workers.search.generators.templates.attention import _source_attention, attention_valid
from workers.search.generators.templates.common import _refs
from workers.search.generators.templates.conv import _source_conv
from workers.search.generators.templates.cross_entropy import _source_cross_entropy
from workers.search.generators.templates.elementwise import _source_elementwise
from workers.search.generators.templates.matmul import _source_matmul
from workers.search.generators.templates.move import _source_move
from workers.search.generators.templates.pool import _source_pool
from workers.search.generators.templates.row import (
    _moment_pairs,
    _source_row,
    row_config,
    row_launch_ok,
    row_neighbour,
    row_policy,
    row_shape,
)
from workers.search.generators.templates.scan import _source_scan
from workers.search.generators.templates.staged import (
    CONV_PREFIX,
    PREFIX,
    conv_params,
    source_staged,
    split_params,
)
from workers.search.trace import (
    NoTemplate,
    Plan,
    case_rows_confined,
    trace_problem_confined,
)

# Re-exported: the tuner and the tests read the row family's launch space from here.
__all__ = [
    "DEFAULTS",
    "SEEDS",
    "SPACES",
    "STRUCTURAL",
    "TemplateGenerator",
    "_moment_pairs",
    "render",
    "row_config",
    "row_launch_ok",
    "row_neighbour",
    "row_policy",
    "row_shape",
    "shape_seeds",
]

# The values each parameter may take, in order (mutation moves to a neighbour).
SPACES: dict[str, dict[str, list]] = {
    "elementwise": {
        "block": [256, 512, 1024, 2048, 4096, 8192, 16384],
        "vec": [1, 2, 4, 8, 16],
        "tiles": [1, 2, 4, 8],
    },
    "row": {
        "strategy": ["auto", "one_pass", "looped"],
        "max_one_pass": [2048, 4096, 8192, 16384, 32768, 65536],
        "tile": [512, 1024, 2048, 4096, 8192, 16384, 32768],
        "max_rows": [1, 2, 4, 8, 16, 32, 64],
        "block_n": [64, 128, 256, 512, 1024, 2048, 4096, 8192],
        "vec": [1, 2, 4, 8, 16, 32],
        "stages": [1, 2, 3, 4],
        # 1: the policy's launches specialised to each shape (its sizes compile-time constants,
        # a kernel per shape, as compile's); a tuned table says so per shape
        "static": [0, 1],
    },
    "matmul": {
        "block_m": [16, 32, 64, 128, 256],
        "block_n": [32, 64, 128, 256],
        "block_k": [32, 64, 128],
        "group_m": [1, 4, 8, 16],
        "warps": [2, 4, 8],
        "stages": [2, 3, 4, 5],
        "split_k": [0, 2, 4, 8, 16, 32],
        # float32 operands: IEEE products (CUDA cores) or three TF32 tensor-core products
        # (the operands split in the loop, or once before it: "tf32x3_split")
        "fp32_dot": ["ieee", "tf32x3", "tf32", "tf32x3_split"],
        # tf32 products: an operand read MN-major copied K-major first (templates/matmul.py)
        "kmajor": [0, 1],
    },
    "pool": {
        "block": [64, 128, 256, 512, 1024, 2048],
        "warps": [1, 2, 4, 8],
        # "loop": one thread an output, walking its window; "tile": a window row a vector;
        # "flat": the whole window a vector
        "window": ["loop", "tile", "flat"],
        # 1: the sizes compile-time constants (a kernel per shape, as compile's)
        "static": [0, 1],
    },
    "conv": {
        "block_m": [16, 32, 64, 128, 256],
        "block_n": [16, 32, 64, 128, 256],
        "block_k": [16, 32, 64, 128],
        "warps": [2, 4, 8],
        "stages": [1, 2, 3, 4],
        "fp32_dot": ["ieee", "tf32x3", "tf32"],
        # "cl": input and weight copied channels-last, taps outer; "native": read in place,
        # channels outer; "auto": channels-last where a group has 16 input channels or more
        "layout": ["auto", "cl", "native"],
    },
    "move": {"block": [256, 512, 1024, 2048, 4096, 8192], "warps": [1, 2, 4, 8]},
    "scan": {
        "block": [128, 256, 512, 1024, 2048, 4096, 8192],
        "rows": [1, 2, 4, 8, 16],
        "warps": [1, 2, 4, 8, 16],
        "segments": [0, 1, 2, 4, 8, 16],
        # 1: the row length a compile-time constant (a kernel per length, as compile's)
        "static": [0, 1],
    },
    "cross_entropy": {
        "strategy": ["online", "two_pass"],
        "block_v": [512, 1024, 2048, 4096, 8192, 16384],
        "vec": [2, 4, 8, 16, 32],
    },
    "attention": {
        "block_m": [16, 32, 64, 128],
        "block_n": [16, 32, 64, 128, 256],
        "warps": [1, 2, 4, 8],
        "stages": [1, 2, 3, 4],
        "decode_block_n": [16, 32, 64, 128, 256],
        "decode_warps": [1, 2, 4, 8],
        "decode_stages": [1, 2, 3, 4],
        "split": [0, 1, 2, 4, 8, 16],
        "causal_align": ["bottom_right", "top_left"],
        "fp32_dot": ["ieee", "tf32x3", "tf32"],
    },
}

DEFAULTS: dict[str, dict] = {
    "elementwise": {"block": 2048, "vec": 8, "tiles": 1},
    "row": {
        "strategy": "auto",
        "max_one_pass": 16384,
        "tile": 4096,
        "max_rows": 16,
        "block_n": 2048,
        "vec": 8,
        "stages": 2,
        "static": 0,
    },
    "matmul": {
        "block_m": 128,
        "block_n": 128,
        "block_k": 64,
        "group_m": 8,
        "warps": 8,
        "stages": 3,
        "split_k": 0,  # 0: K is cut where the output's tiles are too few (see _ke_split)
        "fp32_dot": "ieee",
        "kmajor": 0,
    },
    "cross_entropy": {"strategy": "online", "block_v": 4096, "vec": 8},
    # segments 0: by the row count; static 1: the row length a constant (as compile's kernels)
    "scan": {"block": 1024, "rows": 1, "warps": 4, "segments": 0, "static": 1},
    "pool": {"block": 256, "warps": 4, "window": "loop", "static": 1},
    "conv": {
        "block_m": 128,
        "block_n": 64,
        "block_k": 32,
        "warps": 4,
        "stages": 3,
        "fp32_dot": "ieee",
        "layout": "auto",
    },
    "move": {"block": 1024, "warps": 4},
    "attention": {
        "block_m": 64,
        "block_n": 64,
        "warps": 4,
        "stages": 2,
        "decode_block_n": 64,
        "decode_warps": 4,
        "decode_stages": 2,
        "split": 0,
        "causal_align": "bottom_right",
        "fp32_dot": "ieee",
    },
}

# Structural parameters: changing one is an ``alternative`` edge rather than a ``mutation``.
STRUCTURAL = {"strategy", "tiles", "causal_align", "fp32_dot", "kmajor", "layout"}

# Seeds beyond the default: a few structurally different starting points per family.
SEEDS: dict[str, list[dict]] = {
    "elementwise": [{"block": 1024, "vec": 4}, {"block": 4096, "vec": 16, "tiles": 2}],
    "row": [
        {"strategy": "looped", "block_n": 1024, "vec": 4},
        {"tile": 8192, "vec": 16},
        {"tile": 2048, "max_rows": 4, "vec": 4},
    ],
    "matmul": [
        # The default's tiles with float32 products on the tensor cores: cuBLAS's IEEE SGEMM
        # is 2-2.5x the template's (KernelBench L2 on the H200, session 37); this is the
        # lever, and the default beside it measures it.
        {"fp32_dot": "tf32x3"},
        # ... with operands copied K-major where they are not (row-major B, ``x @ W``): the
        # same as the one above where both are K-major already (nn.Linear; _normal folds it)
        {"fp32_dot": "tf32x3", "kmajor": 1},
        # ... with each operand split once, before the product, into TF32 high parts and
        # remainders (K-major buffers): the loop's three products read them as loaded
        {"fp32_dot": "tf32x3_split"},
        {"block_m": 64, "block_n": 128, "block_k": 32, "warps": 4, "stages": 4},
        {"block_m": 128, "block_n": 256, "block_k": 64, "warps": 8, "stages": 3},
        {"block_m": 16, "block_n": 64, "block_k": 128, "warps": 4, "stages": 4, "group_m": 1},
    ],
    "cross_entropy": [{"strategy": "two_pass", "block_v": 2048}, {"block_v": 8192, "vec": 16}],
    "scan": [{"block": 4096, "warps": 8}, {"block": 256, "rows": 4, "warps": 2}],
    "pool": [
        # the window's rows as vectors: few outputs with wide windows, or strides as wide as
        # the window (a tile is then one contiguous run of the input)
        {"window": "tile", "block": 1024, "warps": 4},
        {"block": 1024, "warps": 8},
        {"block": 128, "warps": 2},
    ],
    "conv": [
        # float32 products on the tensor cores (cuDNN's float32 convolutions use TF32 only
        # where torch.backends.cudnn.allow_tf32 says so; the correctness gate judges tf32x3)
        {"fp32_dot": "tf32x3"},
        # smaller tiles, deeper pipeline: the best channels-last tiles on KernelBench 57 and 63
        # on an H100 (session 45; read in place, "native", lost wherever channels-last applies)
        {"fp32_dot": "tf32x3", "block_m": 64, "block_n": 64, "block_k": 32, "stages": 4},
        {"block_m": 128, "block_n": 128, "block_k": 32, "warps": 8, "stages": 3},
        {"block_m": 64, "block_n": 128, "block_k": 32, "warps": 4, "stages": 4},
        {"block_m": 64, "block_n": 32, "block_k": 16, "warps": 2, "stages": 2},
    ],
    "move": [{"block": 4096, "warps": 8}, {"block": 256, "warps": 2}],
    "attention": [
        {"fp32_dot": "tf32x3"},  # float32 q, k, v (KernelBench L1 97: 0.45x of compile, IEEE)
        {"causal_align": "top_left"},
        {"block_m": 128, "block_n": 64, "warps": 8, "stages": 3, "decode_block_n": 128},
        {"block_m": 64, "block_n": 32, "warps": 4, "stages": 3, "decode_warps": 2},
        {"decode_block_n": 32, "decode_stages": 3, "split": 4},
    ],
}

# Staged families (a chain of kernels, products first, named by the last one's family): the
# products' parameters under ``mm_``, then the last stage's (:mod:`...templates.staged`).
STAGED_AFTER = ("row", "elementwise", "scan", "cross_entropy", "pool", "matmul", "move", "conv")
for _rest in STAGED_AFTER:
    _fam = f"matmul+{_rest}"
    SPACES[_fam] = {**{PREFIX + k: v for k, v in SPACES["matmul"].items()}, **SPACES[_rest]}
    DEFAULTS[_fam] = {**{PREFIX + k: v for k, v in DEFAULTS["matmul"].items()}, **DEFAULTS[_rest]}
    _mm = [{PREFIX + k: v for k, v in s.items()} for s in SEEDS["matmul"]]
    # The product takes most of the time: its tensor-core seed goes first.
    SEEDS[_fam] = [_mm[0], *SEEDS[_rest], *_mm[1:]]
    # A chain without products (reductions over two sets of dimensions): the last stage's own.
    SPACES[f"chain+{_rest}"] = SPACES[_rest]
    DEFAULTS[f"chain+{_rest}"] = DEFAULTS[_rest]
    SEEDS[f"chain+{_rest}"] = SEEDS[_rest]
    # A chain with convolutions (KernelBench level 2: a convolution, then pointwise ops and
    # reductions): theirs under ``cv_``, then the last stage's.
    _fam = f"conv+{_rest}"
    SPACES[_fam] = {**{CONV_PREFIX + k: v for k, v in SPACES["conv"].items()}, **SPACES[_rest]}
    _dcv = {CONV_PREFIX + k: v for k, v in DEFAULTS["conv"].items()}
    DEFAULTS[_fam] = {**_dcv, **DEFAULTS[_rest]}
    _cv = [{CONV_PREFIX + k: v for k, v in s.items()} for s in SEEDS["conv"]]
    SEEDS[_fam] = [_cv[0], *SEEDS[_rest], *_cv[1:]]

_SMEM_LIMIT = 200 * 1024  # bytes; H100/H200 allow 227 KB per block, keep headroom


_WRITERS = {
    "elementwise": _source_elementwise,
    "row": _source_row,
    "matmul": _source_matmul,
    "cross_entropy": _source_cross_entropy,
    "scan": _source_scan,
    "pool": _source_pool,
    "conv": _source_conv,
    "move": _source_move,
    "attention": _source_attention,
}


def render(plan: Plan, params: dict) -> str:
    """The complete candidate source for ``plan`` with ``params`` (defaults filled in)."""
    full = _normal(plan, {**DEFAULTS[plan.family], **params})
    if plan.stages:
        return source_staged(plan, full, _WRITERS, DEFAULTS)
    return _WRITERS[plan.family](plan, full)


def _normal(plan: Plan, full: dict) -> dict:
    """Parameters the plan decides are fixed (an attention whose causal diagonal the trace
    shows, or with no mask, has nothing to search there), so equal candidates compare equal."""
    if plan.family == "attention" and (plan.extra.get("align") or not plan.extra.get("causal")):
        full = {**full, "causal_align": plan.extra.get("align") or "bottom_right"}
    products = [s for s in plan.stages if s.family == "matmul"] or (
        [plan] if plan.family == "matmul" else []
    )
    key = PREFIX + "kmajor" if plan.stages else "kmajor"
    dot = full.get(PREFIX + "fp32_dot" if plan.stages else "fp32_dot")
    if full.get(key) and (
        dot in ("ieee", "tf32x3_split") or all(_reads_kmajor(s) for s in products)
    ):
        # nothing to copy: IEEE products, split operands (written K-major), or both read
        # K-major already
        full = {**full, key: 0}
    return full


def _reads_kmajor(plan: Plan) -> bool:
    """Whether a product reads both operands K-major as they are (``x @ W.T``: nn.Linear's
    weight), so that ``kmajor`` copies nothing."""
    return (
        not plan.extra.get("a_transposed")
        and bool(plan.extra.get("b_transposed"))
        and plan.extra.get("batch_b") != "batched"
    )


# ------------------------------------------------------------------------------- the generator


def _valid(family: str, p: dict, plan: Plan | None = None) -> bool:
    if plan is not None and plan.stages:
        products, last = split_params(p)
        ok = not products or _valid("matmul", products)
        ok = ok and (not conv_params(p) or _valid("conv", conv_params(p)))
        return ok and _valid(rest_family(family), last, plan.stages[-1])
    if family == "attention":
        return attention_valid(p, plan.extra["head_dim"] if plan else 128)
    if family in ("matmul", "conv"):
        # the pipelined operand tiles (a convolution's float32: its gather is not narrowed)
        width = 2 if family == "matmul" else 4
        smem = (p["block_m"] * p["block_k"] + p["block_k"] * p["block_n"]) * width * p["stages"]
        if smem > _SMEM_LIMIT:
            return False
        if p["block_m"] * p["block_n"] // (32 * p["warps"]) > 256:  # accumulator registers
            return False
    if family == "elementwise" and p["block"] < 32 * p["vec"]:
        return False
    if family == "scan" and p["rows"] * p["block"] > 32768:  # registers per program
        return False
    return True


def shape_seeds(plan: Plan) -> list[dict]:
    """Seeds the plan's shape calls for, tried before the family's fixed ones.

    Rows along a middle dimension (a sum over dim 1 of [B, R, D]): a tile's rows are adjacent
    in memory and its columns a row of D apart, so the load is as wide as the tile has rows.
    The fixed seeds hold 16 rows (64-byte runs). On an H100 (KernelBench 47, [128, 128, 255],
    docs/benchmarks.md, session 49), launches timed against compile in one process:
    - one pass of 32 rows, 8 warps, specialised to the shape (N, M and K constants): 1.003x;
      of 64 rows, 16 warps: 0.997x; the same launches with the sizes at run time 0.98x;
    - the fixed policy's launch: 0.942x; 64 rows, 8 warps, one stage with run-time sizes
      (what the per-case tuner chose on the H200, accepted there at 1.012x in session 34):
      0.955x through every gate;
    - Inductor's own launch (the looped kernel, 64 rows by 64 columns, 16 warps, one stage):
      0.992x specialised, 0.848x with run-time sizes; so it is not seeded.

    A reduction over the whole tensor to one value (a loss: one row of millions, cut into
    segments; not a norm that then divides every element by it) starts specialised to its
    shape: on an H100 (KernelBench 100, hinge, [2048, 2048], session 49), a constant length
    for a broadcast input was worth 1-3%, and 512 segments of 8192 (8 warps) 0.979x of
    compile against the default's 1024 of 4096, 0.940x.

    A pooling window of more than 32 elements starts as one vector per window ("flat").

    A chain of kernels gets none: its product takes most of the time, and its first seeds
    measure the product's two precisions on the same tiles.
    """
    if plan.family == "pool" and math.prod(plan.extra["kernel"]) > 32:
        # A wide window (KernelBench 45: 11 x 11 at stride 11, 25,600 outputs): the loop's
        # thread walks 121 elements and the tile's rows are 11 wide; compile's kernel reads
        # a window as one vector of 128.
        return [{"window": "flat", "block": 1024, "warps": 4}]
    if plan.family != "row" or plan.stages:
        return []
    if plan.extra.get("red_dim", -1) != -1:
        return [
            {"max_rows": 32, "tile": 4096, "vec": 16, "stages": 1, "static": 1},
            {"max_rows": 64, "tile": 8192, "vec": 16, "stages": 1, "static": 1},
            {"max_rows": 64, "tile": 8192, "vec": 32, "stages": 1},
        ]
    if plan.extra.get("full") and "tile" not in plan.extra.get("output_kinds", ["tile"]):
        return [
            {"block_n": 4096, "vec": 16, "seg_programs": 512, "static": 1},
            {"static": 1},
            {"block_n": 2048, "vec": 8, "seg_programs": 512, "stages": 1, "static": 1},
        ]
    return []


def rest_family(family: str) -> str:
    """The second stage's family of a staged one (``matmul+row`` -> ``row``)."""
    return family.split("+", 1)[-1]


def _key(params: dict) -> str:
    return hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:16]


class TemplateGenerator:
    """Parametric Triton kernels for the traced operator family (see the module docstring)."""

    name = "template"

    def __init__(self) -> None:
        self._plans: dict[str, Plan | NoTemplate] = {}
        self._counts = {"proposed": 0, "no_template": 0}
        self._rows: dict[str, dict] = {}

    def plan(self, problem_source: str, train: bool = False) -> Plan:
        """The problem's plan (traced once per source and mode), or its NoTemplate."""
        key = hashlib.sha256(problem_source.encode()).hexdigest() + (":train" if train else "")
        if key not in self._plans:
            try:
                self._plans[key] = trace_problem_confined(problem_source, train=train)
            except NoTemplate as exc:
                self._plans[key] = exc
        found = self._plans[key]
        if isinstance(found, NoTemplate):
            raise found
        return found

    def describe(self, problem_source: str, train: bool = False) -> dict:
        try:
            plan = self.plan(problem_source, train)
        except NoTemplate as exc:
            return {"fits": False, "summary": f"no template fits: {exc}"}
        return {"fits": True, "family": plan.family, "summary": plan.summary}

    def stats(self) -> dict:
        return dict(self._counts)

    def propose(self, ctx: GenerationContext, n: int) -> list[Proposal]:
        try:
            plan = self.plan(ctx.problem_source, training(ctx.workload))
        except NoTemplate:
            self._counts["no_template"] += 1
            return []
        rng = random.Random(f"{ctx.seed}:{ctx.mode}:{[p.get('id') for p in ctx.parents]}")
        fam = plan.family
        parents = [p for p in ctx.parents if p.get("generator") == self.name and p.get("params")]
        out: list[tuple[dict, str, str]] = []
        if ctx.mode == EDGE_SEED or not parents:
            cands = [dict(DEFAULTS[fam])] + [{**DEFAULTS[fam], **s} for s in SEEDS[fam]]
            cands = [{**DEFAULTS[fam], **s} for s in shape_seeds(plan)] + cands
            dots = [k for k in DEFAULTS[fam] if k.endswith("fp32_dot")]
            if dots and tf32_allowed(ctx.workload):
                # A tolerance that admits TF32 (KernelBench's 1e-2) and no edge cases: the
                # products as the peers run them (cuDNN's float32 convolutions). The default's
                # and the seeds' tiles with one TF32 product go first (IEEE and tf32x3 cost 3x
                # on the tensor cores, or the CUDA cores), the IEEE default third, in case
                # TF32 misses the tolerance
                loose, keys = [], set()
                for c in cands:  # distinct and valid, as the filter below will judge them
                    c = {**c, **{k: "tf32" for k in dots}}
                    full = _normal(plan, c)
                    if _key(full) not in keys and _valid(fam, full, plan):
                        keys.add(_key(full))
                        loose.append(c)
                cands = loose[:2] + cands[:1] + loose[2:] + cands[1:]
            if ctx.attempt > 1:  # asked again: the fixed seeds were tried, go further out
                cands = []
            while len(cands) < n * 4:
                cands.append(self._mutate(fam, dict(DEFAULTS[fam]), rng, k=3))
            out = [(c, EDGE_SEED, "seed") for c in cands]
            tuned = self.tuned(plan, ctx) if ctx.attempt == 1 else None
            if tuned:
                note = "seed tuned per case on this GPU: " + ", ".join(
                    f"{c['name']} {c['speedup']:.3f}x" for c in tuned["cases"]
                )
                out.insert(0, ({**DEFAULTS[fam], "table": tuned["table"]}, EDGE_SEED, note))
        elif ctx.mode == EDGE_REPAIR:
            out = [(c, EDGE_REPAIR, note) for c, note in self._repair(fam, parents[0], ctx, rng, n)]
        elif ctx.mode == EDGE_CROSSOVER and (ctx.feedback or {}).get("per_case"):
            out = self._per_case(plan, ctx, parents)
        elif ctx.mode == EDGE_CROSSOVER and len(parents) >= 2:
            for _ in range(n * 4):
                a, b = parents[0]["params"], parents[1]["params"]
                child = {
                    k: (a if rng.random() < 0.5 else b).get(k, v) for k, v in DEFAULTS[fam].items()
                }
                out.append((child, EDGE_CROSSOVER, "uniform crossover"))
        elif ctx.mode == EDGE_ALTERNATIVE:
            base = {**DEFAULTS[fam], **parents[0]["params"]}
            for key in [k for k in SPACES[fam] if k in STRUCTURAL]:
                for value in SPACES[fam][key]:
                    if value != base[key]:
                        out.append(({**base, key: value}, EDGE_ALTERNATIVE, f"{key}={value}"))
            rng.shuffle(out)
        else:
            base = {**DEFAULTS[fam], **parents[0]["params"]}
            rows = self.case_rows(plan, ctx) if fam == "row" and ctx.platform == "cuda" else {}
            # Once the table covers every case, the policy no longer decides any of them.
            keys = {f"{m},{nn},{dtype}" for m, nn, dtype in rows.values()}
            covered = bool(rows) and keys <= set(base.get("table") or {})
            for i in range(n * 6):
                if rows and (i % 2 == 0 or covered):
                    # Every case's launch moves one step at once: one evaluation measures a
                    # neighbour per case, and the per-case crossover keeps each case's winner.
                    table = dict(base.get("table") or {})
                    for m, nn, dtype in rows.values():
                        cfg = row_config(base, m, nn, dtype, row_shape(plan))
                        table[f"{m},{nn},{dtype}"] = row_neighbour(cfg, m, nn, rng)
                    out.append(({**base, "table": table}, EDGE_MUTATION, "per-case mutation"))
                    continue
                child = self._mutate(fam, base, rng, k=rng.choice([1, 1, 2]), structural=False)
                out.append((child, EDGE_MUTATION, "mutation"))
        proposals, seen = [], set()
        split_tf32, tf32 = split_tf32_allowed(ctx.workload), tf32_allowed(ctx.workload)
        parent_keys = {_key(_normal(plan, {**DEFAULTS[fam], **p["params"]})) for p in parents}
        for params, edge, note in out:
            full = _normal(plan, {**DEFAULTS[fam], **params})
            k = _key(full)
            if k in seen or (edge != EDGE_SEED and k in parent_keys) or not _valid(fam, full, plan):
                continue
            dots = [full.get(f"{pre}fp32_dot") for pre in ("", PREFIX, CONV_PREFIX)]
            if not split_tf32 and ("tf32x3" in dots or "tf32x3_split" in dots):
                continue  # the workload's float32 tolerance is tighter than tf32x3 keeps
            if not tf32 and "tf32" in dots:
                continue  # ... than one TF32 product keeps
            seen.add(k)
            proposals.append(Proposal(render(plan, full), edge, full, note))
            if len(proposals) >= n:
                break
        self._counts["proposed"] += len(proposals)
        return proposals

    def tuned(self, plan: Plan, ctx: GenerationContext) -> dict | None:
        """The campaign's tuner answer ({table, cases}) where it applies to this proposal: a
        row-family problem whose campaign tuned on its GPU host (``workers.search.tuning``;
        the first seed launches, for each case, the configuration the tuner timed fastest
        against compile there: issue 11's "start where compile ends"). A failed answer is
        counted, with its error, in the stats."""
        answer = ctx.tuned
        if not answer or plan.family != "row" or ctx.platform != "cuda":
            return None
        if not answer.get("ok"):
            self._counts["tune_failed"] = 1
            self._counts["tune_error"] = str(answer.get("error") or "")[:300]
            return None
        self._counts["tuned"] = 1
        return answer

    def case_rows(self, plan: Plan, ctx: GenerationContext) -> dict[str, list]:
        """{case: [M, N, dtype]} for the workload's cases (from the problem's own
        ``get_inputs``, behind the sandbox); {} when they cannot be known."""
        cases = [
            {"name": c.get("name"), "overrides": c.get("overrides") or {}, "dtype": c.get("dtype")}
            for c in (ctx.workload or {}).get("cases") or []
        ]
        tiles = _refs(plan, "tile")
        if not cases or not tiles or tiles[0] not in plan.forward_args:
            return {}
        key = hashlib.sha256(
            (ctx.problem_source + json.dumps(cases, sort_keys=True)).encode()
        ).hexdigest()
        if key not in self._rows:
            from workers.boundary import BoundaryUnavailable

            try:
                index = plan.forward_args.index(tiles[0])
                dim = None if plan.extra.get("full") else int(plan.extra.get("red_dim", -1))
                if plan.extra.get("red_from"):  # rows of several trailing dimensions
                    dim = [int(plan.extra["red_from"])]
                self._rows[key] = case_rows_confined(ctx.problem_source, index, cases, dim)
            except BoundaryUnavailable:
                self._rows[key] = {}
        return self._rows[key]

    def _per_case(self, plan: Plan, ctx: GenerationContext, parents: list[dict]):
        """One candidate that launches, for each case, the configuration of the parent that
        was fastest on it (``ctx.feedback["per_case"]``: {case: parent id}); other shapes keep
        the best parent's policy. Row family only: its launch is a pure function of shape."""
        if plan.family != "row" or not parents:
            return []
        rows = self.case_rows(plan, ctx)
        by_id = {p.get("id"): p for p in parents}
        base = {**DEFAULTS["row"], **parents[0]["params"]}
        table = dict(base.get("table") or {})
        taken = []
        for case, pid in sorted(ctx.feedback["per_case"].items()):
            if case not in rows or pid not in by_id:
                continue
            m, n, dtype = rows[case]
            params = {**DEFAULTS["row"], **by_id[pid]["params"]}
            table[f"{m},{n},{dtype}"] = row_config(params, m, n, dtype, row_shape(plan))
            taken.append(f"{case} from {pid}")
        if not taken:
            return []
        note = "per-case crossover: " + ", ".join(taken)
        return [({**base, "table": table}, EDGE_CROSSOVER, note)]

    def _mutate(self, fam: str, base: dict, rng: random.Random, k: int, structural=True) -> dict:
        child = dict(base)
        keys = [key for key in SPACES[fam] if structural or key not in STRUCTURAL]
        for key in rng.sample(keys, min(k, len(keys))):
            values = SPACES[fam][key]
            i = values.index(child[key]) if child[key] in values else 0
            step = rng.choice([-1, 1]) * rng.choice([1, 1, 2])
            child[key] = values[max(0, min(len(values) - 1, i + step))]
        return child

    def _repair(self, fam, parent, ctx, rng, n):
        """Safer variants of a rejected parent: smaller tiles on resource errors, else defaults."""
        base = {**DEFAULTS[fam], **parent["params"]}
        text = json.dumps(ctx.feedback or {}).lower()
        out = []
        if "resource" in text or "shared memory" in text or "registers" in text:
            smaller = dict(base)
            for key in ("stages", "block_k", "block_n", "block_m", "tile", "block", "block_v"):
                if key in smaller:
                    vals = SPACES[fam][key]
                    i = vals.index(smaller[key]) if smaller[key] in vals else 0
                    smaller[key] = vals[max(0, i - 1)]
            out.append((smaller, "smaller tiles after a resource error"))
        out.append((dict(DEFAULTS[fam]), "back to the default configuration"))
        for _ in range(n * 3):
            out.append((self._mutate(fam, dict(DEFAULTS[fam]), rng, k=1), "near the default"))
        return out
