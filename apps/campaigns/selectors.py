"""Reads for campaigns: lists with filters, the graph in pages, candidate review, inbox, portfolio.

Each selector runs a fixed number of queries whatever the size of the campaign (the tests assert
it), and returns plain rows where a page or the API only needs a few columns.
"""

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime

import pygments
from django.contrib.auth import get_user_model
from django.db.models import Count, Exists, F, OuterRef, Prefetch, Q, QuerySet, Sum
from django.db.models.fields.json import KeyTransform
from django.urls import reverse
from django.utils import timezone

from apps.campaigns import charts, review
from apps.campaigns.constants import (
    EVAL_WORKER_WHERE,
    FINISHED_STATUSES,
    QUEUE_WATCH_GRACE_S,
    QUEUE_WATCH_STALE_S,
    REVIEW_CACHE_S,
    CampaignStatus,
    NodeStatus,
    Outcome,
    eval_queue,
    eval_worker_command,
)
from apps.campaigns.models import (
    Campaign,
    Comment,
    Edge,
    EvalQueueWatch,
    Measurement,
    Mention,
    Node,
    NodeReview,
    Problem,
)
from apps.campaigns.text import scaled_text
from kernelevolve_site.caching import cached, content_key

# Sort keys the list accepts (the URL's `sort`; a leading "-" reverses).
CAMPAIGN_SORTS = {
    "created": "created_at",
    "name": "name",
    "problem": "problem__name",
    "status": "status",
    "best": "best_fitness",
    "evaluated": "candidates_evaluated",
    "device": "device_seconds",
}
CAMPAIGN_FILTERS = ("status", "platform", "outcome", "problem")
GRAPH_PAGE_SIZE = 1000
NODE_FIELDS = ("id", "key", "round", "status", "failed_gate", "fitness", "generator")


def campaigns_for_reading() -> QuerySet[Campaign]:
    """Campaign rows without the engine state: pages and the API never read it. It no longer
    holds the graph (a few kB of scalars), but a cuda campaign's also keeps the baseline's
    report and timings, tens of kB that a list of campaigns would parse for nothing."""
    return Campaign.objects.defer("engine_state")


# Columns of the related rows a campaign list, page or API answer never reads: the best node's
# report is ~150 kB of JSON (every gate's evidence), so a list of 25 campaigns parsed megabytes.
CAMPAIGN_RELATED_DEFERRED = (
    "best_node__report",
    "best_node__source",
    "problem__source",
    "problem__workload",
    "problem__smoke_workload",
)


def campaign_list() -> QuerySet[Campaign]:
    return (
        campaigns_for_reading()
        .select_related("problem", "created_by", "best_node")
        .defer(*CAMPAIGN_RELATED_DEFERRED)
        .order_by("-created_at")
    )


def campaign_search(
    *,
    status: str = "",
    platform: str = "",
    outcome: str = "",
    problem: str = "",
    q: str = "",
    sort: str = "-created",
) -> QuerySet[Campaign]:
    """Campaigns filtered by the list's query parameters; unknown sort keys fall back to newest."""
    qs = campaign_list()
    if status:
        qs = qs.filter(status=status)
    if platform:
        qs = qs.filter(platform=platform)
    if outcome:
        qs = qs.filter(outcome="" if outcome == "none" else outcome)
    if problem:
        qs = qs.filter(problem__name=problem)
    if q:
        qs = qs.filter(
            Q(name__icontains=q) | Q(problem__name__icontains=q) | Q(problem__family__icontains=q)
        )
    key = sort.lstrip("-")
    if key in CAMPAIGN_SORTS:
        order = CAMPAIGN_SORTS[key]
        qs = qs.order_by(f"-{order}" if sort.startswith("-") else order, "-id")
    return qs


def campaign_get(*, pk: int) -> Campaign:
    return campaign_list().get(pk=pk)


NODE_TABLE_SIZE = 50


