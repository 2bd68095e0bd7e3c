"""Reads for reviewing candidates: the candidate page (source, diffs, gates, cases, lineage,
comment threads), two candidates compared, reviewers' decisions, a campaign's review list and the
list of accepted candidates to freeze.

Each selector runs a bounded number of queries whatever the size of the campaign (the tests
assert it).
"""

from collections import defaultdict
from dataclasses import dataclass, field

import pygments
from django.db.models import Count, Exists, F, OuterRef, Prefetch, Q, QuerySet
from django.db.models.fields.json import KeyTransform

from apps.campaigns import charts, review
from apps.campaigns.constants import REVIEW_CACHE_S, Baseline, NodeStatus
from apps.campaigns.models import Campaign, Comment, Edge, Node, NodeReview
from apps.campaigns.text import scaled_text
from kernelevolve_site.caching import cached, content_key


@dataclass
class CandidateReview:
    node: Node
    campaign: Campaign
    lines: list
    lineage: list[Node]
    parent: Node | None
    best: Node | None
    # The source table in runs of lines, each ending at a commented line (the last run at the
    # end): the page caches a run's rendered rows under `key`, which names the text and range.
    source_blocks: list[dict] = field(default_factory=list)
    diffs: list[dict] = field(default_factory=list)
    latency: list[dict] = field(default_factory=list)
    gates: list[dict] = field(default_factory=list)
    cases: list[dict] = field(default_factory=list)
    baseline_names: list[str] = field(default_factory=list)
    siblings: dict = field(default_factory=dict)
    # The comment threads (comments without parent, each with `thread_replies`), oldest first.
    threads: list = field(default_factory=list)
    # How long the page may keep a rendered diff (under the diff's `key`, which names the texts).
    cache_s: int = REVIEW_CACHE_S
    # Set when the timings come from the method before paired graph-replay rounds.
    timing_note: str = ""


def _node_with_relations(*, parents: QuerySet[Edge]) -> QuerySet[Node]:
    return Node.objects.select_related(
        "campaign", "campaign__problem", "campaign__best_node"
    ).prefetch_related(
        "gates",
        "measurements",
        Prefetch("in_edges", queryset=parents),
        Prefetch("comments", queryset=Comment.objects.select_related("author", "resolved_by")),
    )


def node_get(*, campaign_id: int, key: str) -> Node:
    return _node_with_relations(parents=Edge.objects.select_related("parent")).get(
        campaign_id=campaign_id, key=key
    )


def _node_for_review(*, campaign_id: int, key: str) -> Node:
    """The node as the candidate page reads it: of the reports (an accepted node's is ~150 kB of
    JSON, mostly gate evidence the gate rows hold too) only the node's own cases, taken out by
    the database; the parent and the best node come without theirs."""
    parents = Edge.objects.select_related("parent").defer("parent__report")
    return (
        _node_with_relations(parents=parents)
        .defer("report", "campaign__best_node__report")
        .annotate(report_cases=KeyTransform("cases", "report"))
        .get(campaign_id=campaign_id, key=key)
    )


def _lineage(node: Node) -> list[Node]:
    """The path from a seed to the node (first parent at each step), seed first.

    One query: the campaign's edges (ids only), walked in memory, then the path's nodes.
    """
    parent_of: dict[int, int | None] = {}
    for child_id, parent_id in Edge.objects.filter(campaign_id=node.campaign_id).values_list(
        "child_id", "parent_id"
    ):
        parent_of.setdefault(child_id, parent_id)
    path, current, seen = [], node.pk, set()
    while current is not None and current not in seen:
        seen.add(current)
        path.append(current)
        current = parent_of.get(current)
    rows = Node.objects.only("id", "key", "status", "fitness", "generator", "campaign_id").in_bulk(
        path
    )
    return [rows[i] for i in reversed(path) if i in rows]


def _neighbours(node: Node) -> dict:
    """The previous and next candidate of the campaign (for keyboard navigation)."""
    base = Node.objects.filter(campaign_id=node.campaign_id)
    prev = base.filter(id__lt=node.pk).order_by("-id").values_list("key", flat=True).first()
    nxt = base.filter(id__gt=node.pk).order_by("id").values_list("key", flat=True).first()
    return {"previous": prev, "next": nxt}


def _sci(value: float | None) -> str | None:
    return None if value is None else f"{value:.3g}"


