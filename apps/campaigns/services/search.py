"""The control side of a search: one step at a time, driven by Celery.

`campaign_step` advances a running campaign: it re-dispatches evaluations that no worker holds
any more, proposes the next round when the last one is fully recorded, and ends the campaign
with its outcome when the engine says stop. `evaluation_record` stores a report once (a
redelivered evaluation is ignored) and triggers the next step when the round is complete. The
engine state (workers.search) is JSON on the campaign; rows mirror it for pages and the API.

A campaign that ends early (cancelled, or failed by the watchdog) settles its unevaluated nodes
as `cancelled` (`campaign_nodes_settle`), and from then on its counts come from the node rows
alone; a result that still arrives for a cancelled node is kept on it as evidence and counts
only its device time (`evaluation_record`).
"""

import logging
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from apps.campaigns.constants import (
    EVALUATION_LEASE_S,
    UNSETTLED_NODE_STATUSES,
    CampaignStatus,
    NodeStatus,
    Outcome,
    eval_queue,
)
from apps.campaigns.models import Campaign, Edge, Node
from apps.campaigns.services.evaluations import node_record_late_report, node_record_report
from apps.campaigns.services.events import campaign_changed, node_changed, nodes_created
from apps.campaigns.services.schedule import campaign_step_send
from workers.fingerprint import harness_hash
from workers.search.engine import _GATE_TO_STAGE, FUNNEL_STAGES, SearchEngine, baseline_request
from workers.search.engine import funnel as engine_funnel
from workers.search.graph import Graph

logger = logging.getLogger(__name__)


def _engine(campaign: Campaign) -> SearchEngine:
    from apps.knowledge.selectors.retrieval import knowledge_retriever

    # Bound to the owner: restricted entries reach only prompts of campaigns whose owner may
    # see them. The baseline's fingerprint (cuda) lets retrieval warn about stale entries.
    baseline = campaign.engine_state.get("baseline") or {}
    retrieve = knowledge_retriever(
        user=campaign.created_by,
        fingerprint=baseline.get("fingerprint") if isinstance(baseline, dict) else None,
        platform=campaign.platform,
    )
    # Reports live on the node rows; the state saved after each evaluation keeps only what the
    # search reads (a 2,000-node campaign's state would otherwise be ~90 MB).
    return SearchEngine.from_state(campaign.engine_state, retrieve=retrieve, keep_reports=False)


def _materialise(campaign: Campaign, graph: Graph) -> list[Node]:
    """Create rows (and edges) for graph nodes the database does not have yet."""
    existing = {n.key: n for n in campaign.nodes.only("id", "key")}
    created = []
    for gnode in graph.nodes.values():
        if gnode.id in existing:
            continue
        row = Node.objects.create(
            campaign=campaign,
            key=gnode.id,
            round=gnode.round,
            generator=gnode.generator,
            params=gnode.params,
            source=gnode.source,
            retrieved_knowledge=gnode.knowledge_ids,
        )
        existing[gnode.id] = row
        created.append(row)
        parents = [existing[p] for p in gnode.parent_ids] or [None]
        Edge.objects.bulk_create(
            Edge(campaign=campaign, parent=parent, child=row, kind=gnode.edge) for parent in parents
        )
    nodes_created(campaign, created)
    return created


def _dispatch(campaign: Campaign, engine: SearchEngine, nodes: list[Node]) -> None:
    """Send evaluations to the platform's queue (after commit). Keyed for idempotency."""
    from celery.utils import uuid

    from workers.celery_tasks import evaluate_candidate

    queue = eval_queue(campaign.platform)
    harness = harness_hash()
    now = timezone.now()
    jobs = []
    graph = engine.graph(campaign.engine_state)
    for node in nodes:
        request = engine.request_kwargs(campaign.engine_state, node.key, graph)
        node.status = NodeStatus.EVALUATING
        node.dispatched_at = now
        node.dispatch_count += 1
        # One key per dispatch: a report of an earlier dispatch of this node is stale.
        node.evaluation_key = f"{node.pk}:{node.dispatch_count}:{campaign.platform}:{harness}"
        node.task_id = uuid()
        jobs.append((node, request))
        node.save(
            update_fields=["evaluation_key", "status", "dispatched_at", "dispatch_count", "task_id"]
        )

    def send():
        for node, request in jobs:
            evaluate_candidate.apply_async(
                args=[node.pk, node.evaluation_key, request], queue=queue, task_id=node.task_id
            )

    transaction.on_commit(send)


