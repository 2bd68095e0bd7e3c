"""Reads of campaigns: the list with its filters and sorts, one campaign, its charts, why its queue
has no worker, why its best is that candidate, the portfolio, the export and the problems.

Each selector runs a fixed number of queries whatever the size of the campaign (the tests assert
it), and returns plain rows where a page or the API only needs a few columns.
"""

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, Prefetch, Q, QuerySet, Sum
from django.utils import timezone

from apps.campaigns import charts
from apps.campaigns.constants import (
    EVAL_WORKER_WHERE,
    FINISHED_STATUSES,
    QUEUE_WATCH_GRACE_S,
    QUEUE_WATCH_STALE_S,
    CampaignStatus,
    NodeStatus,
    Outcome,
    eval_queue,
    eval_worker_command,
)
from apps.campaigns.models import Campaign, Edge, EvalQueueWatch, Measurement, Node, Problem

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
    workers/search/recording.py `_update_best`) and the numbers of the strongest other accepted
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
