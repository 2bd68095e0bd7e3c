"""Gate 5 — fitness: production-weighted speedup over the chosen baseline.

The weighted geometric mean of per-case speedups (baseline median / candidate median, weights =
workload call frequencies) with a bootstrap 95% CI (the timing samples of both sides resampled
per case), the worst case, and whether any weighted case regresses beyond the tolerance. A
candidate passes when no case regresses and the CI's lower end is above 1 (a significant gain).
"""

from __future__ import annotations

import math
import time

import numpy as np

from workers import constants as C


def fitness(
    perf_cases: list[dict],
    weights: dict[str, float],
    baseline: str,
    regression_tolerance: float = C.DEFAULT_REGRESSION_TOLERANCE,
    seed: int = 0,
) -> dict:
    """Returns a gate dict: status, rule, reason, fitness (or None), wall_s."""
    start = time.perf_counter()
    rows = []
    for case in perf_cases:
        w = float(weights.get(case["name"], 0.0))
        if w <= 0:
            continue
        base = (case.get("baselines") or {}).get(baseline)
        if not base:
            return {
                "status": C.FAILED,
                "rule": "missing_baseline",
                "reason": f"no {baseline} timing for case {case['name']}",
                "fitness": None,
                "wall_s": time.perf_counter() - start,
            }
        rows.append((case["name"], w, case["timing"], base))
    if not rows:
        return {
            "status": C.SKIPPED,
            "rule": None,
            "reason": "skipped: no weighted case was timed",
            "fitness": None,
            "wall_s": time.perf_counter() - start,
        }
    names = [r[0] for r in rows]
    w = np.asarray([r[1] for r in rows])
    w = w / w.sum()
    speedups = np.asarray([r[3]["median_ms"] / r[2]["median_ms"] for r in rows])
    geo = float(math.exp(float(np.sum(w * np.log(speedups)))))
    rng = np.random.default_rng(seed)
    boot = np.zeros(C.BOOTSTRAP_RESAMPLES)
    for i, (_, _, cand, base) in enumerate(rows):
        cs = np.asarray(cand.get("samples_ms") or [cand["median_ms"]])
        bs = np.asarray(base.get("samples_ms") or [base["median_ms"]])
        cm = np.median(cs[rng.integers(0, len(cs), (C.BOOTSTRAP_RESAMPLES, len(cs)))], axis=1)
        bm = np.median(bs[rng.integers(0, len(bs), (C.BOOTSTRAP_RESAMPLES, len(bs)))], axis=1)
        boot += w[i] * np.log(bm / cm)
    boot = np.exp(boot)
    ci = [float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5))]
    worst_i = int(np.argmin(speedups))
    per_case = {n: float(s) for n, s in zip(names, speedups, strict=True)}
    regressions = [n for n, s in per_case.items() if s < 1.0 - regression_tolerance]
    flagged = [n for n, s in per_case.items() if s > C.REVIEW_SPEEDUP]
    result = {
        "speedup": geo,
        "ci95": ci,
        "baseline": baseline,
        "worst_case": {"name": names[worst_i], "speedup": float(speedups[worst_i])},
        "regresses": bool(regressions),
        "regressions": regressions,
        "per_case": per_case,
        "review": flagged,
        "regression_tolerance": regression_tolerance,
    }
    if regressions:
        status, rule = C.FAILED, C.RULE_REGRESSION
        reason = (
            f"speedup {geo:.3f}x over {baseline} but case {regressions[0]} regresses to "
            f"{per_case[regressions[0]]:.3f}x (tolerance {regression_tolerance:.0%})"
        )
    elif ci[0] <= 1.0:
        status, rule = C.FAILED, C.RULE_NOT_FASTER
        reason = (
            f"speedup {geo:.3f}x over {baseline}, 95% CI [{ci[0]:.3f}, {ci[1]:.3f}] includes "
            "no gain: not significantly faster"
        )
    else:
        status, rule = C.PASSED, None
        reason = (
            f"speedup {geo:.3f}x over {baseline} (95% CI [{ci[0]:.3f}, {ci[1]:.3f}]); worst "
            f"{names[worst_i]} {speedups[worst_i]:.3f}x"
        )
    if flagged:
        reason += f"; flagged for review: >{C.REVIEW_SPEEDUP:.0f}x on {', '.join(flagged)}"
    return {
        "status": status,
        "rule": rule,
        "reason": reason,
        "fitness": result,
        "wall_s": time.perf_counter() - start,
    }
