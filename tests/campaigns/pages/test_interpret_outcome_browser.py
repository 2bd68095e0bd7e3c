"""In a real browser: an interpret campaign that found correct candidates reads as correctness
established, not timed (not "No safe improvement"), in the list and on its page, and the page
says what to run to time it."""

import pytest
from django.contrib.auth.models import User

from apps.campaigns.constants import Outcome
from apps.campaigns.models import Campaign
from tests.campaigns.support.builders import build_campaign
from tests.conftest import login

pytestmark = [pytest.mark.browser, pytest.mark.services, pytest.mark.django_db(transaction=True)]

REASON = (
    "4 of 20 candidates passed every gate on interpret, which has no performance gate: "
    "correctness only, nothing can be shown faster"
)


def test_interpret_campaign_reads_as_correct_not_timed(
    asgi_server, demo_users, page, artifacts_dir
):
    campaign = build_campaign(
        nodes=20,
        timed=False,
        name="softmax on interpret",
        user=User.objects.get(username="engineer"),
    )
    Campaign.objects.filter(pk=campaign.pk).update(
        outcome=Outcome.NO_SAFE_IMPROVEMENT, outcome_reason=REASON
    )
    login(page, asgi_server, "engineer", demo_users["engineer"])

    page.goto(f"{asgi_server}/campaigns/")
    row = page.inner_text(f"#campaign-row-{campaign.pk}")
    assert "Correctness established, not timed" in row and "correct, not timed" in row
    assert "No safe improvement" not in row and "correct only" not in row
    page.screenshot(path=str(artifacts_dir / "campaign-list-interpret.png"), full_page=True)

    page.goto(f"{asgi_server}/campaigns/{campaign.pk}/")
    assert page.inner_text("#campaign-outcome") == "Correctness established, not timed"
    said = page.inner_text("#campaign-untimed")
    assert "not a failure" in said and "No safe improvement" not in said
    time_it = page.inner_text("#campaign-time-it")
    assert f"manage.py create_campaign --problem {campaign.problem.name} --platform cuda" in time_it
    page.screenshot(path=str(artifacts_dir / "campaign-detail-interpret.png"), full_page=True)
    page.click("[data-theme-toggle]")
    page.screenshot(path=str(artifacts_dir / "campaign-detail-interpret-dark.png"), full_page=True)
    # The link opens the form on the same problem, on cuda.
    page.click("#campaign-time-it a")
    page.wait_for_selector("#campaign-form")
    assert page.input_value("#id_problem") == str(campaign.problem_id)
    assert page.input_value("#id_platform") == "cuda"


def test_a_cuda_no_safe_improvement_still_says_so(asgi_server, demo_users, page):
    campaign = build_campaign(nodes=20, user=User.objects.get(username="engineer"))
    Campaign.objects.filter(pk=campaign.pk).update(outcome=Outcome.NO_SAFE_IMPROVEMENT)
    login(page, asgi_server, "viewer", demo_users["viewer"])
    page.goto(f"{asgi_server}/campaigns/{campaign.pk}/")
    assert page.inner_text("#campaign-outcome") == "No safe improvement"
    assert page.locator("#campaign-untimed").count() == 0
