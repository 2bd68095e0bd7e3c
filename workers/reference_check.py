"""Run an uploaded reference once, behind the sandbox boundary, before anything is saved.

``reference_check(source=..., case=...)`` starts ``python -m workers.reference_check`` through
``workers.boundary.confine`` (bubblewrap: an unprivileged user, no network, no view of the
portal's data, only a scratch folder writable) with a scrubbed environment, resource limits and a
wall timeout, so an upload's import-time code never runs in the portal's process or with its
rights. The child reads ``{"source", "case"}`` as JSON on stdin, imports the problem under the
audit hook (the second layer, which names the rule broken), builds ``Model(*get_init_inputs())``
on the CPU for the case (scaled down the way the interpreter platform scales it) and runs one
forward pass. With ``scale_cases`` it also says, for every case, the smaller shapes the
``interpret`` platform checks instead of those asked (``interpret_cases``). It prints one JSON
line: ``{"ok": true, ...}`` or ``{"ok": false, "field": "source"|"workload", "error": "..."}``.
"""

import os
import tempfile
import time
import traceback

from workers.boundary import BoundaryUnavailable
from workers.confined import ConfinedFailure, run_confined, serve_json

# The check imports torch and runs one case on the CPU: generous, but bounded.
TIMEOUT_S = 120
CPU_S = 120
MEMORY_BYTES = 8 << 30


def _fail(field: str, error: str) -> dict:
    return {"ok": False, "field": field, "error": error}


def _interpret_cases(module, cases: list[dict], cap: int | None = None) -> list[dict]:
    """Per case: the overrides the interpreter runs, and what was scaled down from what
    (``cap``: another per-input element limit than the interpreter's)."""
    from workers.contract import problem as P

    found = []
    for case in cases:
        try:
            overrides = dict(case.get("overrides") or {})
            if cap:
                used, scaled = P.scale_for_interpreter(module, overrides, cap)
            else:
                used, scaled = P.scale_for_interpreter(module, overrides)
        except Exception:  # noqa: BLE001 - the heaviest case's run reports the real error
            used, scaled = dict(case.get("overrides") or {}), None
        found.append({"name": case.get("name", "default"), "overrides": used, "scaled": scaled})
    return found


def check(
    source: str, case: dict, scale_cases: list[dict] | None = None, scale_cap: int | None = None
) -> dict:
    t0 = time.perf_counter()
    import torch

    from workers import instrument
    from workers.contract import problem as P

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix="ke-upload-") as folder:
        policy = instrument.AuditPolicy([os.getcwd(), tempfile.gettempdir()])
        instrument.install_audit_hook(policy)
        policy.enforcing = True
        try:
            module = P.load_module(source, "uploaded_problem", folder)
        except SystemExit as exc:
            return _fail("source", f"the problem called sys.exit({exc.code}) on import")
        except BaseException as exc:  # noqa: BLE001 - any failure of untrusted code
            return _fail("source", f"the problem failed to import: {type(exc).__name__}: {exc}")
        for attr in ("Model", "get_inputs", "get_init_inputs"):
            if not hasattr(module, attr):
                return _fail("source", f"the problem defines no {attr}")
        overrides = dict(case.get("overrides") or {})
        for key in overrides:
            if not hasattr(module, key):
                return _fail(
                    "workload",
                    f"case {case.get('name', '?')!r}: overrides.{key}: the problem has no such "
                    "module constant",
                )
        used, scaled = P.scale_for_interpreter(module, overrides)
        dtype = P.DTYPES.get(case["dtype"]) if case.get("dtype") else None
        try:
            _, ref, _ = P.make_models(module, None, used, dtype, 0, "cpu", None)
            inputs = P.make_inputs(module, used, dtype, 1, "cpu")
            with torch.no_grad(), P.constants(module, used):
                out = ref(*inputs)
        except BaseException as exc:  # noqa: BLE001
            last = traceback.extract_tb(exc.__traceback__)[-1]
            where = (
                f" (line {last.lineno})" if last.filename.endswith("uploaded_problem.py") else ""
            )
            return _fail(
                "source",
                f"the reference failed on case {case.get('name', 'default')!r}{where}: "
                f"{type(exc).__name__}: {exc}",
            )
        outputs = out if isinstance(out, tuple | list) else [out]
        if not outputs or not all(isinstance(o, torch.Tensor) for o in outputs):
            return _fail("source", "Model.forward must return a tensor (or a tuple of tensors)")
        answer = {
            "ok": True,
            "case": case.get("name", "default"),
            "overrides": used,
            "scaled_for_interpreter": scaled,
            "outputs": [list(o.shape) for o in outputs],
            "seconds": round(time.perf_counter() - t0, 3),
        }
        if scale_cases:
            answer["interpret_cases"] = _interpret_cases(module, scale_cases, scale_cap)
        return answer


def reference_check(
    *,
    source: str,
    case: dict,
    timeout_s: float = TIMEOUT_S,
    scale_cases: list[dict] | None = None,
    scale_cap: int | None = None,
) -> dict:
    """Run ``check`` on an untrusted reference in a confined child; never raises for what the
    reference does. Returns the child's answer, or ``{"ok": false, "field": "source", ...}`` for
    a timeout or crash, or ``{"ok": false, "field": None, ...}`` when the sandbox is missing."""
    try:
        answer = run_confined(
            "workers.reference_check",
            {
                "source": source,
                "case": case,
                "scale_cases": scale_cases or [],
                "scale_cap": scale_cap,
            },
            timeout_s=timeout_s,
            cpu_s=CPU_S,
            memory_bytes=MEMORY_BYTES,
            env={"TRITON_INTERPRET": "1"},
        )
    except BoundaryUnavailable as exc:
        return {"ok": False, "field": None, "error": str(exc)}
    except ConfinedFailure as exc:
        if "ran past" in str(exc):
            return _fail(
                "source",
                f"the reference did not return within {timeout_s:g} s on case "
                f"{case.get('name', 'default')!r} in the sandbox (an endless loop or wait, or a "
                "case too large to run once on a CPU); nothing was saved",
            )
        return _fail("source", f"the reference check {exc}")
    if answer.get("field") not in (None, "source", "workload") or not isinstance(
        answer.get("ok"), bool
    ):
        return _fail("source", "the reference check answered something unexpected")
    if not answer["ok"] and answer.get("field") is None:
        answer = {**answer, "field": "source"}  # an error the problem raised, not the sandbox
    return answer


def main() -> None:
    serve_json(
        lambda request: check(
            request["source"],
            request.get("case") or {"name": "default"},
            request.get("scale_cases") or None,
            request.get("scale_cap") or None,
        )
    )


if __name__ == "__main__":
    main()
