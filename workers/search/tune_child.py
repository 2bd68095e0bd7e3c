"""The per-case tuner behind the sandbox boundary (``python -m workers.search.tune_child``).

A GPU campaign starts from the tuner's table (``workers.search.tuning``, run beside the
baseline on the GPU host): the tuner loads the user's problem to size its cases and time
compile against each configuration, so it runs as untrusted code does, through
``workers.confined.run_confined`` with the GPU visible. Request: ``{"problem_source",
"workload", "jobs"?, "cute"?}``; answer: ``{"ok", "table", "cases": [{"name", "key", "config",
"speedup"}], "wall_s"}`` (data to validate, never code), or ``{"ok": False, "skipped": True}``
for a problem that is not a row kernel; with ``"cute"`` also ``"cute"``: the CuTe row
template's table for a problem the cute generator matches (``workers.search.tune_cute``).
"""

from __future__ import annotations

import argparse
import json
import os

from workers.confined import serve_json


def handle(request: dict) -> dict:
    from workers.search.trace import NoTemplate, trace_problem

    source, workload = request.get("problem_source"), request.get("workload")
    if not isinstance(source, str) or not isinstance(workload, dict):
        return {"ok": False, "error": "the tuner needs problem_source and a workload"}
    try:
        family = trace_problem(source).family
    except NoTemplate as exc:
        family = f"none ({exc})"
    if family != "row":
        # Not an error: the tuner's launch space is the row family's; nothing to tune.
        answer = {"ok": False, "skipped": True, "error": f"the tuner covers row kernels: {family}"}
    else:
        answer = _triton(request, *_files(source, workload))
    if request.get("cute"):
        try:
            answer["cute"] = _cute(source, workload)
        except Exception as exc:  # noqa: BLE001 - the Triton table stands without it
            answer["cute"] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:300]}
    return answer


def _files(source: str, workload: dict) -> tuple[str, str, str]:
    """(folder, problem path, workload path) of the tuners' scratch copies."""
    folder = os.path.abspath("tune")
    os.makedirs(folder, exist_ok=True)
    problem = os.path.join(folder, "problem.py")
    spec = os.path.join(folder, "workload.json")
    with open(problem, "w") as fh:
        fh.write(source)
    with open(spec, "w") as fh:
        json.dump(workload, fh)
    return folder, problem, spec


def _cute(source: str, workload: dict) -> dict:
    """The CuTe row template's per-case table (``workers.search.tune_cute``) for a problem the
    cute generator matches; ``{"ok": False, "skipped": True}`` for one it does not."""
    from workers.search.generators.cute import match, render_for
    from workers.search.trace import NoTemplate, trace_problem
    from workers.search.tune_cute import campaign_space, tune

    try:
        # traced here, in this process: it is already behind the boundary (the generator's
        # own tracing would ask for another, nested one, which cannot be built in here)
        plan = trace_problem(source)
        found = match(plan)
    except NoTemplate as exc:
        return {"ok": False, "skipped": True, "error": f"no CuTe template fits: {exc}"[:300]}
    folder, problem, spec = _files(source, workload)
    args = argparse.Namespace(op=found["op"], problem=problem, workload=spec, incumbent=None,
                              out=folder, samples=8, finalists=2,
                              x_index=plan.forward_args.index(found["x"]),
                              row_dims=-int(plan.extra.get("red_from") or -1))  # fmt: skip
    space = campaign_space(found["op"])
    report = tune(args, space, lambda p: render_for(plan, found, p), lambda _: None)
    cases = [
        {"name": c["name"], "key": c["key"], "speedup": c["finals"][0]["speedup"]["compile"]}
        for c in report["cases"]
        if c.get("finals")
    ]
    return {"ok": True, "table": report["table"], "cases": cases, "wall_s": report["wall_s"]}


def _triton(request: dict, folder: str, problem: str, spec: str) -> dict:
    from workers.search.tune import tune

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
