"""Run an uploaded reference once, in a child process, before anything is saved.

`python -m apps.campaigns.sandbox_check` reads `{"source", "case"}` as JSON on stdin, imports the
problem from a temporary folder, builds `Model(*get_init_inputs())` on the CPU for the case
(scaled down the way the interpreter platform scales it) and runs one forward pass. It prints one
JSON line: `{"ok": true, ...}` or `{"ok": false, "field": "source"|"workload", "error": "..."}`.

It imports no Django: the parent (services/problems.py) spawns it with a scrubbed environment,
resource limits and a wall timeout, so an upload's import-time code never runs in the portal.
"""

import json
import sys
import tempfile
import time
import traceback


def _fail(field: str, error: str) -> dict:
    return {"ok": False, "field": field, "error": error}


def check(source: str, case: dict) -> dict:
    t0 = time.perf_counter()
    import torch

    from workers.contract import problem as P

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix="ke-upload-") as folder:
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
        return {
            "ok": True,
            "case": case.get("name", "default"),
            "overrides": used,
            "scaled_for_interpreter": scaled,
            "outputs": [list(o.shape) for o in outputs],
            "seconds": round(time.perf_counter() - t0, 3),
        }


def main() -> None:
    request = json.loads(sys.stdin.read())
    try:
        result = check(request["source"], request.get("case") or {"name": "default"})
    except BaseException as exc:  # noqa: BLE001 - report, never crash without an answer
        result = _fail("source", f"{type(exc).__name__}: {exc}")
    sys.stdout.write("\n" + json.dumps(result, default=str) + "\n")


if __name__ == "__main__":
    main()