def _held_task_ids() -> set[str] | None:
    """Ids of tasks some worker is running or holds; None when no worker answered."""
    from kernelevolve_site.celery import app

    inspect = app.control.inspect(timeout=1.0)
    held: set[str] = set()
    answered = False
    for listing in (inspect.active(), inspect.reserved()):
        if listing is None:
            continue
        answered = True
        for tasks in listing.values():
            held.update(task["id"] for task in tasks)
    return held if answered else None


def _queued_task_ids(queue: str) -> set[str]:
    """Ids of tasks still waiting in a queue of the Redis broker (not yet taken by a worker)."""
    import json

    import redis
    from django.conf import settings

    client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    ids = set()
    # kombu keeps one list per priority step: the queue name, then name + sep + priority.
    names = [queue] + [f"{queue}\x06\x16{p}" for p in range(1, 10)]
    for name in names:
        for raw in client.lrange(name, 0, -1):
            try:
                ids.add(json.loads(raw)["headers"]["id"])
            except (ValueError, KeyError, TypeError):
                continue
    return ids


def _redispatch_orphans(campaign: Campaign, engine: SearchEngine) -> int:
    """Evaluations that no live worker holds and the queue no longer has are sent again.

    That is a worker killed mid-evaluation (its message sits unacknowledged until the
    visibility timeout) or a message lost with the broker. Evaluations are idempotent.
    """
    stale_before = timezone.now() - timedelta(seconds=EVALUATION_LEASE_S)
    stale = list(
        campaign.nodes.filter(status=NodeStatus.EVALUATING, dispatched_at__lt=stale_before)
    )
    if not stale:
        return 0
    waiting = _queued_task_ids(eval_queue(campaign.platform))
    stale = [n for n in stale if n.task_id not in waiting]
    if not stale:
        return 0
    held = _held_task_ids() or set()
    orphans = [n for n in stale if n.task_id not in held]
    if orphans:
        logger.warning(
            "campaign %s: re-dispatching %d orphaned evaluations", campaign.pk, len(orphans)
        )
        _dispatch(campaign, engine, orphans)
    return len(orphans)


def _finish(campaign: Campaign, state: dict) -> None:
    campaign.status = (
        CampaignStatus.FAILED if state["outcome"] == Outcome.FAILED else CampaignStatus.COMPLETED
    )
    campaign.outcome = state["outcome"]
    campaign.outcome_reason = state["message"]
    campaign.finished_at = timezone.now()
    campaign.watchdog_at = None
    from apps.knowledge.services.findings import knowledge_campaign_finished

    # After commit, in its own transactions: findings become drafts; a knowledge error is
    # logged there and never undoes or breaks the campaign's end.
    campaign_id = campaign.pk
    transaction.on_commit(lambda: knowledge_campaign_finished(campaign_id=campaign_id), robust=True)


def _refresh_counters(campaign: Campaign, state: dict) -> None:
    campaign.funnel = engine_funnel(state)
    campaign.candidates_evaluated = campaign.funnel["generated"] - campaign.funnel["pending"]
    campaign.device_seconds = campaign.funnel["device_s_total"]
    best_key = state.get("best_id")
    campaign.best_node = campaign.nodes.filter(key=best_key).first() if best_key else None
    campaign.best_fitness = campaign.best_node.fitness if campaign.best_node else None