OLD_TIMING_NOTE = (
    "Timed with the method from before paired graph-replay rounds (CUDA events around each "
    "call): on small cases that measures the host as much as the kernel, so these medians and "
    "speedups are not comparable with device-time numbers (docs/benchmarks.md, issue 10)."
)


def _timing_columns(case: dict | None, baseline: str) -> dict:
    """Device time, host overhead per call and the paired speedup over the campaign's baseline,
    as the performance gate measured them (absent for reports from before paired rounds)."""
    timing = (case or {}).get("timing") or {}
    paired = ((case or {}).get("paired") or {}).get(baseline) or {}
    return {
        "serving": timing.get("mode"),
        "device_us": _us(timing.get("device_median_ms")),
        "host_us": _us(timing.get("host_median_ms")),
        "paired_speedup": paired.get("speedup"),
        "paired_ci": paired.get("ci95"),
        # Judged against the best peer per case: which peer that was on this case.
        "judged_peer": paired.get("peer"),
        # Peers whose output misses the contract on this case (still timed and judged).
        "peer_misses": [
            {
                "peer": peer,
                "reason": check.get("reason") or "",
                "max_abs_err": check.get("max_abs_err"),
            }
            for peer, check in ((case or {}).get("peer_checks") or {}).items()
            if not check.get("passes")
        ],
    }


def _us(ms) -> float | None:
    return ms * 1e3 if isinstance(ms, int | float) else None


def candidate_review(*, campaign_id: int, key: str) -> CandidateReview:
    """Everything the candidate page shows, in a bounded number of queries."""
    node = _node_for_review(campaign_id=campaign_id, key=key)
    campaign = node.campaign
    edges = list(node.in_edges.all())
    parent = next((e.parent for e in edges if e.parent is not None), None)
    best = campaign.best_node if campaign.best_node_id not in (None, node.pk) else None
    diffs = []
    if parent is not None:
        diffs.append(_diff("parent", f"parent {parent.key}", parent.source, node.source, parent))
    if best is not None:
        diffs.append(_diff("best", f"best {best.key}", best.source, node.source, best))
    diffs.append(_diff("reference", "reference (problem)", campaign.problem.source, node.source))
    threads = comment_threads(node.comments.all())
    comments_by_line: dict = defaultdict(list)
    for thread in threads:
        comments_by_line[thread.line].append(thread)
    lines = [
        {"no": i, "html": html, "comments": comments_by_line.get(i, [])}
        for i, html in enumerate(_highlighted_lines(node.source), start=1)
    ]
    source_blocks = _source_blocks(node.source, lines)
    gates = [
        {
            "name": g.name,
            "status": g.status,
            "rule": g.rule,
            "reason": g.reason,
            "wall_seconds": g.wall_seconds,
            "device_seconds": g.device_seconds,
            "panels": review.evidence_panels(g.evidence),
        }
        for g in node.gates.all()
    ]
    measurements = list(node.measurements.all())
    # The best peer is a copy of one of the others (its speedup column names it): not repeated.
    baseline_names = sorted(
        {b for m in measurements for b in (m.baselines or {})} - {Baseline.BEST.value}
    )
    report_cases = node.report_cases if isinstance(node.report_cases, list) else []
    by_name = {c.get("name"): c for c in report_cases if isinstance(c, dict)}
    timed = {name: c for name, c in by_name.items() if c.get("timing")}
    # The gate's paired graph-replay rounds record the serving mode of each timing.
    old_method = bool(timed) and not any(c["timing"].get("mode") for c in timed.values())
    cases = [
        {
            **_timing_columns(timed.get(m.case), campaign.baseline),
            "case": m.case,
            # On interpret, a case too large for the interpreter runs at smaller shapes.
            "scaled": scaled_text((by_name.get(m.case) or {}).get("scaled_for_interpreter")),
            "kind": m.kind,
            "weight": m.weight,
            "status": m.status,
            "skip_reason": m.skip_reason,
            "max_abs_err": _sci(m.max_abs_err),
            "max_rel_err": _sci(m.max_rel_err),
            "median_ms": m.median_ms,
            "ci_low_ms": m.ci_low_ms,
            "ci_high_ms": m.ci_high_ms,
            "baseline_medians": [
                ((m.baselines or {}).get(b) or {}).get("median_ms") for b in baseline_names
            ],
        }
        for m in measurements
    ]
    return CandidateReview(
        node=node,
        campaign=campaign,
        lines=lines,
        source_blocks=source_blocks,
        lineage=_lineage(node),
        parent=parent,
        best=best,
        diffs=diffs,
        latency=charts.latency_series(
            node.report_cases if isinstance(node.report_cases, list) else []
        ),
        gates=gates,
        cases=cases,
        baseline_names=baseline_names,
        siblings=_neighbours(node),
        threads=threads,
        timing_note=OLD_TIMING_NOTE if old_method and campaign.platform != "interpret" else "",
    )