def campaign_nodes_with_parents(*, campaign: Campaign) -> QuerySet[Node]:
    """The nodes with their in-edges and each edge's parent key (not the parent's report)."""
    edges = Edge.objects.select_related("parent").only(
        "id", "kind", "child_id", "parent", "parent__key"
    )
    return campaign_nodes(campaign=campaign).prefetch_related(Prefetch("in_edges", queryset=edges))


def campaign_nodes(*, campaign: Campaign) -> QuerySet[Node]:
    return campaign.nodes.defer("source", "report").order_by("id")


def campaign_node_table(*, campaign: Campaign, limit: int = NODE_TABLE_SIZE) -> dict:
    """The newest `limit` candidates in id order (new ones are appended live), and the total."""
    total = campaign.nodes.count()
    rows = list(campaign_nodes(campaign=campaign).order_by("-id")[:limit])
    rows.reverse()
    return {"nodes": rows, "total": total, "shown": len(rows)}


def campaign_graph_page(*, campaign: Campaign, after: int = 0, limit: int | None = None) -> dict:
    """One page of the search graph (nodes with id > `after`) as a Plotly figure, plus the cursor.

    The layout is computed over the whole graph and only the drawing is paged, so every page is
    drawn in the same frame and carries its parents' coordinates (the page's graph and the API
    give the same coordinates whatever the page size). One query: every node of the campaign
    with its in-edges, a few columns each. `campaign` needs its `best_node_id`.
    """
    rows = campaign_nodes(campaign=campaign).values(
        *NODE_FIELDS, "in_edges__parent", "in_edges__kind"
    )
    return charts.graph_page(
        rows=rows,
        after=after,
        limit=limit or GRAPH_PAGE_SIZE,
        node_url=reverse("campaigns:node", args=[campaign.pk, "KEY"]).replace("KEY", "{key}"),
        revision=f"campaign-{campaign.pk}",
        best_id=campaign.best_node_id,
    )


def campaign_fitness_points(*, campaign: Campaign) -> list[dict]:
    """Evaluated nodes in evaluation order: key, fitness and its CI (one query)."""
    return [
        {"key": k, "fitness": f, "ci_low": lo, "ci_high": hi}
        for k, f, lo, hi in campaign.nodes.exclude(evaluated_at=None)
        .order_by("evaluated_at", "id")
        .values_list("key", "fitness", "fitness_ci_low", "fitness_ci_high")
    ]


def campaign_charts(*, campaign: Campaign) -> dict:
    """The campaign's charts (None where data is missing) and what each empty one lacks."""
    funnel = campaign.funnel or {}
    fitness = charts.fitness_over_time_figure(
        points=campaign_fitness_points(campaign=campaign), baseline=campaign.baseline
    )
    timed = campaign.platform != "interpret"
    return {
        "funnel": charts.funnel_figure(funnel),
        "funnel_empty": "No candidate has been generated yet.",
        "fitness": fitness,
        "fitness_empty": (
            "No timings: the interpret platform runs the Triton interpreter on the CPU and has no "
            "performance gate, so candidates are checked for correctness only."
            if not timed
            else "No candidate has been timed yet."
        ),
        "device": charts.device_seconds_figure(funnel),
        "device_empty": (
            "No device time: interpret evaluations run on the CPU."
            if not timed
            else "No device time spent yet."
        ),
    }


@dataclass(frozen=True)
class WorkerNotice:
    """No worker serves a running campaign's evaluation queue: since when, and what to start."""

    queue: str
    # The last time a worker was seen on it, or (seen_before False) when checks began to find
    # none.
    since: datetime
    seen_before: bool
    checked_at: datetime
    where: str
    command: str


