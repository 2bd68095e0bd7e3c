"""The back-end table (issue 15): from a campaign that searched both back ends (``python -m
workers search ... --generator template,cute --json C.json``), time again, in this fresh
process and on every case, the best candidate of each back end (Triton, CuTe DSL, and the
per-case mix of the two) beside ``torch.compile`` and an incumbent peer (QuACK:
``workers/catalog/peers``), and print one row per case.

    python3 -m workers.search.bench_backends --campaign C.json \\
        --incumbent workers/catalog/peers/quack_softmax.py --out $OUT/table.json

The problem and workload are the campaign's own. Each candidate's gates run as in a campaign,
except that no case ends the timing early (``time_every_case``) and nothing is re-checked: this
run is the re-check. The compute core: no Django here.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys

from workers import constants as C
from workers.cute_dsl import declared_backend

TIMED_GATES = (C.GATE_PERFORMANCE, C.GATE_FITNESS)


def best_by_backend(campaign: dict) -> dict[str, dict]:
    """For each back end, the campaign's best timed node: accepted ones first, then the
    highest fitness (over the cases it was timed on)."""
    best: dict[str, tuple] = {}
    for node in campaign.get("nodes") or []:
        fit = node.get("fitness") or {}
        timed = node.get("status") == C.ACCEPTED or node.get("failed_gate") in TIMED_GATES
        if not fit.get("speedup") or not timed or not node.get("source"):
            continue
        backend = declared_backend(node["source"])
        rank = (node.get("status") == C.ACCEPTED, fit["speedup"])
        if backend not in best or rank > best[backend][0]:
            best[backend] = (rank, node)
    return {backend: node for backend, (_, node) in best.items()}


def _ms(timing: dict | None) -> float | None:
    return (timing or {}).get("median_ms")


def table(campaign: dict, incumbent: str | None, trials: int = 1) -> dict:
    from workers.evaluate import EvaluationRequest, Evaluator

    cfg = campaign.get("config") or {}
    picked = best_by_backend(campaign)
    rows: dict[str, dict] = {}
    runs = {}
    with Evaluator() as ev:
        for backend, node in sorted(picked.items()):
            request = EvaluationRequest(
                problem_source=cfg["problem_source"],
                candidate_source=node["source"],
                workload=cfg.get("workload"),
                platform=C.PLATFORM_CUDA,
                incumbent_source=incumbent,
                baseline=C.BASELINE_INCUMBENT if incumbent else C.BASELINE_COMPILE,
                trials=trials,
                recheck=False,
                time_every_case=True,
            )
            report = ev.evaluate(request).to_dict()
            runs[backend] = {
                "node": node["id"],
                "campaign_fitness": node.get("fitness"),
                "verdict": report["verdict"],
                "reason": report["reason"],
                "fitness": report.get("fitness"),
                "fingerprint": report.get("fingerprint"),
            }
            for case in report.get("cases") or []:
                if case.get("kind") == C.CASE_EDGE or not case.get("timing"):
                    continue
                row = rows.setdefault(case["name"], {"weight": case.get("weight")})
                peers = case.get("baselines") or {}
                for peer in (C.BASELINE_EAGER, C.BASELINE_COMPILE, C.BASELINE_INCUMBENT):
                    if _ms(peers.get(peer)) is not None:
                        row.setdefault(peer, []).append(_ms(peers[peer]))
                row[backend] = _ms(case["timing"])
                if case.get("floor_ms"):
                    row.setdefault("floor_ms", case["floor_ms"])
    return {"candidates": runs, "cases": _summarise(rows)}


def _summarise(rows: dict) -> dict:
    """Peers' medians over the runs (each candidate run timed them again), the best of both
    back ends and its speedup over the strongest peer."""
    out = {}
    for name, row in rows.items():
        r = {"weight": row.get("weight")}
        for peer in (C.BASELINE_EAGER, C.BASELINE_COMPILE, C.BASELINE_INCUMBENT):
            if row.get(peer):
                r[peer] = statistics.median(row[peer])
        for backend in C.BACKENDS:
            if row.get(backend) is not None:
                r[backend] = row[backend]
        ours = [r[b] for b in C.BACKENDS if r.get(b)]
        peers = [r[p] for p in (C.BASELINE_COMPILE, C.BASELINE_INCUMBENT) if r.get(p)]
        if ours and peers:
            r["best_ours"] = min(ours)
            r["best_peer"] = min(peers)
            r["speedup_vs_best_peer"] = round(r["best_peer"] / r["best_ours"], 4)
        if row.get("floor_ms") and ours:
            r["bandwidth_fraction"] = round(row["floor_ms"] / min(ours), 3)
        out[name] = r
    return out


def markdown(result: dict) -> str:
    cols = [C.BASELINE_COMPILE, C.BASELINE_INCUMBENT, *C.BACKENDS]
    head = ["case", "compile", "incumbent", "Triton", "CuTe", "CuTe+Triton",
            "best ours / best peer", "of bandwidth"]  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    speedups, weights = [], []
    for name, r in result["cases"].items():
        cells = [f"{r[c] * 1000:.1f} us" if r.get(c) else "-" for c in cols]
        s = r.get("speedup_vs_best_peer")
        bw = r.get("bandwidth_fraction")
        lines.append(
            f"| {name} | " + " | ".join(cells) + f" | {f'{s:.3f}x' if s else '-'} | "
            f"{f'{bw:.2f}' if bw else '-'} |"
        )
        if s:
            speedups.append(s)
            weights.append(r.get("weight") or 1.0)
    if speedups:
        g = math.exp(
            sum(w * math.log(s) for s, w in zip(speedups, weights, strict=True)) / sum(weights)
        )
        lines.append(f"\nweighted geometric mean, best of ours over the best peer: {g:.3f}x")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workers.search.bench_backends")
    parser.add_argument("--campaign", required=True, help="a campaign JSON (workers search)")
    parser.add_argument("--incumbent", help="a peer in candidate form (workers/catalog/peers)")
    parser.add_argument("--trials", type=int, default=1)
    parser.add_argument("--out", help="write the result as JSON here")
    args = parser.parse_args(argv)
    with open(args.campaign) as fh:
        campaign = json.load(fh)
    incumbent = None
    if args.incumbent:
        with open(args.incumbent) as fh:
            incumbent = fh.read()
    result = table(campaign, incumbent, args.trials)
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(result, fh, indent=1)
    for backend, run in result["candidates"].items():
        print(f"{backend}: {run['node']} {run['verdict']} - {run['reason']}")
    print(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
