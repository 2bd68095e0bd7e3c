"""The statistics of the performance gate, apart from any device (plain numbers in and out).

- ``paired_rounds``: candidate and baselines measured alternately, round after round, the order
  rotating each round, so that drift (clocks, other tenants, thermal) hits every side alike;
- ``paired_speedup``: a baseline's speedup over the candidate from those rounds: the median of
  the per-round ratios, with a bootstrap interval that resamples whole rounds;
- ``settled``: when the rounds may stop early (every interval already narrow, or a loss beyond
  doubt), so a case costs the rounds its noise needs, not always the most;
- ``steady_state``: warm a probe until consecutive windows agree, so timing starts at steady
  clocks;
- ``agreement``: whether measurements from other processes land inside the first one's interval.

The measuring functions are passed in, so the logic runs with a fake timer in tests.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from workers import constants as C


def paired_rounds(
    measure: dict[str, Callable[[], float]],
    rounds: int,
    *,
    until: Callable[[dict[str, list[float]]], str | None] | None = None,
    min_rounds: int | None = None,
    step: int = C.ROUND_STEP,
) -> dict[str, list[float]]:
    """Up to ``rounds`` rounds; in each, every side is measured once, the order rotated by one
    each round (a, b, c / b, c, a / c, a, b ...) so no side is always first after an idle gap.

    With ``until``: after ``min_rounds`` and then every ``step`` rounds it is asked about the
    samples so far, and the rounds end when it gives a reason (:func:`settled`)."""
    names = list(measure)
    out: dict[str, list[float]] = {name: [] for name in names}
    check = rounds if until is None or min_rounds is None else min(min_rounds, rounds)
    for r in range(rounds):
        k = r % len(names)
        for name in names[k:] + names[:k]:
            out[name].append(float(measure[name]()))
        if until is not None and r + 1 == check:
            if until(out):
                break
            check += step
    return out


def settled(
    samples: dict[str, list[float]],
    *,
    precision: float = C.ROUND_PRECISION,
    judged: tuple[str, ...] = (),
    stop_below: float | None = None,
    candidate: str = "candidate",
    resamples: int = 200,
) -> str | None:
    """Why paired rounds may stop now, or None to go on.

    ``"clear loss"``: the candidate's speedup over one of ``judged`` lies wholly below
    ``stop_below`` (the fitness gate rejects it whatever more rounds say). ``"precise"``: every
    baseline's speedup interval lies within ``precision`` (relative) of its centre; more rounds
    would narrow what a fresh process's spread (``C.FRESH_PROCESS_FLOOR``) widens anyway."""
    if candidate not in samples:
        return None
    cand = samples[candidate]
    worst = 0.0
    for name, base in samples.items():
        if name == candidate:
            continue
        low, high = paired_speedup(base, cand, resamples=resamples)["ci95"]
        if stop_below is not None and name in judged and high < stop_below:
            return "clear loss"
        mid = (low * high) ** 0.5 if low > 0 and high > 0 else max(abs(low + high) / 2, 1e-12)
        worst = max(worst, (high - low) / 2 / mid)
    return "precise" if worst <= precision else None


def paired_speedup(
    baseline: list[float],
    candidate: list[float],
    *,
    resamples: int = C.BOOTSTRAP_RESAMPLES,
    seed: int = 0,
) -> dict:
    """Speedup of the candidate over a baseline measured in the same rounds: the median of the
    per-round ratios baseline/candidate, a bootstrap 95% interval over rounds, and the ratios."""
    b = np.asarray(baseline, dtype=np.float64)
    c = np.asarray(candidate, dtype=np.float64)
    if len(b) != len(c) or not len(b):
        raise ValueError("paired_speedup needs the same number (> 0) of rounds on each side")
    ratios = b / c
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(ratios), size=(resamples, len(ratios)))
    medians = np.median(ratios[idx], axis=1)
    return {
        "speedup": float(np.median(ratios)),
        "ci95": [float(np.percentile(medians, 2.5)), float(np.percentile(medians, 97.5))],
        "rounds": int(len(ratios)),
        "ratios": [float(f"{x:.5g}") for x in ratios],
    }


def steady_state(
    probe: Callable[[], float],
    *,
    window: int = 5,
    tolerance: float = 0.02,
    max_windows: int = 20,
) -> dict:
    """Run ``probe`` in windows until two consecutive windows' medians differ by less than
    ``tolerance`` (relative). Returns whether it settled, after how many windows, the medians."""
    medians: list[float] = []
    for _ in range(max_windows):
        medians.append(float(np.median([probe() for _ in range(window)])))
        if len(medians) >= 2:
            prev, last = medians[-2], medians[-1]
            if abs(last - prev) <= tolerance * max(abs(prev), 1e-12):
                return {"settled": True, "windows": len(medians), "medians": medians}
    return {"settled": False, "windows": len(medians), "medians": medians}


def widened(ci: list[float], floor: float) -> list[float]:
    """An interval at least ``floor`` (relative) either side of its centre: what one process's
    bootstrap cannot see (a fresh process's clocks and placement) is at least this much."""
    lo, hi = ci
    mid = (lo * hi) ** 0.5 if lo > 0 and hi > 0 else (lo + hi) / 2
    return [min(lo, mid * (1 - floor)), max(hi, mid * (1 + floor))]


def agreement(first_ci: list[float], others: list[float]) -> dict:
    """How many of ``others`` (speedups measured in other processes) lie inside ``first_ci``."""
    inside = [first_ci[0] <= x <= first_ci[1] for x in others]
    return {
        "inside": inside,
        "rate": (sum(inside) / len(inside)) if inside else None,
        "ci95": list(first_ci),
    }


def spread(values: list[float]) -> float:
    """Relative spread (max - min) / median of one quantity across processes."""
    arr = np.asarray(values, dtype=np.float64)
    med = float(np.median(arr))
    return float((arr.max() - arr.min()) / med) if med else 0.0