def campaign_worker_notice(
    *, campaign: Campaign, now: datetime | None = None
) -> WorkerNotice | None:
    """Why a running campaign does not advance when its queue has no worker (None otherwise, and
    when no control worker has checked the queues lately: then nothing is known)."""
    if campaign.status != CampaignStatus.RUNNING:
        return None
    queue = eval_queue(campaign.platform)
    watch = EvalQueueWatch.objects.filter(queue=queue).first()
    now = now or timezone.now()
    if (
        watch is None
        or watch.workers
        or (now - watch.checked_at).total_seconds() > QUEUE_WATCH_STALE_S
    ):
        return None
    if watch.last_seen_at and (now - watch.last_seen_at).total_seconds() < QUEUE_WATCH_GRACE_S:
        return None  # a busy worker may miss one answer
    return WorkerNotice(
        queue=queue,
        since=watch.last_seen_at or watch.unserved_since or watch.checked_at,
        seen_before=watch.last_seen_at is not None,
        checked_at=watch.checked_at,
        where=EVAL_WORKER_WHERE.get(campaign.platform, "on a host for this platform"),
        command=eval_worker_command(queue),
    )


BEST_CONTENDERS_SHOWN = 3


@dataclass(frozen=True)
class BestContender:
    key: str
    fitness: float | None
    ci_low: float | None
    ci_high: float | None
    # Why it is not the best (empty for the best itself), with the numbers compared.
    why: str = ""


@dataclass(frozen=True)
class BestRule:
    """Why the campaign's best is that candidate: the rule that picks it (the search engine's,
    workers/search/engine.py `_update_best`) and the numbers of the strongest other accepted
    candidates it was applied to."""

    rule: str
    best: BestContender
    contenders: list[BestContender]
    # False when replaying the rule over the rows does not give the recorded best (rows from
    # before the rule, or results recorded in another order): then only the rule is stated.
    replayed: bool = True
    # The candidate asked `about` (when accepted and not the best), with its own reason.
    subject: BestContender | None = None


def _x(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}×"


def campaign_best_rule(*, campaign: Campaign, about: str | None = None) -> BestRule | None:
    """The rule that named the campaign's best, replayed over its accepted candidates in the
    order their results were recorded: the first accepted candidate is the best; a later one
    replaces it only when the lower bound of its 95% CI is above the best's speedup. A candidate
    whose interval reaches down to the best's speedup (the two overlap there) does not replace
    it, whatever its own point estimate, and an exact tie keeps the earlier one. Without timing
    (the interpreter) the first correct candidate stays the best. `about` names a candidate
    whose reason is wanted too (the candidate page)."""
    if campaign.best_node_id is None:
        return None
    rows = Node.objects.filter(campaign=campaign, status=NodeStatus.ACCEPTED)
    accepted = list(
        rows.order_by("evaluated_at", "id").values_list(
            "id", "key", "fitness", "fitness_ci_low", "fitness_ci_high"
        )
    )
    nodes = {pk: BestContender(key, fit, low, high) for pk, key, fit, low, high in accepted}
    best_id, compared_with, replaced_by = None, {}, {}
    for pk, _key, fit, low, _high in accepted:
        if best_id is None:
            best_id = pk
            continue
        incumbent = nodes[best_id]
        if fit is None or incumbent.fitness is None:
            compared_with[pk] = best_id
        elif (low or 0.0) > incumbent.fitness:
            replaced_by[best_id] = pk
            best_id = pk
        else:
            compared_with[pk] = best_id
    timed = any(c.fitness is not None for c in nodes.values())
    if timed:
        rule = (
            "The first accepted candidate is the best; a later accepted one replaces it only "
            "when the lower bound of its 95% CI is above the best's speedup. A candidate whose "
            "interval reaches down to the best's speedup (they overlap) does not replace it, "
            "even with a higher point estimate; an exact tie keeps the earlier one."
        )
    else:
        rule = (
            f"No timing on {campaign.platform}: accepted means correct, so the first correct "
            "candidate stays the best and later ones are not compared."
        )
    best = nodes.get(campaign.best_node_id)
    if best is None or best_id != campaign.best_node_id:
        fallback = BestContender(
            campaign.best_node.key if campaign.best_node else "",
            campaign.best_fitness,
            None,
            None,
        )
        return BestRule(rule=rule, best=best or fallback, contenders=[], replayed=False)

    def explained(pk: int) -> BestContender:
        node = nodes[pk]
        if pk in replaced_by:
            winner = nodes[replaced_by[pk]]
            why = (
                f"was the best until {winner.key}: its CI lower bound {_x(winner.ci_low)} is "
                f"above {node.key}'s {_x(node.fitness)}"
            )
        elif not timed or node.fitness is None:
            why = f"correct too, but recorded after {nodes[compared_with[pk]].key}"
        else:
            then = nodes[compared_with[pk]]
            label = f"{then.key}'s" if then.key == best.key else f"{then.key}'s (the best then)"
            why = f"its CI lower bound {_x(node.ci_low)} is not above {label} {_x(then.fitness)}"
        return BestContender(node.key, node.fitness, node.ci_low, node.ci_high, why=why)

    others = [pk for pk in nodes if pk != best_id]
    if timed:
        others.sort(key=lambda pk: -(nodes[pk].fitness or 0.0))
    by_key = {node.key: pk for pk, node in nodes.items()}
    subject = by_key.get(about) if about else None
    return BestRule(
        rule=rule,
        best=best,
        contenders=[explained(pk) for pk in others[:BEST_CONTENDERS_SHOWN]],
        subject=explained(subject) if subject is not None and subject != best_id else None,
    )


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
    baseline_names = sorted({b for m in measurements for b in (m.baselines or {})})
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


