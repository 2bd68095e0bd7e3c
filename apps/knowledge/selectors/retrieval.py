"""Ranked retrieval of entries for a generator's prompt (the search engine's `retrieve`).

A query is {problem_source, problem_name, platform, family, mode, feedback}. Candidates are the
entries whose text may reach the campaign owner's prompts (`entries_retrievable`: group
membership decides, a curator's office does not) that apply to the platform and family
(entries naming none apply everywhere) and may feed generators: active ones, ones needing
revalidation (with a warning), and draft failed approaches (with a warning that they are
unreviewed). They are ranked by full-text relevance of terms drawn from the query, plus a boost
for being specific to the family or platform and for the kinds a mode needs most.
"""

import re
from collections.abc import Callable
from datetime import date

from django.db import transaction
from django.db.models import Q

from apps.knowledge.constants import (
    FAMILY_BOOST,
    FEEDBACK_WEIGHT,
    MODE_KIND_BOOST,
    PLATFORM_BOOST,
    RETRIEVAL_BODY_CHARS,
    RETRIEVAL_LIMIT,
    RETRIEVAL_MAX_TERMS,
    EntryKind,
    EntryStatus,
)
from apps.knowledge.fingerprints import provenance_mismatches
from apps.knowledge.models import Entry, labels_join
from apps.knowledge.selectors.entries import entries_retrievable
from apps.knowledge.selectors.search import search_terms, text_scores
from apps.knowledge.selectors.toolchain import toolchain_fingerprint_latest

# Words every reference or report contains: they would match everything and rank nothing.
STOPWORDS = set(
    "a an and are as at be by def for from in is it of on or return self the to with x y "
    "class model modelnew init forward super torch nn module tensor none true false import "
    "get inputs init_inputs shape dim size out int float".split()
)
SOURCE_CALL_RE = re.compile(r"(?:torch|F|nn|tl)\.(\w+)|\.(\w+)\(")
ALIASES = {
    "bfloat16": ["bf16"],
    "float16": ["fp16"],
    "interpret": ["interpreter", "cpu"],
    "cuda": ["gpu", "hopper", "h200"],
    "matmul": ["gemm", "dot"],
    "linear": ["matmul", "gemm"],
    "layer_norm": ["layernorm", "normalization"],
    "rms_norm": ["rmsnorm", "normalization"],
    "softmax": ["reduction"],
    "cross_entropy": ["loss", "logsumexp"],
}


def _words(value) -> list[str]:
    if isinstance(value, dict):
        return [w for v in value.values() for w in _words(v)]
    if isinstance(value, list | tuple):
        return [w for v in value for w in _words(v)]
    return [str(value)] if value not in (None, "") else []


def query_terms(query: dict) -> list[str]:
    """Search terms for a retrieval query, most specific first."""
    raw: list[str] = []
    for key in ("problem_name", "family"):
        if query.get(key):
            raw.append(str(query[key]))
    feedback = query.get("feedback") or {}
    raw += _words([feedback.get("gate"), feedback.get("reason")])
    for match in SOURCE_CALL_RE.finditer(query.get("problem_source") or ""):
        raw.append(match.group(1) or match.group(2))
    raw += _words([query.get("platform"), query.get("mode")])
    raw += _words(feedback.get("evidence"))[:20]
    expanded: list[str] = []
    for word in raw:
        key = word.lower().replace("-", "_")
        expanded += [key, *ALIASES.get(key, [])]
    terms = [t for t in search_terms(" ".join(expanded)) if t not in STOPWORDS and len(t) > 1]
    return terms[:RETRIEVAL_MAX_TERMS]


def retrieval_candidates(*, user, platform: str = "", family: str = ""):
    qs = entries_retrievable(user=user).filter(
        Q(status__in=[EntryStatus.ACTIVE, EntryStatus.NEEDS_REVALIDATION])
        | Q(status=EntryStatus.DRAFT, kind=EntryKind.FAILED_APPROACH)
    )
    if platform:
        qs = qs.filter(Q(platforms__contains=labels_join([platform])) | Q(platforms=""))
    if family:
        qs = qs.filter(Q(families__contains=labels_join([family])) | Q(families=""))
    return qs


