"""The per-case tuner as a campaign step: run on the GPU host beside the baseline (issue 11).

A GPU campaign starts "where compile ends": before the first round the host that times the
baseline also runs the per-case tuner (``workers.search.tune`` behind the sandbox, through
``workers.search.tune_child``), and the campaign keeps its answer (a launch table keyed by shape
and what each case's best configuration measured against compile). The template generator's
first seed is that table (``GenerationContext.tuned``). The standalone CLI does this in its own
process (``run_campaign``); the portal sends it with the baseline task to the platform's queue,
so the control side, which has no GPU, never tunes.

The answer comes from a process that loaded the user's problem: it is data, checked here before
the campaign keeps it (a table of small integer lists, nothing else).
"""

from __future__ import annotations

import os

# The tuner's wall limit (about 90 s per catalog problem on the H200: docs/benchmarks.md).
TUNE_TIMEOUT_S = 600


def has_gpu() -> bool:
    """Whether this host has an NVIDIA GPU (its driver's control device), without CUDA."""
    return os.path.exists("/dev/nvidiactl")


def tune_request(state: dict) -> dict | None:
    """What the tuner needs for this campaign, or None where it does not run: not a cuda
    campaign, no workload, tuning turned off, or already answered."""
    cfg = state["config"]
    if cfg.get("tune") is False or cfg["platform"] != "cuda" or not cfg.get("workload"):
        return None
    if state.get("tuned") is not None:
        return None
    request = {"problem_source": cfg["problem_source"], "workload": cfg["workload"]}
    if "cute" in (cfg.get("generators") or ()):
        request["cute"] = True  # the CuTe row template's table too (workers.search.tune_cute)
    return request


def run_tuner(request: dict) -> dict:
    """Run the tuner for ``request`` behind the boundary, with the GPU visible; its checked
    answer ``{"ok": True, "table", "cases", "wall_s"}`` or ``{"ok": False, "error"}``."""
    from workers.boundary import BoundaryUnavailable
    from workers.confined import ConfinedFailure, run_confined

    if not has_gpu():
        return {"ok": False, "error": "no GPU on the host that tunes", "skipped": True}
    try:
        answer = run_confined(
            "workers.search.tune_child",
            {
                "problem_source": request["problem_source"],
                "workload": request["workload"],
                "cute": bool(request.get("cute")),
            },
            timeout_s=TUNE_TIMEOUT_S,
            cpu_s=TUNE_TIMEOUT_S * 16,
            memory_bytes=1 << 46,  # CUDA reserves far more address space than it uses
            gpu=True,
        )
    except (BoundaryUnavailable, ConfinedFailure) as exc:
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:300]}
    return checked(answer)


def checked(answer) -> dict:
    """``answer`` if it is a well-formed tuner answer, else a failure saying what was wrong;
    the CuTe template's answer (``"cute"``, where the campaign asked) is checked on its own."""
    out = _checked_triton(answer)
    if isinstance(answer, dict) and "cute" in answer:
        out["cute"] = checked_cute(answer["cute"])
    return out


def checked_cute(answer) -> dict:
    """The CuTe tuner's answer (``{"ok", "table": {"rows,n,dtype": {parameter: value}},
    "cases", "wall_s"}``) with every parameter one the template allows, else a failure."""
    from workers.search.generators.templates.cute_row import SPACE

    def entry_ok(entry) -> bool:
        return isinstance(entry, dict) and all(
            name in SPACE and _integer(value) and value in SPACE[name]
            for name, value in entry.items()
        )

    return _checked(answer, "the CuTe tuner", entry_ok)


def _checked_triton(answer) -> dict:
    def entry_ok(entry) -> bool:  # a launch configuration: small integers
        return isinstance(entry, list) and all(_integer(x) for x in entry)

    return _checked(answer, "the tuner", entry_ok)


def _integer(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _checked(answer, who: str, entry_ok) -> dict:
    malformed = {"ok": False, "error": f"{who}'s answer is malformed"}
    if not isinstance(answer, dict):
        return malformed
    if not answer.get("ok"):
        out = {"ok": False, "error": str(answer.get("error") or f"{who} failed")[:300]}
        if answer.get("skipped") is True:  # nothing to tune here (no GPU, no template fits)
            out["skipped"] = True
        return out
    table, cases = answer.get("table"), answer.get("cases")
    valid = (
        isinstance(table, dict)
        and all(isinstance(k, str) and entry_ok(v) for k, v in table.items())
        and isinstance(cases, list)
        and all(
            isinstance(c, dict)
            and isinstance(c.get("name"), str)
            and isinstance(c.get("speedup"), (int, float))
            for c in cases
        )
    )
    if not valid:
        return malformed
    wall = answer.get("wall_s")
    return {
        "ok": True,
        "table": table,
        "cases": [
            {"name": c["name"], "key": str(c.get("key") or ""), "speedup": float(c["speedup"])}
            for c in cases
        ],
        "wall_s": float(wall) if isinstance(wall, (int, float)) else 0.0,
    }
