"""One-shot confined runs: a JSON request in, a JSON answer out, untrusted code behind the boundary.

The evaluation child (``workers.sandbox``) is persistent and speaks over private pipes. Other
places also have to run a problem's own code once (the upload check, tracing a reference for the
template generator, deriving a registry region from ``get_inputs``); they use ``run_confined``:

- the parent starts ``python -m <module>`` through ``workers.boundary.confine`` (bubblewrap: an
  unprivileged user, no network, no view of the portal's data, a scratch folder of its own) with
  a minimal environment, CPU, memory, process and file-size limits and a wall timeout;
- the child calls ``serve_json(handler)``: it reads the request from stdin, runs the handler,
  writes one JSON line and leaves at once (``os._exit``: no ``atexit`` hook of the untrusted code
  runs after the answer);
- the answer is redacted (credential values, private keys) before the caller sees it.

The answer comes from a process that ran untrusted code, so it is data to validate, never code:
callers check its shape.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile

from workers import constants as C
from workers import device_lock
from workers.boundary import boundary_from_env, confine, env_secrets, prepare_scratch, redact

OWNER_FILE = ".owner"
SCRATCH_PREFIX = "kernelevolve-sandbox-"
MAX_PROCESSES = 4096
MAX_FILE_BYTES = 1 << 30


class ConfinedFailure(RuntimeError):
    """The confined run gave no answer: it timed out, crashed, or printed no JSON."""


def new_scratch() -> str:
    """A scratch folder that names its owner, so a sweep can remove it if the owner dies."""
    scratch = tempfile.mkdtemp(prefix=SCRATCH_PREFIX)
    with open(os.path.join(scratch, OWNER_FILE), "w") as fh:
        fh.write(str(os.getpid()))
    return scratch


def run_confined(
    module: str,
    request: dict,
    *,
    timeout_s: float,
    cpu_s: int,
    memory_bytes: int,
    env: dict | None = None,
    gpu: bool = False,
) -> dict:
    """Run ``python -m module`` confined with ``request`` on stdin; return its JSON answer.

    ``gpu``: the child sees the GPU devices (a kernel run on a cuda host).
    Raises ``workers.boundary.BoundaryUnavailable`` when no sandbox can be built and
    ``ConfinedFailure`` when the run gives no answer.
    """
    boundary = boundary_from_env()

    def limits() -> None:  # pragma: no cover - runs in the child before exec
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s))
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        # Counted per user once the child has dropped to the sandbox's (root ignores it).
        resource.setrlimit(resource.RLIMIT_NPROC, (MAX_PROCESSES, MAX_PROCESSES))
        resource.setrlimit(resource.RLIMIT_FSIZE, (MAX_FILE_BYTES, MAX_FILE_BYTES))

    scratch = new_scratch()
    try:
        os.makedirs(os.path.join(scratch, "tmp"))
        prepare_scratch(boundary, scratch)
        child_env = {
            "PATH": "/usr/bin:/bin",
            "HOME": scratch,
            "TMPDIR": os.path.join(scratch, "tmp"),
            "OMP_NUM_THREADS": "1",
            "TRITON_CACHE_DIR": os.path.join(scratch, "triton-cache"),
        }
        # A GPU run (the model check on a cuda host) sees the devices this worker sees (all of
        # them when the worker's environment does not narrow them); any other run sees none.
        if not gpu:
            child_env["CUDA_VISIBLE_DEVICES"] = ""
        elif os.environ.get("CUDA_VISIBLE_DEVICES") is not None:
            child_env["CUDA_VISIBLE_DEVICES"] = os.environ["CUDA_VISIBLE_DEVICES"]
        child_env.update(env or {})
        for passed in ("PYTHONPATH", "LD_LIBRARY_PATH"):
            if os.environ.get(passed):
                child_env.setdefault(passed, os.environ[passed])
        cmd = confine(boundary, module, [], scratch=scratch, gpu=gpu)
        # A GPU run times kernels: it takes the host's device lock around its timing (its
        # descriptor goes in, the path does not).
        lock_fd = device_lock.open_lock(device_lock.lock_path()) if gpu else None
        if lock_fd is not None:
            child_env[C.DEVICE_LOCK_FD_ENV] = str(lock_fd)
        try:
            proc = subprocess.run(
                cmd,
                input=json.dumps(request),
                capture_output=True,
                text=True,
                timeout=timeout_s,
                cwd=scratch,
                env=child_env,
                pass_fds=(lock_fd,) if lock_fd is not None else (),
                preexec_fn=limits,  # noqa: PLW1509 - no threads hold locks here
            )
        except subprocess.TimeoutExpired as exc:
            raise ConfinedFailure(f"ran past {timeout_s:g} s") from exc
        finally:
            if lock_fd is not None:
                os.close(lock_fd)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    secrets = env_secrets()
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if not lines:
        tail = (proc.stderr or "").strip().splitlines()[-1:] or [f"exit code {proc.returncode}"]
        raise ConfinedFailure(redact(f"crashed: {tail[0][:500]}", secrets))
    try:
        answer = json.loads(lines[-1])
    except json.JSONDecodeError as exc:
        raise ConfinedFailure("answered something that is not JSON") from exc
    if not isinstance(answer, dict):
        raise ConfinedFailure("answered JSON that is not an object")
    return redact(answer, secrets)


def serve_json(handler) -> None:
    """The child's side: read the request, answer with ``handler(request)``, leave at once."""
    request = json.loads(sys.stdin.read() or "{}")
    try:
        answer = handler(request)
    except BaseException as exc:  # noqa: BLE001 - report, never crash without an answer
        answer = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:2000]}
    sys.stdout.write("\n" + json.dumps(answer, default=str) + "\n")
    sys.stdout.flush()
    os._exit(0)
