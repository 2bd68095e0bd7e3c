"""The per-case tuner behind the sandbox boundary (``python -m workers.search.tune_child``).

A GPU campaign starts from the tuner's table (``workers.search.tuning``, run beside the
baseline on the GPU host): the tuner loads the user's problem to size its cases and time
compile against each configuration, so it runs as untrusted code does, through
``workers.confined.run_confined`` with the GPU visible. Request: ``{"problem_source",
"workload", "jobs"?}``; answer: ``{"ok", "table", "cases": [{"name", "key", "config",
"speedup"}], "wall_s"}`` (data to validate, never code), or ``{"ok": False, "skipped": True}``
for a problem that is not a row kernel.
"""

from __future__ import annotations

import argparse
import json
import os

from workers.confined import serve_json


def handle(request: dict) -> dict:
    from workers.search.trace import NoTemplate, trace_problem
    from workers.search.tune import tune

    source, workload = request.get("problem_source"), request.get("workload")
    if not isinstance(source, str) or not isinstance(workload, dict):
        return {"ok": False, "error": "the tuner needs problem_source and a workload"}
    try:
        family = trace_problem(source).family
    except NoTemplate as exc:
        family = f"none ({exc})"
    if family != "row":
        # Not an error: the tuner's launch space is the row family's; nothing to tune.
        return {"ok": False, "skipped": True, "error": f"the tuner covers row kernels: {family}"}
    folder = os.path.abspath("tune")
    os.makedirs(folder, exist_ok=True)
    problem = os.path.join(folder, "problem.py")
    spec = os.path.join(folder, "workload.json")
    with open(problem, "w") as fh:
        fh.write(source)
    with open(spec, "w") as fh:
        json.dump(workload, fh)
    jobs = max(1, min(16, int(request.get("jobs") or os.cpu_count() or 4)))
    args = argparse.Namespace(problem=problem, workload=spec, out=folder, jobs=jobs, leaders=4)
    report = tune(args)
    cases = []
    for entry in report["cases"]:
        best = entry["finals"][0]
        cases.append(
            {
                "name": entry["name"],
                "key": entry["key"],
                "config": best["config"],
                "speedup": best["speedup"],
                "device_us": best["device_us"],
                "compile_us": best["compile_us"],
            }
        )
    return {"ok": True, "table": report["table"], "cases": cases, "wall_s": report["wall_s"]}


if __name__ == "__main__":
    serve_json(handle)
