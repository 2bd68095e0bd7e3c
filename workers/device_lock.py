"""One GPU, several evaluation processes: the timed rounds take the device in turn.

A GPU host that runs more than one evaluation at a time (two Celery workers on the cuda queue,
a benchmark with ``--jobs 4``) would otherwise time candidates while another process's kernels
share the chip, and every verdict would carry the other's load. Compiling and loading overlap
freely; the paired timing rounds, the correctness runs and torch.compile's own timings of its
kernels' configs (``performance.lock_inductor_tuning``) hold the lock.

The parent (outside the sandbox) opens the lock file and hands the open descriptor to the
sandbox child, which sees no host path: ``flock`` on an inherited descriptor excludes every
other process that opened the same file. A confined GPU run (the per-case tuner, a model
check) gets it the same way, its number in ``KERNELEVOLVE_DEVICE_LOCK_FD`` (``inherited``;
``python -m workers.device_lock_probe`` tries it from inside the boundary).
``KERNELEVOLVE_DEVICE_LOCK`` names the file (default: one per ``CUDA_VISIBLE_DEVICES`` value in
the temporary folder); ``off`` turns it off.
"""

from __future__ import annotations

import fcntl
import os
import re
import tempfile
import time
from contextlib import contextmanager

from workers import constants as C


def lock_path(env=None) -> str | None:
    """The lock file for this host's visible devices, or None when turned off."""
    env = os.environ if env is None else env
    value = (env.get(C.DEVICE_LOCK_ENV) or "").strip()
    if value.lower() in ("off", "0", "no", "none"):
        return None
    if value:
        return value
    devices = re.sub(r"[^A-Za-z0-9_.-]", "_", env.get("CUDA_VISIBLE_DEVICES") or "all")
    return os.path.join(tempfile.gettempdir(), f"kernelevolve-gpu-{devices}.lock")


def inherited() -> int | None:
    """The lock's descriptor a confined GPU run was handed (``workers.confined``), or None."""
    value = os.environ.get(C.DEVICE_LOCK_FD_ENV, "")
    return int(value) if value.isdigit() else None


def open_lock(path: str | None) -> int | None:
    """An open descriptor on the lock file (created readable and writable by all), or None."""
    if not path:
        return None
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            os.fchmod(fd, 0o666)  # another user's worker on this host takes the same lock
        except OSError:
            pass
    except PermissionError:  # made by another user: flock works on a read-only descriptor
        fd = os.open(path, os.O_RDONLY)
    os.set_inheritable(fd, True)
    return fd


# Seconds this process has spent in ``held`` blocks, the lock taken or not (off, CPU): the time
# its work had the device to itself. The sandbox child reports each operation's share as the
# operation's device time; compiling and warming up, outside these blocks, overlap another
# process's rounds on the same GPU and are counted as wall time only.
HELD_S = 0.0


def held_total() -> float:
    return HELD_S


# ``held`` blocks open in this process, per descriptor. A block inside one that holds the lock
# (torch.compile's own tuning timed while a correctness run holds the device) neither waits nor
# lets go: ``flock`` on the descriptor this process already holds would succeed at once, and its
# release would free the device in the middle of the outer block.
_DEPTH: dict[int, int] = {}


@contextmanager
def held(fd: int | None, wait_s: float = C.DEVICE_LOCK_WAIT_S):
    """Hold the device while the block runs; yields a dict that says how long it waited.

    Past ``wait_s`` the block runs without the lock and the dict says so: a holder that never
    lets go (a hung process) must not turn every later evaluation into a time-out."""
    info = {"waited_s": 0.0, "held": False}
    if fd is None:
        with _counted():
            yield info
        return
    if _DEPTH.get(fd):
        info.update(held=True, nested=True)  # the outer block holds it and counts the time
        _DEPTH[fd] += 1
        try:
            yield info
        finally:
            _DEPTH[fd] -= 1
        return
    start = time.monotonic()
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            info["held"] = True
            break
        except BlockingIOError:
            if time.monotonic() - start > wait_s:
                info["note"] = f"another process held the device over {wait_s:g} s; timed anyway"
                break
            time.sleep(0.005)
        except OSError as exc:  # the descriptor was closed or replaced (untrusted code)
            info["note"] = f"device lock unusable: {exc}"
            break
    info["waited_s"] = round(time.monotonic() - start, 3)
    if info["held"]:
        _DEPTH[fd] = 1
    try:
        with _counted():
            yield info
    finally:
        if info["held"]:
            _DEPTH.pop(fd, None)
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
            except OSError:
                pass


@contextmanager
def _counted():
    global HELD_S
    start = time.monotonic()
    try:
        yield
    finally:
        HELD_S += time.monotonic() - start
