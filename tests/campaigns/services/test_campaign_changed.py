"""`campaign_changed`: the live progress event shows the same "why this is the best" as the
campaign's page after every recorded evaluation, though it replays the rule only when an
evaluation can change what it shows."""

import random

import pytest
from django.template.loader import render_to_string

from apps.campaigns.constants import CampaignStatus, NodeStatus
from apps.campaigns.graph_store import RowGraphStore
from apps.campaigns.models import Campaign
from apps.campaigns.selectors import campaign_best_rule, campaign_get
from apps.campaigns.services import events
from apps.campaigns.services.campaigns import campaign_cancel, campaign_create
from apps.campaigns.services.search import evaluation_record
from workers.search.graph import Node as GraphNode

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


def _report(rng: random.Random) -> dict:
    """Accepted (mostly, and often with the same speedup as another, or untimed) or rejected."""
    if rng.random() < 0.2:
        return {"verdict": "rejected", "failed_gate": "correctness", "reason": "wrong",
                "gates": [], "cases": [], "device_s": 0.1, "wall_s": 0.2}  # fmt: skip
    speedup = rng.choice([None, 0.8, 0.9, 1.0, 1.05, 1.1, 1.2, 1.3, 1.5])
    fitness = None
    if speedup is not None:
        half = rng.choice([0.0, 0.05, 0.2])
        fitness = {"speedup": speedup, "ci95": [speedup - half, speedup + half]}
    return {"verdict": "accepted", "failed_gate": None, "reason": "", "gates": [], "cases": [],
            "fitness": fitness, "device_s": 0.1, "wall_s": 0.2}  # fmt: skip


def _page_partial(campaign: Campaign, rule) -> str:
    return render_to_string(
        "campaigns/partials/progress.html",
        {"campaign": campaign, "oob": True, "worker_notice": None, "best_rule": rule},
    )


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_live_best_rule_is_the_pages_after_every_evaluation(gelu, engineer, broker, seed):
    rng = random.Random(seed)
    campaign = campaign_create(
        problem=gelu, created_by=engineer, platform="cuda", budget_candidates=200, start=False
    )
    Campaign.objects.filter(pk=campaign.pk).update(status=CampaignStatus.RUNNING)
    store = RowGraphStore(campaign)
    for i in range(60):
        store.add(GraphNode(id=f"n{i}", source=f"# {i}\n", generator="template", edge="seed"))
    campaign.nodes.update(status=NodeStatus.EVALUATING)
    for node in campaign.nodes.order_by("id"):
        node.evaluation_key = f"k{node.pk}"
        node.save(update_fields=["evaluation_key"])

    reused = 0
    for node in campaign.nodes.order_by("id"):
        before = events._BEST_RULES.get(campaign.pk)
        assert evaluation_record(node_id=node.pk, evaluation_key=node.evaluation_key,
                                 report=_report(rng))  # fmt: skip
        now = campaign_get(pk=campaign.pk)
        shown = events._BEST_RULES.get(campaign.pk)
        replayed = campaign_best_rule(campaign=now)
        assert (shown.rule if shown else None) == replayed, f"after {node.key}"
        assert _page_partial(now, shown.rule if shown else None) == _page_partial(now, replayed)
        reused += before is not None and shown.rule is before.rule
    assert campaign.nodes.filter(status=NodeStatus.ACCEPTED).count() > 30
    assert reused > 10, "most evaluations do not replay the rule"

    # A cancel changes no accepted candidate: the rule shown stays the page's.
    campaign_cancel(campaign=campaign)
    assert events._BEST_RULES[campaign.pk].rule == campaign_best_rule(
        campaign=campaign_get(pk=campaign.pk)
    )
