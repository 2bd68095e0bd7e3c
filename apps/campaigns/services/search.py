"""The control side of a search: one step at a time, driven by Celery.

`campaign_step` advances a running campaign as the engine's rule says (`SearchEngine.step`): it
re-dispatches evaluations that no worker holds any more (the broker and the workers are asked
before the campaign's row lock is taken, never under it), proposes the next round when the last
one is fully recorded, and ends the campaign with its outcome when the engine says stop.
`evaluation_record` stores a report once (a redelivered evaluation is ignored) and triggers the
next step when the round is complete.

The search graph is the campaign's Node and Edge rows, which the engine reads and writes through
`RowGraphStore`; `Campaign.engine_state` keeps only the search's scalars (round, next id, best,
saturation counters, the outcome) and the baseline's measurement once (without its raw
samples), so a step saves a few kB whatever the graph's size. The funnel and counters on the
campaign row are counted from the rows.

A campaign that ends early (cancelled, or failed by the watchdog) settles its unevaluated nodes
as `cancelled` (`campaign_nodes_settle`), and from then on its counts come from the node rows
alone; a result that still arrives for a cancelled node is kept on it as evidence and counts
only its device time (`evaluation_record`).
"""

import logging
from dataclasses import dataclass
from datetime import timedelta

from celery import current_app
from django.db import transaction
from django.db.models import Count, Sum
from django.utils import timezone

from apps.campaigns import hooks
from apps.campaigns.constants import (
    EVALUATION_LEASE_S,
    UNSETTLED_NODE_STATUSES,
    CampaignStatus,
    NodeStatus,
    Outcome,
    eval_queue,
)
from apps.campaigns.graph_store import RowGraphStore
from apps.campaigns.models import Campaign, GateResult, Node
from apps.campaigns.services.evaluations import node_record_evidence, node_record_late_report
from apps.campaigns.services.events import campaign_changed, node_changed, nodes_created
from apps.campaigns.services.schedule import campaign_step_send
from workers.contract.tasks import BASELINE_TASK, EVALUATE_TASK
from workers.fingerprint import harness_hash
from workers.search.engine import (
    FUNNEL_STAGES,
    GATE_TO_STAGE,
    STEP_BASELINE,
    STEP_FINISHED,
    STEP_WAIT,
    SearchEngine,
    baseline_request,
    evaluation_request,
)
from workers.search.tuning import TUNE_TIMEOUT_S, tune_request

logger = logging.getLogger(__name__)


def _engine(campaign: Campaign) -> SearchEngine:
    """The campaign's engine over its rows (`engine.store`: the campaign's RowGraphStore)."""
    # Bound to the owner: restricted entries reach only prompts of campaigns whose owner may
    # see them. The baseline's fingerprint (cuda) lets retrieval warn about stale entries.
    # The retriever is the knowledge app's, handed over when it starts (apps.campaigns.hooks).
    baseline = campaign.engine_state.get("baseline") or {}
    retrieve = hooks.retriever_for(
        user=campaign.created_by,
        fingerprint=baseline.get("fingerprint") if isinstance(baseline, dict) else None,
        platform=campaign.platform,
    )
    # Reports live on the node rows (services.evaluations), not in the engine's nodes.
    return SearchEngine.from_state(
        campaign.engine_state,
        retrieve=retrieve,
        keep_reports=False,
        store=RowGraphStore(campaign),
    )


