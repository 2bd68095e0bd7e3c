"""The sandbox: a spawned child process that runs untrusted problem and candidate code.

The parent (``SandboxChild``) starts ``python -m workers.child`` behind the operating-system
boundary of ``workers.boundary`` (bubblewrap: an unprivileged user, no network, a filesystem with
only its scratch folder writable and no view of the portal's data) with a scrubbed environment
(no secrets, no database or broker URLs), its own scratch folder as cwd/HOME/TMPDIR, and two
private pipes for length-prefixed JSON messages. The child's stdout/stderr are read by a thread
that keeps only a capped head and tail. Every call has a wall timeout and the child's resident
memory is watched; a crash, hang, ``sys.exit``, memory blow-up or output flood becomes a
``SandboxFailure`` with its evidence, never an exception that takes the worker down. After one,
the child is gone and the next call starts a fresh one. Whatever comes back passes through
``redact`` (credential values of this process's environment, PEM private keys) before it reaches
a report. Scratch folders are removed when their owner closes them, and a worker that died
without closing its own has them swept by the next one.
"""

from __future__ import annotations

import glob
import json
import os
import re
import secrets
import select
import shutil
import signal
import struct
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field

from workers import constants as C
from workers import device_lock
from workers.boundary import (
    KIND_NONE,
    Boundary,
    boundary_from_env,
    confine,
    env_secrets,
    prepare_scratch,
    redact,
)
from workers.confined import OWNER_FILE, SCRATCH_PREFIX, new_scratch


@dataclass(frozen=True)
class SandboxFailure:
    """Why a call into the child did not return a result."""

    rule: str  # RULE_TIMEOUT, RULE_CRASH, RULE_EXIT, RULE_MEMORY, RULE_OUTPUT_FLOOD
    reason: str
    evidence: dict = field(default_factory=dict)


def scrub_env(env: dict) -> dict:
    """Drop every variable that looks like a credential or a service URL."""
    pattern = re.compile(C.SECRET_ENV_PATTERN, re.IGNORECASE)
    return {k: v for k, v in env.items() if not pattern.search(k)}


class _OutputTap(threading.Thread):
    """Reads the child's merged stdout/stderr, keeping a capped head and tail.

    The child writes a per-call mark to its stdout after each operation and before its reply;
    ``wait_mark`` returns once the tap has read up to it, so the reply's log holds everything
    the operation printed however the two pipes were scheduled. The mark is not kept."""

    def __init__(self, stream):
        super().__init__(daemon=True)
        self.stream = stream
        self.fd = stream.fileno()
        self.lock = threading.Lock()
        self.marked = threading.Condition(self.lock)
        self.mark = b""
        self.seen = False
        self.reset()

    def reset(self, mark: bytes = b""):
        with self.lock:
            self.head = bytearray()
            self.tail = bytearray()
            self.total = 0
            self.pending = b""
            self.mark = mark
            self.seen = False

    def wait_mark(self, timeout: float) -> bool:
        with self.marked:
            return self.marked.wait_for(lambda: self.seen or not self.is_alive(), timeout)

    def run(self):
        while True:
            try:
                chunk = os.read(self.fd, 1 << 16)
            except (OSError, ValueError):
                chunk = b""
            with self.lock:
                if not chunk:
                    self._keep(self.pending)
                    self.pending = b""
                    self.marked.notify_all()
                    return
                self._take(chunk)

    def _take(self, chunk: bytes):
        data = self.pending + chunk
        self.pending = b""
        mark = self.mark
        if mark and not self.seen:
            at = data.find(mark)
            if at >= 0:
                data = data[:at] + data[at + len(mark) :]
                self.seen = True
                self.marked.notify_all()
            else:
                # Hold back a tail that may be the start of a mark split across two reads.
                for size in range(min(len(mark) - 1, len(data)), 0, -1):
                    if mark.startswith(data[-size:]):
                        self.pending, data = data[-size:], data[:-size]
                        break
        self._keep(data)

    def _keep(self, chunk: bytes):
        half = C.OUTPUT_CAP_BYTES // 2
        self.total += len(chunk)
        if len(self.head) < half:
            take = half - len(self.head)
            self.head += chunk[:take]
            chunk = chunk[take:]
        if chunk:
            self.tail += chunk
            if len(self.tail) > half:
                del self.tail[: len(self.tail) - half]

    def snapshot(self) -> dict:
        with self.lock:
            text = self.head.decode("utf-8", "replace")
            if self.tail:
                skipped = self.total - len(self.head) - len(self.tail)
                if skipped > 0:
                    text += f"\n... [{skipped} bytes not kept] ...\n"
                text += self.tail.decode("utf-8", "replace")
            return {"log": text, "log_bytes": self.total}


