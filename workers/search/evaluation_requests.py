"""What a campaign asks of the evaluator: the baseline's request, a candidate's, and a baseline
report's timings as a candidate's request carries them."""

from __future__ import annotations


def baseline_request(state: dict) -> dict:
    """Keyword arguments for the campaign's one ``baseline()`` call: the incumbent when given,
    else the reference itself in the candidate format."""
    cfg = state["config"]
    src = cfg["incumbent_source"] or cfg["problem_source"].replace(
        "class Model(", "class ModelNew("
    )
    return {**engine_request_defaults(cfg), "candidate_source": src}


def evaluation_request(state: dict, candidate_source: str) -> dict:
    """Keyword arguments for ``workers.evaluate.EvaluationRequest`` for one candidate."""
    kw = {**engine_request_defaults(state["config"]), "candidate_source": candidate_source}
    if state.get("baseline") is not None:
        kw["baseline_times"] = baseline_times(state["baseline"])
    best = (state.get("best_history") or [None])[-1]
    if best and best.get("speedup") is not None:
        # An acceptance at most as fast as the best so far cannot become the best: it is not
        # re-measured in a fresh process (the evaluator says so in its fitness).
        kw["recheck_above"] = float(best["speedup"])
    return kw


def baseline_times(baseline: dict) -> dict:
    """``{case name: {baseline name: timing}}`` of a baseline report (a request's
    ``baseline_times``; ``BaselineReport.times()`` of its plain form)."""
    return {c["name"]: c.get("timings") or {} for c in baseline.get("cases") or []}


def _without_samples(baseline: dict) -> dict:
    """The baseline report without its timings' raw samples (see ``record_baseline``)."""
    cases = []
    for case in baseline.get("cases") or []:
        timings = {
            name: {k: v for k, v in timing.items() if k != "samples_ms"}
            if isinstance(timing, dict)
            else timing
            for name, timing in (case.get("timings") or {}).items()
        }
        cases.append({**case, "timings": timings})
    return {**baseline, "cases": cases}


def engine_request_defaults(cfg: dict) -> dict:
    return {
        "problem_source": cfg["problem_source"],
        "workload": cfg["workload"],
        "platform": cfg["platform"],
        "baseline": cfg["baseline"],
        "incumbent_source": cfg["incumbent_source"],
        "trials": cfg["trials"],
        "seed": cfg["seed"],
        "regression_tolerance": cfg["regression_tolerance"],
        "time_limit_s": cfg["time_limit_s"],
    }
