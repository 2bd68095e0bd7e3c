"""Recall@k of retrieval on a labelled query set: each query lists the entry slugs a
knowledgeable engineer expects among the first k results (public entries only)."""

from apps.knowledge.models import Entry
from apps.knowledge.selectors.retrieval import knowledge_retrieve
from workers.catalog import catalog_get


def labelled_query(item: dict) -> dict:
    """A labelled item's retrieval query; `catalog` fills in a catalog problem's name, family
    and reference source, as the search engine would."""
    query = {"problem_name": "", "problem_source": "", "family": "", **item["query"]}
    if item.get("catalog"):
        problem = catalog_get(item["catalog"])
        query["problem_name"] = problem.name
        query["family"] = problem.family
        query["problem_source"] = problem.problem_path.read_text()
    return query


def recall_at_k(*, labelled: list[dict], k: int = 5, user=None, full_text: bool = True) -> dict:
    """{recall, mrr, queries: [{name, recall, found, missed, rank}], missing, entries}."""
    known = set(Entry.objects.values_list("slug", flat=True))
    missing = sorted({s for q in labelled for s in q["expected"]} - known)
    rows = []
    for item in labelled:
        query = labelled_query(item)
        found = knowledge_retrieve(user=user, query=query, limit=k, full_text=full_text)
        got = [r["slug"] for r in found]
        expected = item["expected"]
        hits = [slug for slug in expected if slug in got]
        first = min((got.index(slug) + 1 for slug in hits), default=None)
        rows.append(
            {
                "name": item["name"],
                "recall": len(hits) / len(expected),
                "found": hits,
                "missed": [slug for slug in expected if slug not in got],
                "rank": first,
                "retrieved": got,
            }
        )
    count = len(rows) or 1
    return {
        "k": k,
        "recall": sum(r["recall"] for r in rows) / count,
        "mrr": sum(1 / r["rank"] for r in rows if r["rank"]) / count,
        "queries": rows,
        "missing": missing,
        "entries": len(known),
    }
