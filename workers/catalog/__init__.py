"""Built-in catalog of problems in the KernelBench format, each with a realistic workload.

Every problem is a module under ``problems/`` (``class Model``, ``get_inputs()``,
``get_init_inputs()``, sizes as module-level constants) with two workloads beside it:
``<name>.json`` (the production-weighted cases a GPU campaign should optimise for) and
``<name>.smoke.json`` (tiny shapes the Triton interpreter gets through in seconds, for CI and
the demo). The Django demo data loads the catalog through :func:`catalog_list`.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

PROBLEMS_DIR = Path(__file__).resolve().parent / "problems"


@dataclass(frozen=True)
class CatalogEntry:
    """One catalog problem: where its files are and what it is."""

    name: str
    family: str
    description: str
    problem_path: Path
    workload_path: Path
    smoke_workload_path: Path

    def problem_source(self) -> str:
        return self.problem_path.read_text()

    def workload(self, *, smoke: bool = False) -> dict:
        return json.loads((self.smoke_workload_path if smoke else self.workload_path).read_text())

    def to_dict(self) -> dict:
        d = asdict(self)
        for key in ("problem_path", "workload_path", "smoke_workload_path"):
            d[key] = str(d[key])
        return d


# name -> (operator family, one-line description); order is the order the demo shows.
_ENTRIES: dict[str, tuple[str, str]] = {
    "softmax": ("softmax", "Row softmax over the last dimension (attention scores, sampling)."),
    "log_softmax": ("softmax", "Row log-softmax over the last dimension (log-probabilities)."),
    "rms_norm": ("normalization", "Llama-style RMSNorm with a learned scale."),
    "layer_norm": ("normalization", "LayerNorm with affine weight and bias."),
    "residual_rms_norm": ("normalization", "Residual add fused with RMSNorm (pre-norm block)."),
    "gelu": ("elementwise", "Exact (erf) GELU over an MLP activation tensor."),
    "silu": ("elementwise", "SiLU (swish) over an MLP activation tensor."),
    "cross_entropy": ("loss", "Mean cross-entropy of LM logits against target token ids."),
    "matmul_bias_act": ("matmul", "Linear layer with bias and tanh-GELU epilogue."),
    "skinny_matmul": ("matmul", "Decode-time skinny GEMM: few rows times a wide weight."),
    "gqa_attention": (
        "attention",
        "Grouped-query causal attention over a KV cache (decode and prefill).",
    ),
}


def catalog_list() -> list[CatalogEntry]:
    """All catalog problems, in display order."""
    return [
        CatalogEntry(
            name=name,
            family=family,
            description=description,
            problem_path=PROBLEMS_DIR / f"{name}.py",
            workload_path=PROBLEMS_DIR / f"{name}.json",
            smoke_workload_path=PROBLEMS_DIR / f"{name}.smoke.json",
        )
        for name, (family, description) in _ENTRIES.items()
    ]


def catalog_get(name: str) -> CatalogEntry:
    """One catalog problem by name; ``KeyError`` if there is none."""
    for entry in catalog_list():
        if entry.name == name:
            return entry
    raise KeyError(f"no catalog problem named {name!r}")
