"""The environment fingerprint carried by every report, and the harness hash.

Results from different fingerprints are never mixed silently: the hash covers the evaluation
core's own source, so a change to the harness changes every report's ``harness_hash``.
"""

from __future__ import annotations

import functools
import hashlib
import os
import platform as _platform
import socket
import subprocess
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
# Subpackages owned by others (the search, the catalogue) and benchmark scripts do not change how
# a candidate is judged, so they stay out of the hash.
_NOT_HARNESS = {"search", "catalog", "bench", "__pycache__"}


@functools.lru_cache(maxsize=1)
def harness_hash() -> str:
    digest = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(_HERE):
        dirnames[:] = sorted(d for d in dirnames if d not in _NOT_HARNESS)
        for name in sorted(filenames):
            if name.endswith(".py"):
                path = os.path.join(dirpath, name)
                digest.update(os.path.relpath(path, _HERE).encode() + b"\0")
                with open(path, "rb") as fh:
                    digest.update(fh.read())
                digest.update(b"\0")
    return digest.hexdigest()


def _driver_version() -> str | None:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout else None
    except (OSError, subprocess.SubprocessError, IndexError):
        return None


def _cute_dsl_version() -> str | None:
    from importlib import metadata

    try:
        return metadata.version("nvidia-cutlass-dsl")
    except metadata.PackageNotFoundError:
        return None


def collect(platform: str) -> dict:
    """Fingerprint of this process's environment (call it where torch is imported)."""
    import torch
    import triton

    fp = {
        "platform": platform,
        "device": "cpu (Triton interpreter)" if platform == "interpret" else None,
        "compute_capability": None,
        "driver": None,
        "cuda": torch.version.cuda,
        "torch": torch.__version__,
        "triton": triton.__version__,
        "python": _platform.python_version(),
        "host": socket.gethostname(),
        "machine": _platform.machine(),
        "harness_hash": harness_hash(),
        "cute_dsl": _cute_dsl_version(),  # the cute back end's compiler (None: not installed)
    }
    if platform == "cuda" and torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        fp["device"] = props.name
        fp["compute_capability"] = f"{props.major}.{props.minor}"
        fp["sm_count"] = props.multi_processor_count
        fp["memory_bytes"] = props.total_memory
        fp["driver"] = _driver_version()
    elif platform == "interpret":
        fp["cpu"] = _platform.processor() or _platform.machine()
        fp["cpus"] = os.cpu_count()
    fp["executable"] = sys.executable
    return fp
