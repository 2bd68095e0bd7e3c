"""Ranked full-text search over visible entries.

PostgreSQL: weighted tsvectors (title A, tags and families B, body D, English stemming, GIN
index of migration 0003) ranked with `ts_rank`. SQLite: the FTS5 index of migration 0002
(porter stemming) ranked with BM25, weighted the same way (title 10, tags 4, families 4, body
1). Either way the engine only scores ids; which entries may be seen is decided by
`entries_visible` before anything is returned.

Query terms are runs of Unicode letters, digits and combining marks (NFKC, lower-cased), so
`ünïcødé` or `हिन्दी` are searched as written; both engines tokenise documents the same way
(FTS5's unicode61, PostgreSQL's parser). Lower-casing, not casefolding: the engines lower-case
documents, so casefold's `ß` -> `ss` would search for a word no index holds. Text without a
letter or digit (`✓`, `--`) has nothing to search for and matches no entry.
"""

import unicodedata

from django.db import connection
from django.db.models import QuerySet, Value

from apps.knowledge.models import Entry
from apps.knowledge.selectors.entries import entry_list

# bm25 column weights: title, tags, families, body (the FTS5 column order).
BM25_WEIGHTS = (10.0, 4.0, 4.0, 1.0)


def _is_term_char(char: str) -> bool:
    return unicodedata.category(char)[0] in "LNM"  # letters, numbers, combining marks


def search_terms(text: str) -> list[str]:
    """Terms of `text`: runs of letters, digits and marks holding at least one letter or digit,
    NFKC-normalised and lower-cased, unique, in order (safe for any query syntax: no quote,
    operator or symbol survives)."""
    normalised = unicodedata.normalize("NFKC", text or "").lower()
    runs, current = [], []
    for char in normalised + " ":
        if _is_term_char(char):
            current.append(char)
        elif current:
            runs.append("".join(current))
            current = []
    # A dict keeps the order and makes this linear in the number of terms.
    return list(dict.fromkeys(r for r in runs if any(c.isalnum() for c in r)))


def _scores_sqlite(terms: list[str], match_all: bool) -> dict[int, float]:
    joiner = " AND " if match_all else " OR "
    match = joiner.join(f'"{term}"' for term in terms)
    weights = ", ".join(str(w) for w in BM25_WEIGHTS)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT rowid, -bm25(knowledge_entry_fts, {weights}) FROM knowledge_entry_fts "
            "WHERE knowledge_entry_fts MATCH %s",
            [match],
        )
        return {int(pk): float(score) for pk, score in cursor.fetchall()}


def entry_document():
    """The weighted tsvector of an entry (migration 0003 indexes exactly this expression)."""
    from django.contrib.postgres.search import SearchVector

    return (
        SearchVector("title", weight="A", config="english")
        + SearchVector("tags", "families", weight="B", config="english")
        + SearchVector("body", weight="D", config="english")
    )


def _scores_postgresql(terms: list[str], match_all: bool, qs: QuerySet) -> dict[int, float]:
    """Weighted tsvector relevance with an inverse-document-frequency factor per term.

    `ts_rank` alone has no notion of how rare a term is, so words every note contains (torch,
    cuda) would outrank the one specific word a repair's feedback carries; weighting each term's
    rank by its IDF over the candidate set brings PostgreSQL in line with SQLite's BM25.
    """
    import math

    from django.contrib.postgres.search import SearchQuery, SearchRank

    vector = entry_document()
    documents = qs.annotate(document=vector)
    total = documents.count()
    scores: dict[int, float] = {}
    matched_terms: dict[int, int] = {}
    for term in terms:
        query = SearchQuery(term, search_type="plain", config="english")
        rows = list(
            documents.filter(document=query)
            .annotate(rank=SearchRank(vector, query, normalization=Value(1)))
            .values_list("pk", "rank")
        )
        if not rows:
            continue
        idf = math.log(1 + (total - len(rows) + 0.5) / (len(rows) + 0.5))
        for pk, rank in rows:
            scores[pk] = scores.get(pk, 0.0) + idf * float(rank)
            matched_terms[pk] = matched_terms.get(pk, 0) + 1
    if match_all:
        scores = {pk: sc for pk, sc in scores.items() if matched_terms[pk] == len(terms)}
    return scores


def text_scores(*, terms: list[str], match_all: bool, within: QuerySet) -> dict[int, float]:
    """Entry id -> text relevance (> 0) for entries of `within` that match `terms`."""
    if not terms:
        return {}
    if connection.vendor == "postgresql":
        return _scores_postgresql(terms, match_all, within)
    scores = _scores_sqlite(terms, match_all)
    allowed = set(within.filter(pk__in=list(scores)).values_list("pk", flat=True))
    return {pk: score for pk, score in scores.items() if pk in allowed}


def entry_search(*, user, text: str = "", **filters) -> list[Entry] | QuerySet[Entry]:
    """Visible entries matching every term of `text` and the filters, best first (each with a
    `score`); without text, the filtered list in title order; none for text without a term."""
    qs = entry_list(user=user, **filters)
    terms = search_terms(text)
    if not terms:
        return qs.none() if (text or "").strip() else qs
    scores = text_scores(terms=terms, match_all=True, within=qs)
    entries = list(qs.filter(pk__in=list(scores)))
    for entry in entries:
        entry.score = scores[entry.pk]
    entries.sort(key=lambda e: (-e.score, e.title))
    return entries