def _dispatch(campaign: Campaign, state: dict, nodes: list[Node]) -> None:
    """Send evaluations to the platform's queue (after commit). Keyed for idempotency."""
    from celery.utils import uuid

    queue = eval_queue(campaign.platform)
    harness = harness_hash()
    now = timezone.now()
    jobs = []
    for node in nodes:
        request = evaluation_request(state, node.source)
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
            current_app.send_task(
                EVALUATE_TASK,
                args=[node.pk, node.evaluation_key, request],
                queue=queue,
                task_id=node.task_id,
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


@dataclass(frozen=True)
class BrokerView:
    """What the broker and the workers said of a campaign's evaluations that may be lost (sent
    longer than a lease ago and not recorded), asked before its row lock is taken."""

    asked: dict[int, str]  # node id -> the task id it had when asked
    alive: frozenset[str]  # of those task ids, the ones still queued or held by a worker


NOTHING_ASKED = BrokerView({}, frozenset())


def _stale_evaluations(campaign_id: int):
    stale_before = timezone.now() - timedelta(seconds=EVALUATION_LEASE_S)
    return Node.objects.filter(
        campaign_id=campaign_id, status=NodeStatus.EVALUATING, dispatched_at__lt=stale_before
    )


def _broker_view(campaign_id: int) -> BrokerView:
    """Ask the broker which of a running campaign's stale evaluations still wait in its queue,
    and the workers (a broadcast that waits up to a second) which they hold. Called outside any
    transaction: neither answer may keep the campaign's row locked."""
    asked = dict(
        _stale_evaluations(campaign_id)
        .filter(campaign__status=CampaignStatus.RUNNING)
        .values_list("pk", "task_id")
    )
    if not asked:
        return NOTHING_ASKED
    platform = Campaign.objects.values_list("platform", flat=True).get(pk=campaign_id)
    task_ids = set(asked.values())
    alive = _queued_task_ids(eval_queue(platform)) & task_ids
    if task_ids - alive:
        alive |= (_held_task_ids() or set()) & task_ids
    return BrokerView(asked, frozenset(alive))


def _redispatch_orphans(campaign: Campaign, state: dict, broker: BrokerView) -> int:
    """Evaluations that no live worker holds and the queue no longer has are sent again.

    That is a worker killed mid-evaluation (its message sits unacknowledged until the
    visibility timeout) or a message lost with the broker. Evaluations are idempotent. Only
    what `broker` was asked about is decided: an evaluation sent again since (its task id
    changed) or stale only since is left for the next watchdog step.
    """
    orphans = [
        node
        for node in _stale_evaluations(campaign.pk)
        if broker.asked.get(node.pk) == node.task_id and node.task_id not in broker.alive
    ]
    if orphans:
        logger.warning(
            "campaign %s: re-dispatching %d orphaned evaluations", campaign.pk, len(orphans)
        )
        _dispatch(campaign, state, orphans)
    return len(orphans)


def _finish(campaign: Campaign, state: dict) -> None:
    campaign.status = (
        CampaignStatus.FAILED if state["outcome"] == Outcome.FAILED else CampaignStatus.COMPLETED
    )
    campaign.outcome = state["outcome"]
    campaign.outcome_reason = state["message"]
    campaign.finished_at = timezone.now()
    campaign.watchdog_at = None
    # After commit, in their own transactions (the knowledge app turns findings into drafts;
    # an error there is logged and never undoes or breaks the campaign's end).
    campaign_id = campaign.pk
    transaction.on_commit(
        lambda: hooks.campaign_finished.send(sender=Campaign, campaign_id=campaign_id),
        robust=True,
    )


def _refresh_best(campaign: Campaign, state: dict) -> None:
    best_key = state.get("best_id")
    if campaign.best_node is not None and campaign.best_node.key == best_key:
        return
    campaign.best_node = campaign.nodes.filter(key=best_key).first() if best_key else None
    campaign.best_fitness = campaign.best_node.fitness if campaign.best_node else None


def _counters_add(campaign: Campaign, state: dict, node: Node, report: dict) -> None:
    """Add one recorded evaluation to the counters the last step counted from the rows (each
    step recounts them), so recording costs the same at any campaign size."""
    funnel = dict(campaign.funnel or {})
    if not funnel.get("pending"):  # never counted (or already off): count from the rows
        campaign_counters_from_rows(campaign=campaign)
        return
    if node.status == NodeStatus.ACCEPTED:
        stage = "accepted"
    else:
        stage = GATE_TO_STAGE.get(node.failed_gate, "errored")
    funnel["pending"] -= 1
    funnel[stage] = funnel.get(stage, 0) + 1
    for key, field in (("device_s_by_gate", "device_s"), ("wall_s_by_gate", "wall_s")):
        by_gate = dict(funnel.get(key) or {})
        for gate in report.get("gates") or []:
            name = gate.get("name") or "?"
            by_gate[name] = by_gate.get(name, 0.0) + float(gate.get(field) or 0.0)
        funnel[key] = by_gate
    funnel["device_s_total"] = float(funnel.get("device_s_total") or 0.0) + node.device_seconds
    accepted = funnel.get("accepted", 0)
    funnel["device_s_per_accepted"] = funnel["device_s_total"] / accepted if accepted else None
    funnel["duplicates_dropped"] = state.get("duplicates", 0)
    campaign.funnel = funnel
    campaign.candidates_evaluated += 1
    campaign.device_seconds = funnel["device_s_total"]


def _refresh_counters(campaign: Campaign, state: dict) -> None:
    campaign_counters_from_rows(campaign=campaign)
    _refresh_best(campaign, state)


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
    """The funnel (counts per stage, device and wall seconds per gate, cost per accepted
    candidate), evaluated count and device-seconds of a campaign, counted from its rows in two
    grouped queries. The caller saves the campaign; the best is not touched."""
    counts = dict.fromkeys((*FUNNEL_STAGES, "cancelled"), 0)
    device_s = 0.0
    grouped = (
        campaign.nodes.order_by()
        .values_list("status", "failed_gate")
        .annotate(n=Count("id"), device=Sum("device_seconds"))
    )
    for status, failed_gate, n, node_device_s in grouped:
        counts["generated"] += n
        device_s += node_device_s or 0.0
        if status in UNSETTLED_NODE_STATUSES:
            counts["pending"] += n
        elif status in (NodeStatus.ACCEPTED, NodeStatus.CANCELLED):
            counts[status] += n
        else:
            counts[GATE_TO_STAGE.get(failed_gate, "errored")] += n
    device_by_gate, wall_by_gate = {}, {}
    for name, gate_device_s, gate_wall_s in (
        GateResult.objects.filter(node__campaign_id=campaign.pk)
        .order_by()
        .values_list("name")
        .annotate(device=Sum("device_seconds"), wall=Sum("wall_seconds"))
    ):
        device_by_gate[name or "?"] = gate_device_s or 0.0
        wall_by_gate[name or "?"] = gate_wall_s or 0.0
    state = campaign.engine_state or {}
    funnel = dict(campaign.funnel or {})
    baseline_device_s = float(
        state.get("baseline_device_s") or funnel.get("baseline_device_s") or 0.0
    )
    device_total = device_s + baseline_device_s
    funnel.update(counts)
    funnel.update(
        {
            "device_s_by_gate": device_by_gate,
            "wall_s_by_gate": wall_by_gate,
            "baseline_device_s": baseline_device_s,
            "device_s_total": device_total,
            "device_s_per_accepted": (
                device_total / counts["accepted"] if counts["accepted"] else None
            ),
            "duplicates_dropped": state.get("duplicates", funnel.get("duplicates_dropped", 0)),
            "start_reused": state.get("start_reused", funnel.get("start_reused")),
        }
    )
    campaign.funnel = funnel
    campaign.candidates_evaluated = counts["generated"] - counts["pending"] - counts["cancelled"]
    campaign.device_seconds = device_total


def campaign_step(*, campaign_id: int, watchdog: bool = False) -> str:
    """Advance a running campaign by one step; returns what it did (for logs and tests).

    The broker and the workers are asked about evaluations that may be lost first, outside
    the transaction (`_broker_view`); the campaign's row lock is held only while deciding."""
    broker = _broker_view(campaign_id)
    with transaction.atomic():
        return _campaign_step(campaign_id, watchdog, broker)


def _campaign_step(campaign_id: int, watchdog: bool, broker: BrokerView) -> str:
    campaign = Campaign.objects.select_for_update().select_related("problem").get(pk=campaign_id)
    if campaign.status != CampaignStatus.RUNNING:
        return f"not running ({campaign.status})"
    if watchdog:
        campaign.watchdog_at = None
    state = campaign.engine_state
    engine = _engine(campaign)

    # The engine's rule says what comes next; this carries it out with rows, queues and events.
    step = engine.step(state)
    if step.action == STEP_BASELINE:
        # A warm-start seed is a row (pending) before the baseline: it shows on the graph and
        # the table, and the funnel counts it, until the baseline lets it be dispatched.
        action = _ensure_baseline(campaign, state)
    elif step.action == STEP_WAIT:
        # Rows not dispatched yet: a warm-start seed (or a step that died before sending).
        _dispatch(campaign, state, list(campaign.nodes.filter(status=NodeStatus.PENDING)))
        redone = _redispatch_orphans(campaign, state, broker)
        action = f"waiting for {step.pending} evaluations ({redone} re-dispatched)"
    elif step.action == STEP_FINISHED:
        _finish(campaign, state)
        action = f"finished: {state['outcome']}" + (" (no proposals)" if step.no_proposals else "")
    else:
        created = engine.store.created
        nodes_created(campaign, created)
        _dispatch(campaign, state, created)
        action = f"round {step.round}: dispatched {len(created)} candidates"
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
    tune = tune_request(state)
    # The GPU host tunes after timing the baseline (about 90 s): not re-sent in the meantime.
    wait_s = 3 * EVALUATION_LEASE_S + (TUNE_TIMEOUT_S if tune else 0)
    requested = state.get("baseline_requested_at")
    if requested and timezone.now().timestamp() - requested < wait_s:
        return "waiting for the baseline" + (" and the tuner" if tune else "")
    state["baseline_requested_at"] = timezone.now().timestamp()
    request = baseline_request(state)
    queue = eval_queue(campaign.platform)
    transaction.on_commit(
        lambda: current_app.send_task(BASELINE_TASK, args=[campaign.pk, request, tune], queue=queue)
    )
    return "baseline requested" + (" with the tuner" if tune else "")


@transaction.atomic
def baseline_record(*, campaign_id: int, report: dict, tuned: dict | None = None) -> bool:
    """Keep the campaign's baseline (and the GPU host's tuner answer, when it tuned), once."""
    campaign = Campaign.objects.select_for_update().get(pk=campaign_id)
    state = campaign.engine_state
    if state.get("baseline") is not None:
        return False
    _engine(campaign).record_baseline(state, report, tuned=tuned)
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
    state = campaign.engine_state
    engine = _engine(campaign)
    # The engine writes the verdict, fitness and times through the rows; False: recorded already.
    if not engine.record(state, node.key, report):
        return False
    node_record_evidence(node=node, report=report)
    node.refresh_from_db()
    campaign.engine_state = state
    _counters_add(campaign, state, node, report)
    _refresh_best(campaign, state)
    campaign.save()
    node_changed(node)
    campaign_changed(campaign, recorded=node)
    unsettled = campaign.nodes.filter(status__in=UNSETTLED_NODE_STATUSES)
    if campaign.status == CampaignStatus.RUNNING and not unsettled.exists():
        transaction.on_commit(lambda: campaign_step_send(campaign.pk))
    return True


def campaigns_resume_all() -> list[int]:
    """After a restart: step every running campaign (orphaned evaluations get re-dispatched)."""
    ids = list(Campaign.objects.filter(status=CampaignStatus.RUNNING).values_list("pk", flat=True))
    Campaign.objects.filter(pk__in=ids).update(watchdog_at=None)
    for campaign_id in ids:
        campaign_step_send(campaign_id)
    return ids
