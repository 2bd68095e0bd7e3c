"""Entry point of the sandbox child: ``python -m workers.child --platform ... --fds r,w``.

It sets its resource limits, imports torch and triton once (with ``TRITON_INTERPRET=1`` already
in its environment on ``interpret``), installs the instrumentation and the audit hook, answers
``hello`` with its fingerprint, and then serves one operation at a time over its private pipes:
``load`` (problem, candidate source, cases), ``compile``, ``correctness``, ``performance``,
``baseline``, ``end``, ``exit``. Errors raised by untrusted code come back as failed results; a
crash simply ends the process and the parent reports it.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import struct
import sys
import time
import traceback

from workers import constants as C
from workers import device_lock


def _set_limits(platform: str, memory_limit: int, max_processes: int):
    if platform == "interpret":
        # CUDA reserves a huge address space, so RLIMIT_AS only applies off the GPU; there the
        # parent watches the resident set instead.
        try:
            resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))
        except (ValueError, OSError):
            pass
    # Hard limits: the untrusted code cannot raise them again. The process count (threads
    # included) is per user, so it is set only where the child runs as the sandbox's own user.
    limits = [
        ("RLIMIT_CORE", 0),
        ("RLIMIT_FSIZE", C.CHILD_MAX_FILE_BYTES),
        ("RLIMIT_NOFILE", C.CHILD_MAX_OPEN_FILES),
    ]
    if max_processes:
        limits.append(("RLIMIT_NPROC", max_processes))
    for name, value in limits:
        limit = getattr(resource, name)
        hard = resource.getrlimit(limit)[1]
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        try:
            resource.setrlimit(limit, (value, value))
        except (ValueError, OSError):
            pass


def lean_interpreter() -> None:
    """Triton's interpreter checks every 32-bit integer add, subtract and multiply of a kernel
    for overflow: both operands cast to 64 bits, two compares and an assert over the whole
    tile. That was 60% of a convolution's interpreted time (KernelBench 58: 9 s of 15). The
    interpreter runs small sizes (inputs of at most 32,768 elements unless a case needs more),
    nowhere near 2**31, and the check changes no result: it is turned off."""
    import dataclasses

    from triton.runtime import interpreter

    builder = getattr(interpreter, "interpreter_builder", None)
    options = getattr(builder, "options", None)
    if dataclasses.is_dataclass(options) and hasattr(options, "sanitize_overflow"):
        builder.options = dataclasses.replace(options, sanitize_overflow=False)


def _cpu_budget(seconds: float):
    """Allow ``seconds`` more CPU time from now (the child is persistent, so it is relative)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    used = usage.ru_utime + usage.ru_stime
    soft = int(used + max(seconds, 1.0)) + 1
    hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    try:
        resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
    except (ValueError, OSError):
        pass


class Job:
    """Everything one evaluation keeps between operations in the child."""

    def __init__(self, state, args: dict):
        self.state = state
        self.args = args
        self.platform = state.platform
        self.device = "cuda" if self.platform == "cuda" else "cpu"
        self.folder = os.path.join(state.home, "jobs", f"job{state.jobs}")
        os.makedirs(self.folder, exist_ok=True)
        self.problem = None
        self.train = False  # run the modules in training mode (workload "mode": "train")
        self.problem_name = ""  # the module name the problem is loaded under
        self.problem_hash: str | None = None  # the compiled references are cached by it
        self.candidate = None
        self.incumbent = None
        self.cases: list[dict] = []
        self.modules: list[str] = []
        self.flops: dict[str, float] = {}
        self.bytes: dict[str, int] = {}
        self.launches: dict[str, dict] = {}  # every kernel launch recorded, by its signature
        self.backend = C.BACKEND_TRITON  # the compile gate says which kernels it launched


class ChildState:
    def __init__(self, platform: str, root: str, home: str):
        self.platform = platform
        self.root = root
        self.home = home
        self.jobs = 0
        self.job: Job | None = None
        self.ceilings: dict | None = None  # measured once per process
        self.tainted: list[str] = []
        self.lock_fd: int | None = None  # the device lock's descriptor (workers.device_lock)
        self.lock_wait_s = C.DEVICE_LOCK_WAIT_S  # per op: a share of the op's own time limit
        self.inductor_locked: list[str] | None = None  # performance.lock_inductor_tuning
        self.cute = None  # workers.cute_dsl.CuteRecorder where the DSL is installed
        self.cute_error: str | None = None  # why it could not be set up


def _handle(state: ChildState, op: str, args: dict) -> dict:
    from workers.gates import compile as compile_gate
    from workers.gates import correctness, performance

    if op == "load":
        state.jobs += 1
        state.job = Job(state, args)
        return compile_gate.load(state.job, args)
    if op == "compile":
        return compile_gate.run(state.job, args)
    if op == "correctness":
        # Its runs on the device would weigh on another process's timed rounds.
        with device_lock.held(state.lock_fd, state.lock_wait_s) as lock:
            result = correctness.run(state.job, args)
        if lock["waited_s"] or lock.get("note"):
            result.setdefault("evidence", {})["device_lock"] = lock
        return result
    if op == "performance":
        return performance.run(state.job, args)
    if op == "baseline":
        return performance.baseline(state.job, args)
    if op == "end":
        _end_job(state)
        return {"ok": True}
    raise ValueError(f"unknown op {op!r}")


