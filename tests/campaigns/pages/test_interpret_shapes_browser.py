"""In a real browser: a candidate evaluated on the interpreter says, case by case, which smaller
shapes it was checked at instead of those the workload asked for."""

import pytest
from django.contrib.auth.models import User

from apps.campaigns.constants import CampaignStatus, NodeStatus, Platform
from apps.campaigns.models import Campaign, Node, Problem
from apps.campaigns.services.evaluations import node_record_report
from tests.conftest import login
from tests.registry.helpers import SOFTMAX, SOFTMAX_GOOD
from tests.support.asyncio_thread import off_loop

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WORKLOAD = {
    "cases": [
        {"name": "big", "overrides": {"batch_size": 64, "dim": 4096}, "weight": 3.0},
        {"name": "small", "overrides": {"batch_size": 8, "dim": 96}, "weight": 1.0},
    ]
}


def test_candidate_page_says_which_smaller_shapes_it_checked(
    asgi_server, demo_users, page, artifacts_dir
):
    from workers.evaluate import EvaluationRequest, evaluate

    report = evaluate(
        EvaluationRequest(
            problem_source=SOFTMAX,
            candidate_source=SOFTMAX_GOOD,
            workload=WORKLOAD,
            platform="interpret",
        )
    ).to_dict()
    problem = Problem.objects.create(name="softmax-big", title="softmax", source=SOFTMAX)
    campaign = Campaign.objects.create(
        name="softmax big on interpret",
        problem=problem,
        workload=WORKLOAD,
        platform=Platform.INTERPRET,
        status=CampaignStatus.COMPLETED,
        created_by=User.objects.get(username="engineer"),
    )
    node = Node.objects.create(
        campaign=campaign, key="n1", generator="template", source=SOFTMAX_GOOD,
        status=NodeStatus.EVALUATING,
    )  # fmt: skip
    off_loop(node_record_report, node=node, report=report)
    login(page, asgi_server, "viewer", demo_users["viewer"])
    page.goto(f"{asgi_server}/campaigns/{campaign.pk}/nodes/n1/")
    rows = {
        r.locator("td").first.inner_text().split("\n")[0]: r.inner_text()
        for r in page.locator("#cases tbody tr").all()
    }
    assert "checked at smaller shapes on the interpreter: dim 4096 → 1024" in rows["big"]
    assert "smaller shapes" not in rows["small"]
    page.screenshot(path=str(artifacts_dir / "candidate-interpret-shapes.png"), full_page=True)
