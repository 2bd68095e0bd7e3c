"""Continue from a node: a new campaign for the same operator and platform, warm-started from an
earlier accepted candidate, evaluates that candidate first and searches from it. On cuda the seed
shows before the baseline is measured, and a missing GPU worker is named on the page."""

import pytest
import redis
from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.test import Client

from apps.accounts.services import demo_users_seed
from apps.campaigns.constants import NodeStatus, eval_queue
from apps.campaigns.models import Edge
from apps.campaigns.services import queues, search
from apps.campaigns.services.campaigns import campaign_cancel, campaign_continue_from_node
from tests.campaigns.support.builders import build_campaign

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


def test_continue_from_an_accepted_node_seeds_the_new_campaign_with_it():
    demo_users_seed()
    engineer = User.objects.get(username="engineer2")
    earlier = build_campaign(nodes=6, user=User.objects.get(username="engineer"), timed=False)
    seed = earlier.nodes.filter(status=NodeStatus.ACCEPTED).first()

    campaign = campaign_continue_from_node(node=seed, created_by=engineer, budget_candidates=3)
    assert campaign.status == "running" and campaign.warm_start_node == seed
    assert (campaign.problem, campaign.platform) == (earlier.problem, earlier.platform)
    assert campaign.created_by == engineer

    search.campaign_step(campaign_id=campaign.pk)
    first = campaign.nodes.get(key="n1")
    assert first.source == seed.source and first.params == seed.params
    assert first.status == NodeStatus.EVALUATING, "the warm start is evaluated first"
    assert Edge.objects.get(child=first).kind == "seed"
    campaign_cancel(campaign=campaign)

    rejected = earlier.nodes.exclude(status=NodeStatus.ACCEPTED).first()
    with pytest.raises(ValidationError, match="only an accepted candidate"):
        campaign_continue_from_node(node=rejected, created_by=engineer)


def test_continuing_a_cuda_candidate_with_no_gpu_worker_shows_the_seed_and_says_why(
    monkeypatch,
):
    demo_users_seed()
    engineer = User.objects.get(username="engineer")
    imported = build_campaign(nodes=6, user=engineer, timed=True, name="imported on cuda")
    assert imported.platform == "cuda"
    seed = imported.nodes.filter(status=NodeStatus.ACCEPTED).first()
    campaign = campaign_continue_from_node(node=seed, created_by=engineer)
    try:
        assert search.campaign_step(campaign_id=campaign.pk).startswith("baseline requested")
        campaign.refresh_from_db()
        # The funnel counts the seed, and the graph and the table show it (pending).
        assert campaign.funnel["generated"] == campaign.nodes.count() == 1
        assert campaign.nodes.get().status == NodeStatus.PENDING
        client = Client()
        client.force_login(engineer)
        assert client.get(f"/campaigns/{campaign.pk}/graph.json").json()["count"] == 1

        monkeypatch.setattr(queues, "_active_queues", lambda: {})
        queues.eval_queues_watch()
        html = client.get(f"/campaigns/{campaign.pk}/").content.decode()
        assert "No worker serves <code>eval.cuda.sm90</code>" in html
    finally:
        campaign_cancel(campaign=campaign)
        redis.Redis.from_url(settings.CELERY_BROKER_URL).delete(eval_queue("cuda"), "control")


def test_continue_on_another_platform_takes_that_platforms_workload():
    demo_users_seed()
    engineer = User.objects.get(username="engineer")
    earlier = build_campaign(nodes=6, user=engineer, timed=True)
    problem = earlier.problem
    problem.smoke_workload = {"cases": [{"name": "smoke", "weight": 1.0}]}
    problem.save(update_fields=["smoke_workload"])
    seed = earlier.nodes.filter(status=NodeStatus.ACCEPTED).first()

    campaign = campaign_continue_from_node(
        node=seed, created_by=engineer, budget_candidates=2, platform="interpret"
    )
    assert (campaign.platform, campaign.budget_candidates) == ("interpret", 2)
    cases = [c["name"] for c in campaign.workload["cases"]]
    assert cases == ["smoke"], "the interpreter's smoke shapes, not the cuda campaign's"
    assert campaign.name.startswith(f"{problem.name} on interpret (from {earlier.pk}/")
    with pytest.raises(ValidationError, match="unknown platform"):
        campaign_continue_from_node(node=seed, created_by=engineer, platform="rocm")
