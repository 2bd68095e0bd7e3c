"""Gate 5 — fitness: production-weighted speedup over the chosen baseline.

The weighted geometric mean of per-case speedups (weights = workload call frequencies) with a
bootstrap 95% CI, the worst case, and whether any weighted case regresses beyond the tolerance.
A case timed in paired rounds (``workers.gates.timing``) contributes the median of its
per-round ratios and resamples whole rounds; one without (timings from elsewhere) falls back to
the ratio of medians, each side resampled on its own. A candidate passes when no case regresses
and the CI's lower end is above 1 (a significant gain).
"""

from __future__ import annotations

import math
import time

import numpy as np

from workers import constants as C
from workers.gates.timing import widened


def fitness(
    perf_cases: list[dict],
    weights: dict[str, float],
    baseline: str,
    regression_tolerance: float = C.DEFAULT_REGRESSION_TOLERANCE,
    seed: int = 0,
) -> dict:
    """Returns a gate dict: status, rule, reason, fitness (or None), wall_s."""
    start = time.perf_counter()
    rows, peers, misses, behind_eager = [], {}, {}, {}
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
        ratios = ((case.get("paired") or {}).get(baseline) or {}).get("ratios")
        rows.append((case["name"], w, case["timing"], base, ratios))
        if base.get("peer"):
            peers[case["name"]] = base["peer"]
        eager = ((case.get("paired") or {}).get(C.BASELINE_EAGER) or {}).get("speedup")
        if baseline != C.BASELINE_EAGER and eager is not None and eager < 1 - regression_tolerance:
            behind_eager[case["name"]] = float(eager)
        check = (case.get("peer_checks") or {}).get(base.get("peer") or baseline)
        if check and not check["passes"]:
            misses[case["name"]] = {"peer": base.get("peer") or baseline, **check}
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
    rng = np.random.default_rng(seed)
    boot = np.zeros(C.BOOTSTRAP_RESAMPLES)
    speedups = []
    for i, (_, _, cand, base, ratios) in enumerate(rows):
        if ratios:
            # Paired rounds: resample whole rounds, so drift shared by both sides cancels.
            r = np.asarray(ratios, dtype=np.float64)
            speedups.append(float(np.median(r)))
            idx = rng.integers(0, len(r), (C.BOOTSTRAP_RESAMPLES, len(r)))
            boot += w[i] * np.log(np.median(r[idx], axis=1))
            continue
        speedups.append(base["median_ms"] / cand["median_ms"])
        cs = np.asarray(cand.get("samples_ms") or [cand["median_ms"]])
        bs = np.asarray(base.get("samples_ms") or [base["median_ms"]])
        cm = np.median(cs[rng.integers(0, len(cs), (C.BOOTSTRAP_RESAMPLES, len(cs)))], axis=1)
        bm = np.median(bs[rng.integers(0, len(bs), (C.BOOTSTRAP_RESAMPLES, len(bs)))], axis=1)
        boot += w[i] * np.log(bm / cm)
    speedups = np.asarray(speedups)
    geo = float(math.exp(float(np.sum(w * np.log(speedups)))))
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
    over = baseline
    if peers:
        # The best peer per case: say which one each case was judged against.
        result["peers"] = peers
        over = "the best peer per case"

    def against(name: str) -> str:
        return f" (against {peers[name]})" if name in peers else ""

    if regressions:
        status, rule = C.FAILED, C.RULE_REGRESSION
        reason = (
            f"speedup {geo:.3f}x over {over} but case {regressions[0]} regresses to "
            f"{per_case[regressions[0]]:.3f}x{against(regressions[0])} "
            f"(tolerance {regression_tolerance:.0%})"
        )
    elif ci[0] <= 1.0:
        status, rule = C.FAILED, C.RULE_NOT_FASTER
        reason = (
            f"speedup {geo:.3f}x over {over}, 95% CI [{ci[0]:.3f}, {ci[1]:.3f}] includes "
            "no gain: not significantly faster"
        )
    else:
        status, rule = C.PASSED, None
        reason = (
            f"speedup {geo:.3f}x over {over} (95% CI [{ci[0]:.3f}, {ci[1]:.3f}]); worst "
            f"{names[worst_i]} {speedups[worst_i]:.3f}x{against(names[worst_i])}"
        )
    if flagged:
        reason += f"; flagged for review: >{C.REVIEW_SPEEDUP:.0f}x on {', '.join(flagged)}"
    if behind_eager:
        # Eager is timed beside every verdict but is not a peer: where the judged peer is
        # slower than eager (compile on some depthwise convolutions), beating it can still
        # leave the kernel behind what the user gets without compiling.
        result["behind_eager"] = behind_eager
        name, ratio = min(behind_eager.items(), key=lambda item: item[1])
        reason += (
            f"; slower than eager on {len(behind_eager)} case(s), worst {name} {ratio:.3f}x "
            "(eager is shown, not judged)"
        )
    if misses:
        # Judged against all the same: a faster peer that is less precise still says what
        # the user's current stack does; the verdict says it is not within the contract.
        result["peer_misses"] = misses
        name, miss = next(iter(misses.items()))
        err = miss.get("max_abs_err")
        reason += (
            f"; the judged peer misses the contract on {len(misses)} case(s), first "
            f"{name}: {miss['peer']}"
            + (f" max abs err {err:.3g}" if err is not None else f": {miss['reason']}")
        )
    return {
        "status": status,
        "rule": rule,
        "reason": reason,
        "fitness": result,
        "wall_s": time.perf_counter() - start,
    }


