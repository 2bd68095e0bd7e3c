"""Compare an entry's provenance with a toolchain fingerprint (workers/fingerprint.py `collect`).

Pure functions, used both to flag entries for revalidation (a service) and to warn about them
at retrieval time when a campaign's own fingerprint differs (a selector).
"""

from apps.knowledge.constants import FINGERPRINT_KEYS


def _significant(value, components: int | None) -> str:
    text = str(value).strip()
    if components is None:
        return text.lower()
    return ".".join(text.split("+")[0].split(".")[:components])


def provenance_mismatches(provenance: dict, fingerprint: dict) -> list[str]:
    """Differences that matter, as "triton 3.6.0 -> 3.9.0"; [] when they agree or cannot be
    compared. Provenance from another platform (an interpreter note against a GPU host) is not
    compared: each platform has its own toolchain."""
    if not provenance or not fingerprint:
        return []
    theirs, ours = provenance.get("platform"), fingerprint.get("platform")
    if theirs and ours and theirs != ours:
        return []
    found = []
    for key, components in FINGERPRINT_KEYS.items():
        old, new = provenance.get(key), fingerprint.get(key)
        if old in (None, "") or new in (None, ""):
            continue
        if _significant(old, components) != _significant(new, components):
            found.append(f"{key} {old} -> {new}")
    return found