def campaign_nodes_settle(*, campaign: Campaign, reason: str) -> list[str]:
    """Mark every node not evaluated yet `cancelled` (with `reason`) and recount the campaign
    from its rows; returns the task ids to revoke after commit. The caller holds the campaign's
    row lock and saves the campaign."""
    unsettled = list(
        campaign.nodes.filter(status__in=UNSETTLED_NODE_STATUSES).defer("source", "report")
    )
    campaign.nodes.filter(pk__in=[n.pk for n in unsettled]).update(
        status=NodeStatus.CANCELLED, reason=reason
    )
    for node in unsettled:
        node.status, node.reason = NodeStatus.CANCELLED, reason
        node_changed(node)
    campaign_counters_from_rows(campaign=campaign)
    return [n.task_id for n in unsettled if n.task_id]


def campaign_counters_from_rows(*, campaign: Campaign) -> None:
    """The funnel, evaluated count and device-seconds of a campaign that ended early, counted
    from its node rows (one query), so the page's numbers and the outcome agree with the rows.
    The best is left as it was: nothing after the end changes it."""
    counts = dict.fromkeys((*FUNNEL_STAGES, "cancelled"), 0)
    device_s = 0.0
    for status, failed_gate, node_device_s in campaign.nodes.values_list(
        "status", "failed_gate", "device_seconds"
    ):
        counts["generated"] += 1
        device_s += node_device_s or 0.0
        if status in UNSETTLED_NODE_STATUSES:
            counts["pending"] += 1
        elif status in (NodeStatus.ACCEPTED, NodeStatus.CANCELLED):
            counts[status] += 1
        else:
            counts[_GATE_TO_STAGE.get(failed_gate, "errored")] += 1
    funnel = dict(campaign.funnel or {})
    device_total = device_s + float(funnel.get("baseline_device_s") or 0.0)
    funnel.update(counts)
    funnel["device_s_total"] = device_total
    funnel["device_s_per_accepted"] = (
        device_total / counts["accepted"] if counts["accepted"] else None
    )
    campaign.funnel = funnel
    campaign.candidates_evaluated = counts["generated"] - counts["pending"] - counts["cancelled"]
    campaign.device_seconds = device_total


@transaction.atomic
def campaign_step(*, campaign_id: int, watchdog: bool = False) -> str:
    """Advance a running campaign by one step; returns what it did (for logs and tests)."""
    campaign = Campaign.objects.select_for_update().select_related("problem").get(pk=campaign_id)
    if campaign.status != CampaignStatus.RUNNING:
        return f"not running ({campaign.status})"
    if watchdog:
        campaign.watchdog_at = None
    state = campaign.engine_state
    engine = _engine(campaign)

    if campaign.platform != "interpret" and state.get("baseline") is None:
        # A warm-start seed is in the graph before the baseline: its row (pending) shows on the
        # graph and the table while the funnel counts it.
        _materialise(campaign, engine.graph(state))
        action = _ensure_baseline(campaign, state)
    else:
        graph = engine.graph(state)
        _materialise(campaign, graph)
        _dispatch(campaign, engine, list(campaign.nodes.filter(status=NodeStatus.PENDING)))
        if graph.pending():
            redone = _redispatch_orphans(campaign, engine)
            action = f"waiting for {len(graph.pending())} evaluations ({redone} re-dispatched)"
        elif engine.should_stop(state):
            _finish(campaign, state)
            action = f"finished: {state['outcome']}"
        else:
            engine.propose(state)
            graph = engine.graph(state)
            if not graph.pending():
                engine.should_stop(state, no_proposals=True)
                _finish(campaign, state)
                action = f"finished: {state['outcome']} (no proposals)"
            else:
                created = _materialise(campaign, graph)
                _dispatch(campaign, engine, created)
                action = f"round {state['round']}: dispatched {len(created)} candidates"
    campaign.engine_state = state
    _refresh_counters(campaign, state)
    _schedule_watchdog(campaign)
    # A committed step is the control side's heartbeat (apps.campaigns.services.watchdog).
    campaign.heartbeat_at = timezone.now()
    campaign.stall_restarts = 0
    campaign.step_error = ""
    campaign.save()
    campaign_changed(campaign)
    return action


