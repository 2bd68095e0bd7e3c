"""What a compiled kernel leaves for review, whatever its back end: its IR capped to what a
report keeps, and ptxas's resource report (registers, spills, stack) for its PTX."""

from __future__ import annotations

import os
import re
import subprocess

from workers import constants as C


def cap_ir(text: str) -> str:
    if len(text) <= C.IR_CAP_CHARS:
        return text
    return text[: C.IR_CAP_CHARS] + f"\n... [{len(text) - C.IR_CAP_CHARS} chars not kept]"


_PTXAS_PATTERNS = {
    "registers": r"Used (\d+) registers",
    "spill_stores": r"(\d+) bytes spill stores",
    "spill_loads": r"(\d+) bytes spill loads",
    "stack_bytes": r"(\d+) bytes stack frame",
    "ptxas_smem_bytes": r"(\d+) bytes smem",
}


def ptxas_report(ptx: str, arch: int, folder: str) -> dict:
    """Run ptxas -v on the PTX for ``sm_<arch>`` and parse its resource report."""
    from triton.backends.nvidia import compiler as nv

    try:
        ptxas = nv.get_ptxas(arch).path
    except TypeError:  # older Triton: get_ptxas() takes no arch
        ptxas = nv.get_ptxas().path
    path = os.path.join(folder, "kernel.ptx")
    with open(path, "w") as fh:
        fh.write(ptx)
    suffix = "a" if arch >= 90 else ""
    proc = subprocess.run(
        [ptxas, "-v", f"--gpu-name=sm_{arch}{suffix}", path, "-o", os.path.join(folder, "k.cubin")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    log = (proc.stdout + proc.stderr)[-4000:]
    report = {"ptxas_log": log, "ptxas_rc": proc.returncode}
    for key, pattern in _PTXAS_PATTERNS.items():
        m = re.search(pattern, log)
        report[key] = int(m.group(1)) if m else None
    return report
