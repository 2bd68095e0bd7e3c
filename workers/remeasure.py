"""Does a performance verdict reproduce? The same evaluation in N fresh processes, compared.

``python -m workers remeasure --problem P --workload W --candidate C --platform cuda -n 5``
evaluates the candidate N times, each in a new sandbox child (a fresh process: new CUDA context,
new clocks history, new allocator), and reports per case the spread of the candidate's time and
of its speedup across processes, how many re-measured speedups (per case and weighted) fall inside
the first process's interval (widened to the between-process floor), and whether every process
reached the same verdict with the same failing case. The processes share one compile cache
folder, which saves compile time and changes no timing.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import replace

from workers import constants as C
from workers.gates import timing as T
from workers.report import EvaluationReport


def _summary(report: EvaluationReport, baseline: str) -> dict:
    fit = report.fitness or {}
    cases = {}
    for case in report.cases:
        timing = case.timing
        if case.kind != C.CASE_WORKLOAD or timing is None:
            continue
        paired = (case.paired or {}).get(baseline) or {}
        cases[case.name] = {
            "median_ms": timing.median_ms,
            "device_ms": timing.device_median_ms,
            "host_ms": timing.host_median_ms,
            "speedup": paired.get("speedup"),
            "ci95": paired.get("ci95"),
        }
    gate = next((g for g in report.gates if g.status == C.FAILED), None)
    return {
        "verdict": report.verdict,
        "failed": f"{gate.name}:{gate.rule}" if gate else None,
        "reason": report.reason,
        "speedup": fit.get("speedup"),
        "ci95": fit.get("ci95"),
        "worst_case": (fit.get("worst_case") or {}).get("name"),
        "cases": cases,
    }


def _method(report: EvaluationReport) -> str | None:
    """How the performance gate timed (events, warm-up, rounds), when it ran."""
    perf = report.gate(C.GATE_PERFORMANCE)
    return perf.evidence.get("method") if perf else None


def compare(runs: list[dict]) -> dict:
    """Agreement of runs 2..N with run 1, and per-case spreads (plain data, no device)."""
    first = runs[0]
    out = {"processes": len(runs), "cases": {}}
    inside, total = 0, 0
    for name, case in first["cases"].items():
        times = [r["cases"][name]["median_ms"] for r in runs if name in r["cases"]]
        speedups = [r["cases"][name]["speedup"] for r in runs if name in r["cases"]]
        row = {"median_ms": times, "time_spread": T.spread(times)}
        if case.get("ci95") and all(s is not None for s in speedups):
            ci = T.widened(case["ci95"], C.FRESH_PROCESS_FLOOR)
            agree = T.agreement(ci, speedups[1:])
            inside += sum(agree["inside"])
            total += len(agree["inside"])
            row.update(speedup=speedups, speedup_spread=T.spread(speedups), interval=ci)
        out["cases"][name] = row
    out["case_agreement"] = inside / total if total else None
    if first.get("ci95"):
        ci = T.widened(first["ci95"], C.FRESH_PROCESS_FLOOR)
        weighted = T.agreement(ci, [r["speedup"] for r in runs[1:] if r["speedup"] is not None])
        out["weighted"] = {"speedups": [r["speedup"] for r in runs], **weighted}
    verdicts = {(r["verdict"], r["failed"], r["worst_case"] if r["failed"] else None) for r in runs}
    out["same_verdict"] = len(verdicts) == 1
    out["verdicts"] = [{"verdict": r["verdict"], "failed": r["failed"]} for r in runs]
    return out


def remeasure(request, processes: int) -> dict:
    """Evaluate ``request`` in ``processes`` fresh processes (no in-evaluation re-check: each
    process is one measurement) and compare them."""
    from workers.evaluate import Evaluator

    request = replace(request, recheck=False)
    shared = tempfile.mkdtemp(prefix="kernelevolve-remeasure-")
    runs, reports = [], []
    try:
        for _ in range(processes):
            with Evaluator(root=shared) as ev:
                report = ev.evaluate(request)
            reports.append(report)
            runs.append(_summary(report, request.baseline))
    finally:
        shutil.rmtree(shared, ignore_errors=True)
    return {
        "runs": runs,
        "comparison": compare(runs),
        "fingerprint": reports[-1].fingerprint if reports else None,
        "method": _method(reports[-1]) if reports else None,
    }
