"""What a campaign would run, shown before it starts: nothing is saved.

The preview names the workload the campaign will really run on its platform (a catalog
problem's smoke workload on ``interpret``, its production workload on ``cuda``, an upload's own
workload), each case's share of the weight and, from one sandboxed run of the reference, the
smaller shapes the interpret platform checks instead of those asked.
"""

from apps.campaigns.constants import Platform
from apps.campaigns.models import Problem
from apps.campaigns.services.campaigns import campaign_workload
from apps.campaigns.services.problems import problem_reference_check
from workers.contract.workload import parse_workload
from workers.reference_check import TIMEOUT_S

# How long the page says a reference check may take (the sandbox ends it there).
REFERENCE_TIMEOUT_S = TIMEOUT_S

WORKLOAD_LABELS = {
    "smoke": "the problem's smoke workload",
    "production": "the problem's production workload",
    "uploaded": "your workload",
    "module": "no workload: one case, the module as written",
}


def campaign_preview(
    *,
    platform: str,
    problem: Problem | None = None,
    source: str = "",
    workload: dict | None = None,
    workload_field: str = "workload",
) -> dict:
    """The preview of a campaign on a catalog `problem`, or on an uploaded `source` with its
    `workload` (the reference runs once in the sandbox; its errors raise ValidationError naming
    `source` or `workload_field`)."""
    interpret = platform == Platform.INTERPRET
    production_cases = None
    if problem is not None:
        workload, which = campaign_workload(problem=problem, platform=platform)
        source = problem.source
        if which == "smoke" and problem.workload:
            production_cases = len(parse_workload(problem.workload).cases)
    else:
        which = "uploaded" if workload else "module"
    parsed = parse_workload(workload)
    cases = [c.to_dict() for c in parsed.cases]
    checked = None
    # A catalog problem's reference is known good: it runs only to learn the interpreter's shapes.
    if problem is None or interpret:
        checked = problem_reference_check(
            source=source,
            workload=workload,
            workload_field=workload_field,
            interpret_shapes=interpret,
        )
    shapes = {c["name"]: c for c in (checked or {}).get("interpret_cases") or []}
    total = sum(float(c.get("weight") or 0) for c in cases) or 1.0
    rows = []
    for case in cases:
        seen = shapes.get(case["name"]) or {}
        scaled = seen.get("scaled") or None
        rows.append(
            {
                **case,
                "share": float(case.get("weight") or 0) / total,
                "checked_overrides": seen.get("overrides") if scaled else None,
                "scaled": scaled,
                "shrunk": [
                    {"name": k, "asked": v, "checked": scaled["used"].get(k)}
                    for k, v in (scaled or {}).get("orig", {}).items()
                ],
            }
        )
    return {
        "platform": platform,
        "interpret": interpret,
        "workload": which,
        "workload_label": WORKLOAD_LABELS[which],
        "production_cases": production_cases,
        "mode": parsed.mode,
        "cases": rows,
        "scaled_cases": sum(1 for r in rows if r["scaled"]),
        "checked": checked,
    }
