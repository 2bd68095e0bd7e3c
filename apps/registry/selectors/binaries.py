"""An artifact's compiled binaries as its page lists them: which specialisation each is, for
which GPU, and whether it ever ran (an ``interpret`` artifact's cubins were only compiled ahead
of time, to keep IR and register use)."""

from apps.campaigns.constants import Platform
from apps.campaigns.text import gpu_target, specialisation_labels


def artifact_binaries(*, artifact) -> dict:
    """``{"ran": bool, "note": str, "rows": [...]}`` for the artifact's signed binaries."""
    binaries = [b for b in artifact.body.get("binaries") or [] if isinstance(b, dict)]
    specs = [
        {
            "kernel": b.get("kernel", "kernel"),
            "constexprs": b.get("constexprs") or {},
            "options": {"num_warps": b["num_warps"]} if b.get("num_warps") else {},
        }
        for b in binaries
    ]
    ran = artifact.body.get("platform", artifact.region.platform) != Platform.INTERPRET
    rows = []
    for b, label in zip(binaries, specialisation_labels(specs), strict=True):
        target = gpu_target(b.get("target"))
        rows.append(
            {
                "label": label,
                "cubin_sha256": b.get("cubin_sha256"),
                "target": target if ran else f"{target}: compiled ahead of time, not run",
                "registers": b.get("registers"),
                "spill_stores": b.get("spill_stores"),
            }
        )
    note = ""
    if rows and not ran:
        targets = sorted({gpu_target(b.get("target")) for b in binaries})
        note = (
            "This artifact was checked on the Triton interpreter (CPU). Its kernels were "
            f"compiled ahead of time for {', '.join(targets)} only to keep their IR and register "
            "use: none of these binaries ran on a GPU, and nothing was timed."
        )
    return {"ran": ran, "note": note, "rows": rows}
