"""campaign_best_rule: the rule that named the campaign's best, replayed over its accepted
candidates in the order they were recorded, with the numbers of the strongest others."""

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.campaigns.constants import NodeStatus
from apps.campaigns.models import Node
from apps.campaigns.selectors import campaign_best_rule
from tests.campaigns.support.builders import build_campaign

pytestmark = pytest.mark.django_db


def campaign_with(users, accepted: list[tuple[str, float | None, float, float]], best: str):
    """Accepted nodes (key, speedup, CI low, CI high), recorded in the order given."""
    campaign = build_campaign(nodes=8, user=users["engineer"])
    campaign.nodes.update(status=NodeStatus.REJECTED, fitness=None, failed_gate="correctness")
    start = timezone.now()
    for i, (key, fit, low, high) in enumerate(accepted):
        Node.objects.filter(campaign=campaign, key=key).update(
            status=NodeStatus.ACCEPTED,
            failed_gate="",
            fitness=fit,
            fitness_ci_low=low,
            fitness_ci_high=high,
            evaluated_at=start + timedelta(seconds=i),
        )
    campaign.best_node = campaign.nodes.get(key=best)
    campaign.best_fitness = campaign.best_node.fitness
    campaign.save()
    return campaign


def test_a_higher_estimate_whose_interval_overlaps_does_not_replace_the_best(users):
    campaign = campaign_with(
        users, [("n1", 7.52, 7.30, 7.74), ("n5", 7.61, 7.40, 7.83), ("n3", 6.0, 5.8, 6.2)], "n1"
    )
    rule = campaign_best_rule(campaign=campaign)
    assert rule.replayed and rule.best.key == "n1"
    assert "lower bound of its 95% CI is above the best's speedup" in rule.rule
    assert [c.key for c in rule.contenders] == ["n5", "n3"]
    assert rule.contenders[0].why == "its CI lower bound 7.400× is not above n1's 7.520×"
    about = campaign_best_rule(campaign=campaign, about="n3").subject
    assert (about.key, about.why) == ("n3", "its CI lower bound 5.800× is not above n1's 7.520×")
    assert campaign_best_rule(campaign=campaign, about="n1").subject is None, "n1 is the best"


def test_a_replaced_best_and_one_compared_with_an_earlier_best(users):
    campaign = campaign_with(
        users,
        [("n2", 1.10, 1.05, 1.15), ("n7", 1.12, 1.08, 1.16), ("n4", 1.30, 1.20, 1.40)]
        + [("n6", 1.28, 1.25, 1.31)],
        "n4",
    )
    rule = campaign_best_rule(campaign=campaign)
    assert rule.replayed and rule.best.key == "n4"
    by_key = {c.key: c.why for c in rule.contenders}
    assert list(by_key) == ["n6", "n7", "n2"], "strongest first"
    assert by_key["n6"] == "its CI lower bound 1.250× is not above n4's 1.300×"
    assert by_key["n7"] == "its CI lower bound 1.080× is not above n2's (the best then) 1.100×"
    assert by_key["n2"] == "was the best until n4: its CI lower bound 1.200× is above n2's 1.100×"


def test_without_timing_the_first_correct_candidate_stays(users):
    campaign = campaign_with(users, [("n3", None, None, None), ("n1", None, None, None)], "n3")
    rule = campaign_best_rule(campaign=campaign)
    assert rule.best.key == "n3" and "first correct candidate stays the best" in rule.rule
    assert rule.contenders[0].why == "correct too, but recorded after n3"


def test_a_best_the_rule_does_not_give_states_the_rule_only(users):
    campaign = campaign_with(users, [("n1", 1.5, 1.4, 1.6), ("n2", 1.9, 1.8, 2.0)], "n1")
    rule = campaign_best_rule(campaign=campaign)
    assert not rule.replayed and rule.contenders == []
    assert rule.best.key == "n1"