def _end_job(state: ChildState):
    job = state.job
    state.job = None
    if job is not None:
        for name in job.modules:
            sys.modules.pop(name, None)
    gc.collect()
    if state.platform == "cuda":
        import torch

        torch.cuda.synchronize()
        torch.cuda.empty_cache()


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--platform", required=True)
    parser.add_argument("--fds", required=True)
    parser.add_argument("--root", required=True)
    parser.add_argument("--home", required=True)
    parser.add_argument("--memory-limit", type=int, required=True)
    parser.add_argument("--max-processes", type=int, default=0)
    parser.add_argument("--lock-fd", type=int, default=None)
    opts = parser.parse_args(argv)
    req_fd, resp_fd = (int(x) for x in opts.fds.split(","))
    req = os.fdopen(req_fd, "rb", buffering=0)
    resp = os.fdopen(resp_fd, "wb", buffering=0)
    _set_limits(opts.platform, opts.memory_limit, opts.max_processes)

    def send(obj):
        data = json.dumps(obj, default=str).encode()
        resp.write(struct.pack(">I", len(data)) + data)

    def recv():
        header = req.read(4)
        if len(header) < 4:
            return None
        (n,) = struct.unpack(">I", header)
        data = b""
        while len(data) < n:
            chunk = req.read(n - len(data))
            if not chunk:
                return None
            data += chunk
        return json.loads(data)

    import torch
    import torch._dynamo  # noqa: F401 - it rebinds torch.manual_seed on import; do it before
    import triton  # noqa: F401 - the patch guard's snapshot and before any untrusted code

    if opts.platform == "interpret":
        lean_interpreter()

    from workers import cute_dsl, fingerprint, instrument

    state = ChildState(opts.platform, opts.root, opts.home)
    state.lock_fd = opts.lock_fd
    fp = fingerprint.collect(opts.platform)
    if opts.platform == "cuda" and not torch.cuda.is_available():
        send(
            {
                "ok": False,
                "error": "cuda platform requested but no CUDA device is visible",
                "fingerprint": fp,
            }
        )
        return 3
    recorder = instrument.LaunchRecorder()
    recorder.install()
    state.recorder = recorder
    if cute_dsl.available():
        # The DSL's import runs ldconfig and fills its caches: before the audit hook and any
        # untrusted code, and its compile replaced before the patch guard's snapshot.
        try:
            state.cute = cute_dsl.CuteRecorder()
            state.cute.install()
        except Exception as exc:  # noqa: BLE001 - a broken install: say so on use
            state.cute, state.cute_error = None, cute_dsl.clean_error(exc)[:500]
    state.guard = instrument.PatchGuard()
    policy = instrument.AuditPolicy([opts.root, opts.home])
    instrument.install_audit_hook(policy)
    state.policy = policy
    policy_seal = instrument.policy_seal(policy)
    send({"ok": True, "fingerprint": fp, "pid": os.getpid()})
    while True:
        message = recv()
        if message is None or message.get("op") == "exit":
            return 0
        op, args = message["op"], message.get("args") or {}
        start = time.perf_counter()
        held_before = device_lock.held_total()
        _cpu_budget(float(args.get("cpu_seconds", 600)))
        # Waiting for the device must not eat the whole op's limit (a time-out would read as
        # the candidate's fault): past this share it times anyway, and says so.
        state.lock_wait_s = min(
            C.DEVICE_LOCK_WAIT_S, C.DEVICE_LOCK_WAIT_SHARE * float(args.get("cpu_seconds", 600))
        )
        policy.violations.clear()
        policy.enforcing = True
        try:
            result = _handle(state, op, args)
            reply = {"ok": True, "result": result}
        except SystemExit as exc:
            reply = {
                "ok": False,
                "error": f"untrusted code called sys.exit({exc.code})",
                "kind": "exit",
            }
        except BaseException as exc:  # noqa: BLE001 - everything untrusted code raises
            reply = {
                "ok": False,
                "error": f"{type(exc).__name__}: {exc}"[:2000],
                "traceback": traceback.format_exc()[-4000:],
            }
        finally:
            still_enforcing = policy.enforcing
            policy.enforcing = False
        reply["wall_s"] = time.perf_counter() - start
        reply["held_s"] = device_lock.held_total() - held_before
        if not still_enforcing or instrument.policy_seal(policy) != policy_seal:
            # The hook is the second layer; the boundary held whatever was done meanwhile, but
            # this child no longer watches anything: say so and start a fresh one.
            policy.violations.append("the audit policy was tampered with")
        reply["violations"] = list(policy.violations)
        if op in ("performance", "baseline", "end"):
            # torch.compile starts its own worker threads; those are not the candidate's.
            import threading

            state.guard.threads = max(state.guard.threads, threading.active_count())
        changed = state.guard.changed()
        threads = state.guard.extra_threads()
        if changed or threads > 0 or policy.violations:
            reply["restart"] = True
            reply["tainted"] = {"patched": changed, "extra_threads": threads}
        _mark_output(message.get("mark"))
        send(reply)
        if reply.get("restart"):
            return 0


def _mark_output(mark) -> None:
    """Flush what the operation printed, then write the parent's mark after it: the parent
    reads the output up to the mark before it takes the reply."""
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - untrusted code may have replaced or closed them
            pass
    if isinstance(mark, str) and mark:
        try:
            os.write(1, mark.encode())
        except OSError:
            pass


if __name__ == "__main__":
    sys.exit(main())