def entry_warning(entry: Entry, fingerprint: dict | None = None, today: date | None = None) -> str:
    """Why a generator should not take this entry at face value ("" when it may)."""
    if entry.status == EntryStatus.DRAFT:
        source = f" from campaign {entry.source_campaign_id}" if entry.source_campaign_id else ""
        return f"Draft{source}, not reviewed by a curator: a failed approach, use as a warning."
    if entry.status == EntryStatus.NEEDS_REVALIDATION:
        return f"Needs revalidation ({entry.status_note or 'toolchain changed'}); may not hold."
    if entry.expires_on and entry.expires_on < (today or date.today()):
        return f"Expired on {entry.expires_on.isoformat()}; may not hold."
    mismatches = provenance_mismatches(entry.provenance, fingerprint or {})
    if mismatches:
        return f"Observed under another toolchain ({'; '.join(mismatches)}); may not hold."
    return ""


def _normalised(scores: dict[int, float]) -> dict[int, float]:
    top = max(scores.values(), default=0.0) or 1.0
    return {pk: score / top for pk, score in scores.items()}


def knowledge_retrieve(
    *,
    user,
    query: dict,
    limit: int = RETRIEVAL_LIMIT,
    fingerprint: dict | None = None,
    full_text: bool = True,
) -> list[dict]:
    """The `limit` best entries for `query` that `user` may see, as prompt-ready dicts
    {id, slug, title, body, kind, status, warning, score}; a warning is also prefixed to the
    body, so it reaches the prompt whatever the generator does with the other keys.
    `full_text=False` ranks by the filters and boosts alone (the recall command's ablation)."""
    platform = query.get("platform") or ""
    family = query.get("family") or ""
    candidates = list(retrieval_candidates(user=user, platform=platform, family=family))
    if not candidates:
        return []
    by_pk = {e.pk: e for e in candidates}
    within = Entry.objects.filter(pk__in=list(by_pk))
    terms = query_terms(query) if full_text else []
    scores = _normalised(text_scores(terms=terms, match_all=False, within=within))
    # Gate feedback is the most specific evidence a repair has: its terms count again.
    feedback = query.get("feedback") or {}
    feedback_terms = query_terms({"feedback": feedback}) if feedback and full_text else []
    fb_scores = _normalised(text_scores(terms=feedback_terms, match_all=False, within=within))
    mode_boost = MODE_KIND_BOOST.get(query.get("mode") or "", {})
    ranked = []
    for entry in candidates:
        score = scores.get(entry.pk, 0.0) + FEEDBACK_WEIGHT * fb_scores.get(entry.pk, 0.0)
        if family and family.lower() in entry.family_list:
            score += FAMILY_BOOST
        if platform and platform.lower() in entry.platform_list:
            score += PLATFORM_BOOST
        if score > 0:
            score += mode_boost.get(entry.kind, 0.0)
            ranked.append((score, entry))
    ranked.sort(key=lambda pair: (-pair[0], pair[1].pk))
    results = []
    for score, entry in ranked[:limit]:
        warning = entry_warning(entry, fingerprint)
        body = entry.body[:RETRIEVAL_BODY_CHARS]
        results.append(
            {
                "id": entry.pk,
                "slug": entry.slug,
                "title": entry.title,
                "body": f"[WARNING: {warning}]\n{body}" if warning else body,
                "kind": entry.kind,
                "status": entry.status,
                "warning": warning,
                "score": round(score, 4),
            }
        )
    return results


def knowledge_retriever(
    *, user, fingerprint: dict | None = None, platform: str = ""
) -> Callable[[dict], list[dict]]:
    """A `retrieve(query)` bound to one user (a campaign's owner) for the search engine.

    Without a fingerprint, the latest one workers reported for `platform` is looked up on the
    first call. Each call runs in a savepoint: the engine swallows retrieval errors, and a
    failed query must not leave the campaign's transaction unusable (PostgreSQL)."""
    known: dict = {"fingerprint": fingerprint, "resolved": fingerprint is not None}

    def retrieve(query: dict) -> list[dict]:
        with transaction.atomic():
            if not known["resolved"] and platform:
                known["fingerprint"] = toolchain_fingerprint_latest(platform=platform)
                known["resolved"] = True
            return knowledge_retrieve(user=user, query=query, fingerprint=known["fingerprint"])

    return retrieve
