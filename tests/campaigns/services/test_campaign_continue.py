"""Continue from a node: a new campaign for the same operator and platform, warm-started from an
earlier accepted candidate, evaluates that candidate first and searches from it."""

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError

from apps.accounts.services import demo_users_seed
from apps.campaigns.constants import NodeStatus
from apps.campaigns.models import Edge
from apps.campaigns.services import search
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
