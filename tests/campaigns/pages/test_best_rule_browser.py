"""In a real browser: where the campaign page names its best, it states the rule that picked it
and the numbers of the strongest other accepted candidates (n1 at 7.52× is the best while n5 at
7.61× is accepted too: n5's interval reaches below n1's speedup)."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from apps.campaigns.constants import NodeStatus
from apps.campaigns.models import Node
from tests.campaigns.support.builders import build_campaign
from tests.conftest import login

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_best_comes_with_its_rule_and_numbers(asgi_server, demo_users, page, artifacts_dir):
    campaign = build_campaign(nodes=6, user=User.objects.get(username="engineer"))
    campaign.nodes.update(status=NodeStatus.REJECTED, fitness=None, failed_gate="performance")
    start = timezone.now()
    for i, (key, fit, low, high) in enumerate(
        [("n1", 7.52, 7.30, 7.74), ("n5", 7.61, 7.40, 7.83), ("n3", 6.10, 5.90, 6.30)]
    ):
        Node.objects.filter(campaign=campaign, key=key).update(
            status=NodeStatus.ACCEPTED,
            failed_gate="",
            fitness=fit,
            fitness_ci_low=low,
            fitness_ci_high=high,
            evaluated_at=start + timedelta(seconds=i),
        )
    campaign.best_node = campaign.nodes.get(key="n1")
    campaign.best_fitness = 7.52
    campaign.save()

    login(page, asgi_server, "reviewer", demo_users["reviewer"])
    page.goto(f"{asgi_server}/campaigns/{campaign.pk}/")
    page.wait_for_timeout(1_000)  # the socket opened and the live section caught up
    rule = page.inner_text("#best-rule")
    assert "Why n1 is the best" in rule
    assert "lower bound of its 95% CI is above the best's speedup" in rule
    rows = page.locator("#best-contenders tbody tr")
    assert rows.count() == 3
    assert rows.nth(0).inner_text().split("\t")[:3] == ["n1", "7.520×", "7.300–7.740"]
    assert "its CI lower bound 7.400× is not above n1's 7.520×" in rows.nth(1).inner_text()
    assert rows.nth(1).inner_text().startswith("n5")
    page.locator("#best-rule").screenshot(path=str(artifacts_dir / "campaign-best-rule.png"))

    # The candidate with the higher estimate says why it is not the best.
    page.goto(f"{asgi_server}/campaigns/{campaign.pk}/nodes/n5/")
    why = page.inner_text("#node-best-why")
    assert "Not the campaign's best (n1 7.520×)" in why
    assert "its CI lower bound 7.400× is not above n1's 7.520×" in why
    page.goto(f"{asgi_server}/campaigns/{campaign.pk}/nodes/n1/")
    assert page.inner_text("#node-best-why").startswith("The campaign's best.")