def inbox_for(*, user) -> dict:
    """What awaits this user: accepted best candidates of finished campaigns they have not
    reviewed, unread comments that mention them, promotions they may approve, open alarms."""
    reviewed = NodeReview.objects.filter(node=OuterRef("best_node"), reviewer=user)
    to_review = (
        Campaign.objects.filter(
            status__in=FINISHED_STATUSES,
            best_node__status=NodeStatus.ACCEPTED,
        )
        .exclude(Exists(reviewed))
        .select_related("problem", "best_node", "created_by")
        .defer("engine_state", "workload", *CAMPAIGN_RELATED_DEFERRED)
        .order_by("-finished_at")[:100]
    )
    mentions = (
        Mention.objects.filter(user=user, read_at=None)
        .select_related("comment__author", "comment__node", "comment__node__campaign")
        .defer(
            "comment__node__source",
            "comment__node__report",
            "comment__node__campaign__engine_state",
        )
        .order_by("-comment__created_at")[:100]
    )
    from apps.registry.selectors.registry import alarm_open_list, approvals_awaiting

    alarms = alarm_open_list()[:50] if user.has_perm("accounts.approve_promotion") else []
    return {
        "to_review": list(to_review),
        "mentions": list(mentions),
        "to_approve": list(approvals_awaiting(user=user)),
        "alarms": list(alarms),
    }


def portfolio() -> list[dict]:
    """Per operator family and platform: campaigns, outcomes, funnel, device-hours, cost.

    One aggregate query over campaigns plus one over accepted-node counts.
    """
    rows = (
        Campaign.objects.values("problem__family", "platform")
        .annotate(
            campaigns=Count("id"),
            improved=Count("id", filter=Q(outcome=Outcome.IMPROVED)),
            no_safe_improvement=Count("id", filter=Q(outcome=Outcome.NO_SAFE_IMPROVEMENT)),
            running=Count("id", filter=~Q(status__in=FINISHED_STATUSES)),
            device_seconds=Sum("device_seconds"),
            evaluated=Sum("candidates_evaluated"),
        )
        .order_by("problem__family", "platform")
    )
    funnel_keys = (
        "generated",
        "static_rejected",
        "compile_failed",
        "incorrect",
        "slower",
        "accepted",
    )
    funnels: dict = defaultdict(lambda: dict.fromkeys(funnel_keys, 0))
    for family, platform, funnel in Campaign.objects.values_list(
        "problem__family", "platform", "funnel"
    ):
        for k in funnel_keys:
            funnels[(family, platform)][k] += int((funnel or {}).get(k) or 0)
    out = []
    for r in rows:
        key = (r["problem__family"], r["platform"])
        device = float(r["device_seconds"] or 0.0)
        improved = r["improved"]
        out.append(
            {
                "family": r["problem__family"] or "",
                "platform": r["platform"],
                "campaigns": r["campaigns"],
                "improved": improved,
                "no_safe_improvement": r["no_safe_improvement"],
                "running": r["running"],
                "evaluated": r["evaluated"] or 0,
                "device_hours": device / 3600.0,
                "device_seconds_per_improvement": device / improved if improved else None,
                "funnel": funnels[key],
            }
        )
    return out


