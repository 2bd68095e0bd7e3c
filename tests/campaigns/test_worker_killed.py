"""SIGKILL the evaluation worker mid-campaign, start another: nothing lost, nothing doubled, and
no sandbox scratch folder left behind by either."""

import glob
import os
import tempfile
import time

import pytest

from apps.campaigns.constants import CampaignStatus, NodeStatus
from apps.campaigns.models import Campaign, GateResult, Node
from apps.campaigns.services.campaigns import campaign_create
from apps.campaigns.services.problems import catalog_sync
from tests.campaigns.test_campaign_end_to_end import finished, wait_for
from tests.support.processes import start_worker

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


def _owner_alive(folder: str) -> bool:
    try:
        with open(os.path.join(folder, ".owner")) as fh:
            os.kill(int(fh.read()), 0)
    except (OSError, ValueError):
        return False
    return True


def test_killed_eval_worker_loses_and_duplicates_nothing(demo_users, control_worker, artifacts_dir):
    from django.contrib.auth.models import User

    logs = artifacts_dir / "logs"
    problem = next(p for p in catalog_sync() if p.name == "silu")
    scratch = os.path.join(tempfile.gettempdir(), "kernelevolve-sandbox-*")
    first = start_worker("eval-doomed", "eval.interpret", logs)
    campaign = campaign_create(
        problem=problem, created_by=User.objects.get(username="engineer"), budget_candidates=6
    )
    try:
        # Kill it while it holds an evaluation: a dispatched node whose task the worker has
        # received and not finished. (The worker's start banner already names the task, so
        # the log must show this node's task id, not just the task name.)
        def held_by_worker() -> set[str]:
            log = first.log()
            return {
                node.key
                for node in Node.objects.filter(campaign=campaign, status=NodeStatus.EVALUATING)
                if f"[{node.task_id}] received" in log and f"[{node.task_id}] succeeded" not in log
            }

        wait_for(held_by_worker, 120, "an evaluation in flight", poll=0.1)
        first.kill()
        in_flight = held_by_worker()
        assert in_flight, "the kill should interrupt at least one evaluation"
    finally:
        first.kill()
    second = start_worker("eval-rescue", "eval.interpret", logs)
    try:
        done = wait_for(lambda: finished(campaign.pk), 600, "the campaign to finish after the kill")
    finally:
        second.stop()

    # A killed worker cannot clean up; the rescuer sweeps what it left (if the kill came after
    # its sandbox started) and removes its own folder when it stops: no folder outlives its owner.
    stale = [f for f in glob.glob(scratch) if not _owner_alive(f)]
    if stale:  # one a live process is making or removing lacks its owner file for a moment
        time.sleep(2)
        stale = [f for f in stale if os.path.exists(f) and not _owner_alive(f)]
    assert stale == []
    assert done.status == CampaignStatus.COMPLETED, done.outcome_reason
    nodes = Node.objects.filter(campaign=done)
    keys = list(nodes.values_list("key", flat=True))
    assert len(keys) == len(set(keys)) == done.funnel["generated"]
    assert done.funnel["pending"] == 0
    assert all(n.status in (NodeStatus.ACCEPTED, NodeStatus.REJECTED) for n in nodes)
    # The interrupted evaluations were delivered again and recorded exactly once each.
    for node in nodes.filter(key__in=in_flight):
        assert node.dispatch_count >= 2
        gate_names = list(GateResult.objects.filter(node=node).values_list("name", flat=True))
        assert len(gate_names) == len(set(gate_names)) > 0
    assert Campaign.objects.get(pk=done.pk).engine_state["outcome"] == done.outcome
