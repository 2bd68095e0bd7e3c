"""A fresh Python for search tests whose code must run under Triton's interpreter (or must not:
``TRITON_INTERPRET`` has to be chosen before triton is first imported)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def run_child(script: str, *args: str, interpret: bool = True, timeout: int = 300):
    """Run ``script`` with ``args`` in a fresh Python from the repository root and return the
    JSON it prints after ``RESULTS``. ``TRITON_INTERPRET`` is set (or removed) there, since it
    must be chosen before triton is first imported."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(ROOT)
    if interpret:
        env["TRITON_INTERPRET"] = "1"
    proc = subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=timeout,
    )
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULTS")), None)
    assert line, proc.stderr[-3000:]
    return json.loads(line[len("RESULTS") :])
