"""Flag entries whose provenance no longer matches the toolchain, or whose expiry has passed.

Run by `manage.py knowledge_revalidate` (with this host's fingerprint, or a worker's) and when a
campaign ends (with the fingerprint its evaluations reported). A flagged entry keeps feeding
generators, but only with a warning, until a curator marks it revalidated or retires it.
"""

import logging
from datetime import date

from apps.knowledge.constants import EntryStatus
from apps.knowledge.fingerprints import provenance_mismatches
from apps.knowledge.models import Entry
from apps.knowledge.services.entries import knowledge_entry_revise

logger = logging.getLogger(__name__)


def knowledge_revalidate(
    *, fingerprint: dict | None, by=None, today: date | None = None, dry_run: bool = False
) -> list[tuple[Entry, str]]:
    """Flag active entries that disagree with `fingerprint` or have expired; returns
    [(entry, why)]. All entries are checked, whoever may see them: this is a system job."""
    today = today or date.today()
    flagged = []
    for entry in Entry.objects.filter(status=EntryStatus.ACTIVE).select_related("group"):
        reasons = provenance_mismatches(entry.provenance, fingerprint or {})
        if entry.expires_on and entry.expires_on < today:
            reasons.append(f"expired on {entry.expires_on.isoformat()}")
        if not reasons:
            continue
        why = "; ".join(reasons)
        flagged.append((entry, why))
        if not dry_run:
            where = (fingerprint or {}).get("host") or "this host"
            knowledge_entry_revise(
                entry=entry,
                by=by,
                reason=f"Flagged for revalidation: {why} (fingerprint of {where})",
                status=EntryStatus.NEEDS_REVALIDATION,
                status_note=why,
            )
    if flagged:
        logger.info("knowledge: %d entries flagged for revalidation", len(flagged))
    return flagged