def campaign_export_rows(*, campaign: Campaign) -> list[dict]:
    """One row per (node, case) for CSV/JSON export; nodes without cases get one row."""
    nodes = list(
        campaign.nodes.order_by("id")
        .defer("source", "report")
        .prefetch_related(
            Prefetch("measurements", queryset=Measurement.objects.defer("samples_ms", "baselines")),
            Prefetch(
                "in_edges",
                queryset=Edge.objects.select_related("parent").only(
                    "kind", "child_id", "parent__key"
                ),
            ),  # noqa: E501
        )
    )
    rows = []
    for n in nodes:
        edge = next(iter(n.in_edges.all()), None)
        base = {
            "node": n.key,
            "round": n.round,
            "generator": n.generator,
            "edge": edge.kind if edge else "",
            "parent": edge.parent.key if edge and edge.parent else "",
            "status": n.status,
            "failed_gate": n.failed_gate,
            "fitness": n.fitness,
            "fitness_ci_low": n.fitness_ci_low,
            "fitness_ci_high": n.fitness_ci_high,
            "device_seconds": n.device_seconds,
            "wall_seconds": n.wall_seconds,
        }
        measurements = list(n.measurements.all())
        if not measurements:
            rows.append({**base, "case": "", "case_kind": "", "weight": None, "case_status": "",
                         "max_abs_err": None, "max_rel_err": None, "median_ms": None,
                         "ci_low_ms": None, "ci_high_ms": None})  # fmt: skip
        for m in measurements:
            rows.append({**base, "case": m.case, "case_kind": m.kind, "weight": m.weight,
                         "case_status": m.status, "max_abs_err": m.max_abs_err,
                         "max_rel_err": m.max_rel_err, "median_ms": m.median_ms,
                         "ci_low_ms": m.ci_low_ms, "ci_high_ms": m.ci_high_ms})  # fmt: skip
    return rows


def problem_list() -> QuerySet[Problem]:
    return Problem.objects.order_by("name")


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
    state and sorted; `counts` has every state's size whatever the filter. Three queries."""
    accepted = Node.objects.filter(campaign=campaign, status=NodeStatus.ACCEPTED).annotate(
        **_review_counts()
    )
    # Counted here: an aggregate over the per-node review counts would need a subquery per
    # state, and a campaign has at most a few hundred accepted candidates.
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
    return {"rows": list(rows), "counts": counts}


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


def inbox_unread_count(*, user) -> int:
    """How many comments mention this user that they have not read (the inbox's badge)."""
    if not (user and user.is_authenticated):
        return 0
    return Mention.objects.filter(user=user, read_at=None).count()


MENTION_SUGGESTIONS = 8


def mention_suggestions(*, prefix: str, limit: int = MENTION_SUGGESTIONS) -> list[dict]:
    """Active users whose username starts with `prefix` (any case), for @-autocomplete."""
    prefix = (prefix or "").strip().lstrip("@")
    if not prefix:
        return []
    users = (
        get_user_model()
        .objects.filter(is_active=True, username__istartswith=prefix)
        .order_by("username")
        .values("username", "first_name", "last_name")[:limit]
    )
    return [
        {"username": u["username"], "name": f"{u['first_name']} {u['last_name']}".strip()}
        for u in users
    ]