def _source_blocks(source: str, lines: list[dict]) -> list[dict]:
    """`lines` cut after each line that has comments. The per-line table rows were ~10% of
    the candidate page's CPU (every line number localized four times); a run's rows depend only
    on the text and the range, so the page caches them under a key naming both, and the
    comments (which change) are rendered between runs on every view."""
    text = content_key("review-source-rows:1", source)
    blocks, start = [], 0
    for line in lines:
        if line["comments"] or line["no"] == len(lines):
            end = line["no"]
            blocks.append({"key": f"{text}:{start}-{end}", "lines": lines[start:end], "last": line})
            start = end
    return blocks


def _highlighted_lines(source: str) -> list:
    """Pygments is most of the candidate page's time: cached by the text it highlights."""
    key = content_key(f"review-lines:{pygments.__version__}", source)
    return cached(key, lambda: review.highlighted_lines(source), timeout=REVIEW_CACHE_S)


def _diff(slug: str, label: str, old: str, new: str, other: Node | None = None) -> dict:
    # `key` names the texts compared: the page caches the rendered table under it.
    key = content_key("review-diff:1", old, new)
    rows = cached(key, lambda: review.side_by_side(old, new), timeout=REVIEW_CACHE_S)
    return {
        "slug": slug,
        "label": label,
        "key": key,
        "rows": rows,
        "stats": review.diff_stats(rows),
        "other": other,
    }


def candidate_compare(*, campaign_id: int, left: str, right: str) -> dict:
    """Two candidates side by side: the diff and their per-case medians."""
    nodes = {
        n.key: n
        for n in Node.objects.filter(campaign_id=campaign_id, key__in=[left, right])
        .defer("report")
        .prefetch_related("measurements")
    }
    if left not in nodes or right not in nodes:
        raise Node.DoesNotExist(f"no candidate {left if left not in nodes else right}")
    a, b = nodes[left], nodes[right]
    cases = []
    b_by_case = {m.case: m for m in b.measurements.all()}
    for m in a.measurements.all():
        other = b_by_case.get(m.case)
        cases.append({"case": m.case, "left": m, "right": other})
    return {
        "left": a,
        "right": b,
        "diff": _diff("compare", f"{left} → {right}", a.source, b.source),
        "cases": cases,
    }  # noqa: E501


def node_comments(*, node: Node) -> QuerySet[Comment]:
    return node.comments.select_related("author", "resolved_by").order_by("created_at", "id")


def comment_threads(comments) -> list[Comment]:
    """Comments as threads: the comments without parent, oldest first, each with its replies
    (oldest first) in `thread_replies`."""
    comments = sorted(comments, key=lambda c: (c.created_at, c.pk))
    threads = [c for c in comments if c.parent_id is None]
    replies: dict = defaultdict(list)
    for c in comments:
        if c.parent_id is not None:
            replies[c.parent_id].append(c)
    for thread in threads:
        thread.thread_replies = replies.get(thread.pk, [])
    return threads


def node_comment_threads(*, node: Node) -> list[Comment]:
    return comment_threads(node_comments(node=node))


# Review decisions, the campaign's review list and the list of candidates to freeze.

# Sort keys of the review and freeze lists (the URL's `sort`; a leading "-" reverses).
CANDIDATE_SORTS = {
    "fitness": "fitness",
    "candidate": "id",
    "campaign": "campaign__name",
    "problem": "campaign__problem__name",
    "platform": "campaign__platform",
    "evaluated": "evaluated_at",
    "approvals": "approvals",
    "changes": "changes",
}
# What a review filter keeps: none decided yet, approved by someone and changes asked by nobody,
# changes asked by someone.
REVIEW_STATES = {
    "awaiting": Q(approvals=0, changes=0),
    "approved": Q(approvals__gt=0, changes=0),
    "changes": Q(changes__gt=0),
}
FREEZE_LIST_SIZE = 50
CANDIDATE_ROW_FIELDS = (
    "id",
    "key",
    "round",
    "generator",
    "status",
    "fitness",
    "fitness_ci_low",
    "fitness_ci_high",
    "evaluated_at",
    "campaign__id",
    "campaign__name",
    "campaign__platform",
    "campaign__best_node_id",
    "campaign__problem__id",
    "campaign__problem__name",
)