def _schedule_watchdog(campaign: Campaign) -> None:
    """One pending watchdog step per running campaign, so re-dispatch happens without events."""
    if campaign.status != CampaignStatus.RUNNING:
        return
    now = timezone.now()
    if campaign.watchdog_at and campaign.watchdog_at > now:
        return
    campaign.watchdog_at = now + timedelta(seconds=EVALUATION_LEASE_S)
    campaign_id = campaign.pk
    transaction.on_commit(
        lambda: campaign_step_send(campaign_id, watchdog=True, countdown=EVALUATION_LEASE_S)
    )


def _ensure_baseline(campaign: Campaign, state: dict) -> str:
    from workers.celery_tasks import baseline_problem

    requested = state.get("baseline_requested_at")
    if requested and timezone.now().timestamp() - requested < 3 * EVALUATION_LEASE_S:
        return "waiting for the baseline"
    state["baseline_requested_at"] = timezone.now().timestamp()
    request = baseline_request(state)
    queue = eval_queue(campaign.platform)
    transaction.on_commit(
        lambda: baseline_problem.apply_async(args=[campaign.pk, request], queue=queue)
    )
    return "baseline requested"


@transaction.atomic
def baseline_record(*, campaign_id: int, report: dict) -> bool:
    campaign = Campaign.objects.select_for_update().get(pk=campaign_id)
    state = campaign.engine_state
    if state.get("baseline") is not None:
        return False
    times = {c["name"]: c.get("timings") or {} for c in report.get("cases") or []}
    _engine(campaign).record_baseline(state, report, times)
    campaign.engine_state = state
    campaign.save(update_fields=["engine_state"])
    transaction.on_commit(lambda: campaign_step_send(campaign_id))
    return True


@transaction.atomic
def evaluation_record(*, node_id: int, evaluation_key: str, report: dict) -> bool:
    """Record one evaluation; False for a duplicate (redelivered) or superseded report."""
    node = Node.objects.defer("source", "report").get(pk=node_id)
    campaign = Campaign.objects.select_for_update().get(pk=node.campaign_id)
    if Node.objects.filter(pk=node_id, status=NodeStatus.CANCELLED).exists():
        # Settled by cancel: kept as evidence; only its device time reaches the campaign.
        if not node_record_late_report(node=node, report=report):
            return False
        campaign_counters_from_rows(campaign=campaign)
        campaign.save(update_fields=["funnel", "candidates_evaluated", "device_seconds"])
        node.refresh_from_db()
        node_changed(node)
        campaign_changed(campaign)
        return True
    if evaluation_key != node.evaluation_key:
        # Superseded: the node was dispatched again (watchdog, restart) after this evaluation
        # started, or the key is not one this campaign gave out. The current dispatch decides.
        logger.warning(
            "refused a stale report for node %s (key %r, current %r)",
            node_id,
            evaluation_key,
            node.evaluation_key,
        )
        return False
    if not node_record_report(node=node, report=report):
        return False
    state = campaign.engine_state
    engine = _engine(campaign)
    engine.record(state, node.key, report)
    campaign.engine_state = state
    _refresh_counters(campaign, state)
    campaign.save()
    node.refresh_from_db()
    node_changed(node)
    campaign_changed(campaign)
    if not engine.graph(state).pending() and campaign.status == CampaignStatus.RUNNING:
        transaction.on_commit(lambda: campaign_step_send(campaign.pk))
    return True


def campaigns_resume_all() -> list[int]:
    """After a restart: step every running campaign (orphaned evaluations get re-dispatched)."""
    ids = list(Campaign.objects.filter(status=CampaignStatus.RUNNING).values_list("pk", flat=True))
    Campaign.objects.filter(pk__in=ids).update(watchdog_at=None)
    for campaign_id in ids:
        campaign_step_send(campaign_id)
    return ids
