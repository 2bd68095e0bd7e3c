"""Ahead-of-time compile of recorded launches, in a clean process without the interpreter.

``python -m workers.gates.aot`` reads ``{"candidate_path", "launches", "target", "folder",
"writable"}`` as JSON on stdin and writes ``{"artifacts": [...]}`` or ``{"error": ...}`` on
stdout. The interpreter patches ``triton.language`` while it runs, and compiling for a GPU in
the same process afterwards proved unreliable, so the compile gate on ``interpret`` runs this
as a subprocess (same limits, same audit policy).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys


def main() -> int:
    job = json.loads(sys.stdin.read())
    os.environ.pop("TRITON_INTERPRET", None)
    from workers import instrument

    policy = instrument.AuditPolicy(job["writable"])
    instrument.install_audit_hook(policy)
    policy.enforcing = True
    out = {}
    real_stdout = sys.stdout
    sys.stdout = sys.stderr  # keep untrusted prints out of the JSON reply
    try:
        import triton
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource

        from workers.gates.artifacts import ptxas_report
        from workers.gates.compile import _artifact, _unwrap_jit

        spec = importlib.util.spec_from_file_location("candidate_aot", job["candidate_path"])
        module = importlib.util.module_from_spec(spec)
        sys.modules["candidate_aot"] = module
        spec.loader.exec_module(module)
        target = tuple(job["target"])
        artifacts = []
        for launch in job["launches"]:
            fn = _unwrap_jit(getattr(module, launch["kernel"]))
            src = ASTSource(fn=fn, signature=launch["signature"], constexprs=launch["constexprs"])
            options = {
                k: v for k, v in launch["options"].items() if k in ("num_warps", "num_stages")
            }
            kernel = triton.compile(src, target=GPUTarget(*target), options=options)
            art = _artifact(launch, kernel.asm, target)
            art.update(ptxas_report(kernel.asm["ptx"], target[1], job["folder"]))
            art["shared_bytes"] = getattr(kernel.metadata, "shared", None)
            art["num_warps"] = getattr(kernel.metadata, "num_warps", None)
            art["num_stages"] = getattr(kernel.metadata, "num_stages", None)
            artifacts.append(art)
        out = {"artifacts": artifacts}
    except BaseException as exc:  # noqa: BLE001 - reported to the compile gate
        out = {"error": f"{type(exc).__name__}: {str(exc)[:1500]}"}
    finally:
        policy.enforcing = False
        sys.stdout = real_stdout
    sys.stdout.write(json.dumps(out))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