def _rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _descendants(pid: int) -> list[int]:
    """``pid`` and every process below it (the sandboxed Python runs under bwrap's init)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(children.get(current, ()))
    return found


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_stale_scratch(folder: str | None = None) -> list[str]:
    """Remove scratch folders whose owning process is gone (a worker killed without cleanup)."""
    removed = []
    folder = folder or tempfile.gettempdir()
    for path in glob.glob(os.path.join(folder, SCRATCH_PREFIX + "*")):
        try:
            with open(os.path.join(path, OWNER_FILE)) as fh:
                owner = int(fh.read().strip() or 0)
        except (OSError, ValueError):
            # No owner file: an older layout, or one being created right now; wait an hour.
            try:
                if time.time() - os.stat(path).st_mtime < 3600:
                    continue
            except OSError:
                continue
            owner = 0
        if owner and _pid_alive(owner):
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


class SandboxChild:
    """One persistent child for one platform. ``call(op, args, timeout)`` returns the child's
    result dict or a ``SandboxFailure``; after a failure the child is dead and ``call`` restarts
    it on next use."""

    def __init__(
        self,
        platform: str,
        *,
        memory_limit: int = C.CHILD_MEMORY_LIMIT_BYTES,
        root: str | None = None,
        extra_env: dict | None = None,
    ):
        self.platform = platform
        self.memory_limit = memory_limit
        self.boundary: Boundary = boundary_from_env()
        self._own_root = root is None
        if root is None:
            sweep_stale_scratch()
            root = new_scratch()
        self.root = root
        self.extra_env = dict(extra_env or {})
        self.secrets = env_secrets()
        self.proc: subprocess.Popen | None = None
        self.hello: dict | None = None
        self.starts = 0
        self._pids: list[int] = []

    @property
    def gpu(self) -> bool:
        return self.platform == C.PLATFORM_CUDA

    # lifecycle ---------------------------------------------------------------------------
    def _env(self, home: str) -> dict:
        env = scrub_env(dict(os.environ))
        env.update(
            {
                "HOME": home,
                "TMPDIR": os.path.join(home, "tmp"),
                "TRITON_CACHE_DIR": os.path.join(self.root, "triton-cache"),
                "TRITON_HOME": os.path.join(self.root, "triton-home"),
                "TORCHINDUCTOR_CACHE_DIR": os.path.join(self.root, "inductor-cache"),
                "PYTHONDONTWRITEBYTECODE": "1",
                "PYTHONUNBUFFERED": "1",
                # Inductor compiles in-process instead of spawning a worker pool of pythons.
                "TORCHINDUCTOR_COMPILE_THREADS": "1",
            }
        )
        if self.platform == C.PLATFORM_INTERPRET:
            env["TRITON_INTERPRET"] = "1"
            env["CUDA_VISIBLE_DEVICES"] = ""
        else:
            env.pop("TRITON_INTERPRET", None)
        env.update(self.extra_env)
        return env

    def start(self) -> dict | SandboxFailure:
        self.close()
        home = os.path.join(self.root, f"child{self.starts}")
        self.starts += 1
        for sub in ("tmp", "jobs"):
            os.makedirs(os.path.join(home, sub), exist_ok=True)
        prepare_scratch(self.boundary, self.root)
        req_r, req_w = os.pipe()
        resp_r, resp_w = os.pipe()
        # The device lock is opened here, outside the box, and only its descriptor goes in.
        lock_fd = device_lock.open_lock(device_lock.lock_path()) if self.gpu else None
        args = [
            "--platform",
            self.platform,
            "--fds",
            f"{req_r},{resp_w}",
            "--root",
            self.root,
            "--home",
            home,
            "--memory-limit",
            str(self.memory_limit),
            "--max-processes",
            str(C.CHILD_MAX_PROCESSES if self.boundary.uid is not None else 0),
        ]
        if lock_fd is not None:
            args += ["--lock-fd", str(lock_fd)]
        cmd = confine(
            self.boundary,
            "workers.child",
            args,
            scratch=self.root,
            gpu=self.gpu,
        )
        self.proc = subprocess.Popen(
            cmd,
            cwd=home,
            env=self._env(home),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            pass_fds=(req_r, resp_w) + ((lock_fd,) if lock_fd is not None else ()),
            start_new_session=True,
        )
        os.close(req_r)
        os.close(resp_w)
        if lock_fd is not None:
            os.close(lock_fd)  # the child's copy is the one that locks
        self._req = os.fdopen(req_w, "wb", buffering=0)
        self._resp = resp_r
        self.tap = _OutputTap(self.proc.stdout)
        self.tap.start()
        self._pids = [self.proc.pid]
        result = self._wait(C.CHILD_START_TIMEOUT_S, "start")
        if isinstance(result, SandboxFailure):
            return result
        self._pids = _descendants(self.proc.pid)
        if isinstance(result.get("fingerprint"), dict):
            result["fingerprint"]["sandbox"] = self.boundary.describe()
        self.hello = result
        return result

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self):
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self.proc.kill()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        for closer in (getattr(self, "_req", None),):
            try:
                if closer:
                    closer.close()
            except OSError:
                pass
        try:
            os.close(self._resp)
        except (OSError, AttributeError):
            pass
        if self.proc.stdout:
            # The tap ends on end-of-file once the child is gone; a grandchild that kept the
            # pipe open does not hold the worker up.
            self.tap.join(timeout=1.0)
            self.proc.stdout.close()
        self.proc = None

    def close(self):
        if self.alive:
            try:
                self._send({"op": "exit"})
                self.proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.kill()

    def cleanup(self):
        self.close()
        if self._own_root:
            shutil.rmtree(self.root, ignore_errors=True)
            # Again on the way out: a worker killed while this one started may have outlived
            # the sweep at its start (its process still exiting), and no one else may come.
            sweep_stale_scratch()

    # messaging ---------------------------------------------------------------------------
    def _send(self, message: dict):
        data = json.dumps(message).encode()
        self._req.write(struct.pack(">I", len(data)) + data)

    def _read_exact(
        self, n: int, deadline: float, phase: str, limit: float
    ) -> bytes | SandboxFailure:
        buf = bytearray()
        while len(buf) < n:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return self._fail_timeout(phase, limit)
            ready, _, _ = select.select([self._resp], [], [], min(remaining, 0.1))
            if not ready:
                failure = self._check_health(phase)
                if failure:
                    return failure
                continue
            chunk = os.read(self._resp, n - len(buf))
            if not chunk:
                return self._fail_dead(phase)
            buf += chunk
        return bytes(buf)

    def _check_health(self, phase: str) -> SandboxFailure | None:
        if self.proc.poll() is not None:
            return self._fail_dead(phase)
        if self.tap.total > C.OUTPUT_FLOOD_BYTES:
            evidence = self.tap.snapshot()
            self.kill()
            return SandboxFailure(
                C.RULE_OUTPUT_FLOOD,
                f"printed more than {C.OUTPUT_FLOOD_BYTES} bytes during {phase}; child stopped",
                evidence,
            )
        rss = sum(_rss_bytes(pid) for pid in self._pids)
        if rss > self.memory_limit:
            evidence = {**self.tap.snapshot(), "rss_bytes": rss}
            self.kill()
            return SandboxFailure(
                C.RULE_MEMORY,
                f"resident memory {rss >> 20} MiB over the {self.memory_limit >> 20} MiB limit "
                f"during {phase}",
                evidence,
            )
        return None

    def _fail_timeout(self, phase: str, limit: float) -> SandboxFailure:
        """The phase's limit is said: on the interpreter, which runs a launch's programs one
        after another, a large input can outlast it without anything being wrong."""
        evidence = self.tap.snapshot()
        self.kill()
        return SandboxFailure(
            C.RULE_TIMEOUT, f"timed out during {phase} (its limit: {limit:.0f} s)", evidence
        )

    def _fail_dead(self, phase: str) -> SandboxFailure:
        try:
            code = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            code = None
        self.tap.join(timeout=1.0)  # the child is gone: read its last output to end-of-file
        evidence = {**self.tap.snapshot(), "returncode": code}
        self.kill()
        if self.boundary.kind != KIND_NONE and code is not None and code > 128:
            code = 128 - code  # bwrap exits 128 + N when its child dies of signal N
        if code is not None and code < 0:
            name = signal.Signals(-code).name if -code in signal.valid_signals() else str(-code)
            rule = (
                C.RULE_MEMORY if name in {"SIGKILL"} and "MemoryError" in evidence["log"] else None
            )
            return SandboxFailure(
                rule or C.RULE_CRASH, f"child crashed with {name} during {phase}", evidence
            )
        return SandboxFailure(
            C.RULE_EXIT, f"child exited with status {code} during {phase}", evidence
        )

    def _wait(self, timeout: float, phase: str) -> dict | SandboxFailure:
        deadline = time.monotonic() + timeout
        header = self._read_exact(4, deadline, phase, timeout)
        if isinstance(header, SandboxFailure):
            return header
        (length,) = struct.unpack(">I", header)
        body = self._read_exact(length, deadline, phase, timeout)
        if isinstance(body, SandboxFailure):
            return body
        try:
            return json.loads(body)
        except json.JSONDecodeError:
            self.kill()
            return SandboxFailure(C.RULE_CRASH, f"garbled reply from the child during {phase}")

    def call(self, op: str, args: dict, timeout: float) -> dict | SandboxFailure:
        """Run one operation in the child. The reply carries the captured output as ``log``."""
        reply = self._call(op, args, timeout)
        if isinstance(reply, SandboxFailure):
            return SandboxFailure(
                reply.rule, redact(reply.reason, self.secrets), redact(reply.evidence, self.secrets)
            )
        return redact(reply, self.secrets)

    def _call(self, op: str, args: dict, timeout: float) -> dict | SandboxFailure:
        if not self.alive:
            started = self.start()
            if isinstance(started, SandboxFailure):
                return started
        mark = f"\x1eke-end-{secrets.token_hex(8)}\x1e"
        self.tap.reset(mark.encode())
        try:
            self._send({"op": op, "args": args, "mark": mark})
        except (BrokenPipeError, OSError):
            return self._fail_dead(op)
        reply = self._wait(max(timeout, 0.1), op)
        if isinstance(reply, SandboxFailure):
            return reply
        # Output written just before the reply may still be in the pipe: read up to the mark
        # (a child that closed its stdout has none, hence the bound).
        self.tap.wait_mark(C.OUTPUT_MARK_WAIT_S)
        reply.update(self.tap.snapshot())
        if reply["log_bytes"] > C.OUTPUT_FLOOD_BYTES:
            self.kill()
            return SandboxFailure(
                C.RULE_OUTPUT_FLOOD,
                f"printed {reply['log_bytes']} bytes during {op} (limit {C.OUTPUT_FLOOD_BYTES})",
                {"log": reply["log"], "log_bytes": reply["log_bytes"]},
            )
        if reply.get("restart"):
            self.kill()  # the child reported itself tainted (patched modules, stray threads)
        return reply
