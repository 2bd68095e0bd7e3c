"""Replay catalog traffic through a dispatch client that runs from its cached manifest only.

For a GPU host that cannot reach the portal: fetch the manifest once where the portal is
reachable (``DispatchClient(...).refresh()`` fills ``--cache-dir``), carry the folder, then

    python3 -m workers.runtime.bench_offline --cache-dir DIR --platform cuda \\
        --operator layer-norm=layer_norm --operator rms-norm=rms_norm --calls 400 --out OUT.json

Each ``--operator`` maps a registry operator to its catalog problem (whose production workload
sets the shape mix). Prints and writes per-path call counts, latency quantiles and shadow
mismatches; metrics that could not be reported stay in the client's batch (offline).
"""

import argparse
import json
import statistics

from workers.catalog import catalog_get
from workers.runtime.client import DispatchClient
from workers.runtime.replay import replay

OFFLINE_URL = "http://127.0.0.1:9"  # nothing listens: the client must serve from its cache


def _quantile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cache-dir", required=True)
    parser.add_argument("--platform", default="cuda", choices=["interpret", "cuda"])
    parser.add_argument("--operator", action="append", required=True, help="operator=catalog")
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--out")
    args = parser.parse_args()

    client = DispatchClient(
        OFFLINE_URL, "offline", platform=args.platform, cache_dir=args.cache_dir, background=False
    )
    results = {"manifest_version": client.version, "operators": {}}
    for spec in args.operator:
        operator, catalog = spec.split("=", 1)
        entry = catalog_get(catalog)
        summary = replay(
            client,
            operator=operator,
            problem_source=entry.problem_source(),
            workload=entry.workload(),
            calls=args.calls,
        )
        batch = client.metrics.take()
        paths = {}
        for row in batch.get("counts", []):
            lat = row.get("latency_ms") or []
            paths[f"{row['path']}:{row['dtype']}:{row['region']}"] = {
                "calls": row.get("calls"),
                "errors": row.get("errors"),
                "p50_ms": _quantile(lat, 0.5),
                "p99_ms": _quantile(lat, 0.99),
                "mean_ms": statistics.fmean(lat) if lat else None,
            }
        results["operators"][operator] = {
            "calls": summary.calls,
            "seconds": summary.seconds,
            "by_case": summary.by_case,
            "paths": paths,
            "shadow": batch.get("shadow", []),
            "refused": batch.get("refused", []),
            "last_error": client.last_error,
        }
    client.close(flush=False)
    text = json.dumps(results, indent=1, default=str)
    print(text)
    if args.out:
        with open(args.out, "w") as handle:
            handle.write(text)


if __name__ == "__main__":
    main()