def recheck_skipped(first: dict, best: float) -> dict:
    """The passing gate dict of an acceptance not re-measured in a fresh process: its interval's
    lower bound is at most ``best`` (the campaign's best so far), so it cannot become the
    campaign's best (a new best must clear the old one beyond noise, and a fresh process only
    lowers the bound) and nothing is promoted on it alone; the reason and
    ``fitness["recheck"]`` say so."""
    fit = first["fitness"]
    why = (
        f"{fit['speedup']:.3f}x [{fit['ci95'][0]:.3f}, {fit['ci95'][1]:.3f}] does not clear the "
        f"campaign's best so far ({best:.3f}x), so it cannot become the best"
    )
    fit = {**fit, "recheck": {"skipped": why}}
    return {**first, "reason": f"{first['reason']}; not re-measured in a fresh process: {why}",
            "fitness": fit}  # fmt: skip


def reconcile(first: dict, second: dict | None, floor: float, why_missing: str = "") -> dict:
    """The fitness gate once a fresh process has timed an accepted candidate again.

    ``first`` is the passing gate dict of the first process, ``second`` the fresh process's (or
    None when it could not be timed: ``why_missing`` says why). The verdict stands when the
    fresh process passes the gate on its own: every case within tolerance and a gain whose
    interval excludes 1. If its weighted speedup also lies inside the first interval (widened
    to ``floor``, the between-process spread) the numbers agree; if not, both processes still
    pass and the lower of the two measurements is kept as the fitness, so a candidate is never
    ranked on its luckier process. A fresh process that fails the gate, or cannot time it, makes
    the candidate ``unstable``. ``fitness["recheck"]`` holds both measurements."""
    fit = dict(first["fitness"])
    interval = widened(fit["ci95"], floor)
    recheck: dict = {"interval": interval, "fresh": second["fitness"] if second else None}
    if second is None or second.get("fitness") is None:
        recheck["error"] = why_missing or "it could not be timed again"
        fit["recheck"] = recheck
        reason = f"{first['reason']}; not re-measured in a fresh process: {recheck['error']}"
        return {
            **first,
            "status": C.FAILED,
            "rule": C.RULE_UNSTABLE,
            "reason": reason,
            "fitness": fit,
        }
    again = second["fitness"]["speedup"]
    passes = second["status"] == C.PASSED
    same = interval[0] <= again <= interval[1]
    recheck["agrees"] = passes
    recheck["same_number"] = same
    if not passes:
        fit["recheck"] = recheck
        reason = (
            f"unstable: {fit['speedup']:.3f}x (interval [{interval[0]:.3f}, {interval[1]:.3f}])"
            f" in the first process, {again:.3f}x in a fresh one ({second['reason']})"
        )
        return {
            **first,
            "status": C.FAILED,
            "rule": C.RULE_UNSTABLE,
            "reason": reason,
            "fitness": fit,
        }
    if same:
        fit["recheck"] = recheck
        return {
            **first,
            "reason": f"{first['reason']}; a fresh process agrees ({again:.3f}x)",
            "fitness": fit,
        }
    if again < fit["speedup"]:
        # The fresh process's numbers (per case too) are the lower ones: they stand.
        recheck["first"] = {k: v for k, v in fit.items() if k != "recheck"}
        fit = {**second["fitness"], "recheck": recheck}
        reason = (
            f"{second['reason']}; the first process measured {recheck['first']['speedup']:.3f}x, "
            "outside this interval: both pass, the lower is kept"
        )
    else:
        fit["recheck"] = recheck
        reason = (
            f"{first['reason']}; a fresh process passes too at {again:.3f}x, outside this "
            "interval: the lower (this) is kept"
        )
    return {**first, "reason": reason, "fitness": fit}
