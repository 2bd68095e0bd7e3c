"""The CuTe softmax template on rows that users' masks make, against ``torch.softmax`` in
float32, on the GPU host (issue 15; docs/benchmarks.md, "the last gaps (session 33)").

    python scripts/cute_masked_rows.py OUT.json

Rows: the dtype's lowest value throughout (a padding row masked as Hugging Face masks), half
-inf, all but three of the lowest value, one NaN, all -inf (NaN in torch too), x1000 and one
spike; for several launch shapes (one CTA, a cluster of 16, the two-barrier exchange, the
two-pass softmax, the row staged in shared memory or kept in registers in its own dtype, the
packed exchange with the cluster along y and streaming cache hints, the row read again
through L2) and widths. A row passes
where its NaNs are torch's and the error is within bf16's or fp32's tolerance. Exits 1 if any
row fails.
"""

from __future__ import annotations

import json
import sys
import tempfile

import torch

from workers.contract.problem import load_module
from workers.search.generators.templates import cute_row

LAUNCHES = [
    {},
    {"stage": 1},
    {"max_cluster": 1, "threads": 128},
    {"max_cluster": 16, "exchange": 0},
    {"online": 0},
    {"stage": 2},
    {"stage": 3},
    {"pack": 1, "order": 1, "cache": 3},
    {"reread": 1},
]
WIDTHS = [
    (32768, torch.bfloat16),
    (4096, torch.float32),
    (262144, torch.bfloat16),
    (1000, torch.bfloat16),
    (131072, torch.float32),
    (3000, torch.float32),
]


def masked_rows(n: int, dtype) -> torch.Tensor:
    torch.manual_seed(0)
    x = torch.randn(8, n, device="cuda", dtype=dtype)
    low = torch.finfo(dtype).min
    x[0] = low
    x[1, : n // 2] = float("-inf")
    x[2, : n - 3] = low
    x[3, 5] = float("nan")
    x[4] = float("-inf")
    x[5] *= 1000
    x[6, n // 3] = 80.0
    return x


def main(out_path: str) -> int:
    results = []
    folder = tempfile.mkdtemp(prefix="ke-masked-")
    for i, params in enumerate(LAUNCHES):
        model = load_module(cute_row.render("softmax", params), f"masked{i}", folder).ModelNew()
        for n, dtype in WIDTHS:
            x = masked_rows(n, dtype)
            y = model(x).float()
            ref = torch.softmax(x.float(), -1)
            nan_ok = bool((torch.isnan(y) == torch.isnan(ref)).all())
            err = (y - ref).abs().nan_to_num(0).max().item()
            ok = nan_ok and err < (2e-2 if dtype == torch.bfloat16 else 1e-5)
            results.append({"params": params, "n": n, "dtype": str(dtype), "nan_ok": nan_ok,
                            "max_abs": err, "ok": ok})  # fmt: skip
            print("OK " if ok else "BAD", params, n, dtype, nan_ok, f"{err:.2e}", flush=True)
    with open(out_path, "w") as fh:
        json.dump(results, fh, indent=1)
    bad = [r for r in results if not r["ok"]]
    print("ALL OK" if not bad else f"{len(bad)} of {len(results)} BAD")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
