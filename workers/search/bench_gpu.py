"""GPU measurement of the search (issue 4): standalone template campaigns over catalog problems.

For each problem: a campaign against the eager baseline, then for its accepted nodes the
production-weighted speedup over ``torch.compile`` (same timings, same bootstrap), the fraction
of measured bandwidth reached per case (the harness's byte floor over the measured median), and
the time to the first accepted kernel.

    python3 -m workers.search.bench_gpu --out $OUT softmax rms_norm ...
"""

from __future__ import annotations

import argparse
import json
import sys
import time


def _refit(report: dict, baseline: str) -> dict | None:
    from workers.gates.fitness import fitness

    cases = [c for c in report.get("cases") or [] if c.get("timing") and c.get("kind") != "edge"]
    if not cases or any(baseline not in (c.get("baselines") or {}) for c in cases):
        return None
    weights = {c["name"]: c["weight"] for c in cases}
    gate = fitness(cases, weights, baseline)
    return gate.get("fitness")


def _bandwidth(report: dict) -> dict:
    out = {}
    for c in report.get("cases") or []:
        t = c.get("timing") or {}
        if c.get("floor_ms") and t.get("median_ms"):
            out[c["name"]] = round(c["floor_ms"] / t["median_ms"], 3)
    return out


def bench_problem(name: str, args) -> dict:
    from workers.catalog import catalog_get
    from workers.evaluate import Evaluator
    from workers.search.engine import campaign_new, campaign_summary, run_campaign

    entry = catalog_get(name)
    state = campaign_new(
        problem_source=entry.problem_source(),
        workload=entry.workload(smoke=args.smoke),
        platform=args.platform,
        max_candidates=args.candidates,
        max_wall_s=args.wall_s,
        branches=3,
        children_per_branch=2,
        seeds=4,
        saturation_rounds=3,
        trials=args.trials,
        problem_name=name,
        baseline=args.baseline,
    )
    t0 = time.time()
    with Evaluator() as ev:
        run_campaign(state, evaluator=ev)
    summary = campaign_summary(state, with_sources=False)
    accepted = [n for n in summary["nodes"] if n["status"] == "accepted"]
    vs_compile = []
    for node in accepted:
        fit = _refit(node["report"], "compile")
        if fit:
            vs_compile.append((fit["speedup"], node["id"], fit))
    best_c = max(vs_compile, default=None, key=lambda x: x[0])
    best = summary["best"]
    best_node = next((n for n in summary["nodes"] if best and n["id"] == best["id"]), None)
    row = {
        "problem": name,
        "outcome": summary["outcome"],
        "stop_reason": summary["stop_reason"],
        "message": summary["message"],
        "evaluated": summary["candidates_evaluated"],
        "funnel": {k: v for k, v in summary["funnel"].items() if not isinstance(v, dict)},
        "device_s_by_gate": summary["funnel"]["device_s_by_gate"],
        "device_s": summary["device_s"],
        "wall_s": time.time() - t0,
        "candidates_per_device_minute": summary["candidates_per_device_minute"],
        "first_accepted": summary["first_accepted"],
        "best_vs_eager": best and best["fitness"],
        "best_id": best and best["id"],
        "best_params": best and best["params"],
        "best_vs_compile_of_eager_best": best_node and _refit(best_node["report"], "compile"),
        "best_vs_compile": best_c and {"node": best_c[1], **best_c[2]},
        "bandwidth_fraction_best": best_node and _bandwidth(best_node["report"]),
        "fingerprint": summary["fingerprint"],
        "harness_hash": summary["harness_hash"],
        "ceilings": (summary.get("baseline") or {}).get("ceilings"),
        "generator": summary["generators"],
    }
    # Keep the nodes without their heavy reports for the record.
    for n in summary["nodes"]:
        n.pop("report", None)
    row["nodes"] = summary["nodes"]
    row["edges"] = summary["edges"]
    return row


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("problems", nargs="+")
    parser.add_argument("--out", required=True)
    parser.add_argument("--candidates", type=int, default=16)
    parser.add_argument("--wall-s", type=float, default=100.0)
    parser.add_argument("--trials", type=int, default=2)
    parser.add_argument("--platform", default="cuda")
    parser.add_argument("--baseline", default="compile", help="the peer a kernel must beat")
    parser.add_argument("--smoke", action="store_true", help="the catalog's tiny workloads")
    args = parser.parse_args(argv)
    rows = []
    for name in args.problems:
        try:
            rows.append(bench_problem(name, args))
        except Exception as exc:  # noqa: BLE001 - record and go on to the next problem
            rows.append({"problem": name, "error": f"{type(exc).__name__}: {exc}"})
        with open(f"{args.out}/search_gpu.json", "w") as fh:
            json.dump(rows, fh, indent=1, default=str)
        r = rows[-1]
        if "error" in r:
            print(f"{name}: ERROR {r['error']}", flush=True)
            continue
        be = r["best_vs_eager"] or {}
        bc = r["best_vs_compile"] or {}
        print(
            f"{name}: {r['outcome']} eval={r['evaluated']} dev={r['device_s']:.1f}s "
            f"wall={r['wall_s']:.0f}s cpm={r['candidates_per_device_minute']} "
            f"eager={be.get('speedup')} ci={be.get('ci95')} "
            f"compile={bc.get('speedup')} ci={bc.get('ci95')} worst={bc.get('worst_case')} "
            f"bw={r['bandwidth_fraction_best']} first={r['first_accepted']} "
            f"funnel={r['funnel']}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