def _artifacts_live(node_ref) -> QuerySet:
    """Artifacts of the registry frozen from a node and not aborted. The registry builds on
    campaigns, so its model is reached through the reverse relation rather than imported."""
    artifact = Node._meta.get_field("artifacts").related_model
    return artifact.objects.filter(node=node_ref).exclude(stage="aborted")


def _review_counts() -> dict:
    return {
        "approvals": Count("reviews", filter=Q(reviews__decision="approved"), distinct=True),
        "changes": Count("reviews", filter=Q(reviews__decision="changes_requested"), distinct=True),
    }


def _sorted(qs: QuerySet, sort: str, default: str = "-fitness") -> QuerySet:
    """Order by a known sort key (unknown: `default`); absent values (an untimed candidate's
    fitness) go last either way, and the candidate's id breaks ties."""
    key = sort.lstrip("-")
    if key not in CANDIDATE_SORTS:
        sort, key = default, default.lstrip("-")
    field_ = F(CANDIDATE_SORTS[key])
    order = field_.desc(nulls_last=True) if sort.startswith("-") else field_.asc(nulls_last=True)
    return qs.order_by(order, "-id")


def _decisions_prefetch() -> Prefetch:
    return Prefetch(
        "reviews",
        queryset=NodeReview.objects.select_related("reviewer").order_by("-decided_at", "-id"),
        to_attr="review_rows",
    )


def node_review_decisions(*, node: Node) -> list[NodeReview]:
    """The reviews of a candidate, newest decision first (a plain "reviewed" mark last). One
    query: each review's node is the one asked about, so reading it costs none."""
    reviews = list(
        node.reviews.select_related("reviewer").order_by(
            F("decided_at").desc(nulls_last=True), "-id"
        )
    )
    for r in reviews:
        r.node = node
    return reviews


def node_frozen_artifact(*, node: Node) -> dict | None:
    """The newest live artifact frozen from this candidate (`id`, `stage`), or None."""
    return _artifacts_live(node.pk).order_by("-id").values("id", "stage").first()


def campaign_review_list(*, campaign: Campaign, review: str = "", sort: str = "") -> dict:
    """A campaign's accepted candidates with their reviewers' decisions, filtered by review
    state and sorted; `counts` has every state's size whatever the filter. `rows` is lazy:
    the page shows it in pages of `FREEZE_LIST_SIZE` (a 2,000-node campaign can have 800
    accepted candidates, ~1.4 s to render in one table). Three queries per page."""
    accepted = Node.objects.filter(campaign=campaign, status=NodeStatus.ACCEPTED).annotate(
        **_review_counts()
    )
    # Counted here: an aggregate over the per-node review counts would need a subquery per
    # state, and a pair per accepted candidate is cheap next to rendering its row.
    pairs = list(accepted.values_list("approvals", "changes"))
    counts = {
        "all": len(pairs),
        "awaiting": sum(1 for a, c in pairs if not a and not c),
        "approved": sum(1 for a, c in pairs if a and not c),
        "changes": sum(1 for _, c in pairs if c),
    }
    if review in REVIEW_STATES:
        accepted = accepted.filter(REVIEW_STATES[review])
    rows = (
        _sorted(accepted, sort)
        .only(*CANDIDATE_ROW_FIELDS[:9])
        .prefetch_related(_decisions_prefetch())
    )
    return {"rows": rows, "counts": counts}


def freeze_candidates(
    *, platform: str = "", problem: str = "", review: str = "", q: str = "", sort: str = ""
) -> QuerySet[Node]:
    """Accepted candidates no live artifact was frozen from yet, across campaigns, with their
    review counts and decisions; filtered and sorted (fitness, best first, by default)."""
    qs = (
        Node.objects.filter(status=NodeStatus.ACCEPTED)
        .exclude(Exists(_artifacts_live(OuterRef("pk"))))
        .annotate(**_review_counts())
        .select_related("campaign", "campaign__problem")
        .only(*CANDIDATE_ROW_FIELDS)
    )
    if platform:
        qs = qs.filter(campaign__platform=platform)
    if problem:
        qs = qs.filter(campaign__problem__name=problem)
    if review in REVIEW_STATES:
        qs = qs.filter(REVIEW_STATES[review])
    if q:
        qs = qs.filter(Q(campaign__name__icontains=q) | Q(key__iexact=q))
    return _sorted(qs, sort).prefetch_related(_decisions_prefetch())
