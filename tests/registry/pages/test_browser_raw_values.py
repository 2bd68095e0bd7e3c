"""In a real browser: no raw values on the review pages. An artifact's scope reads as words, not
a Python dict; an interpret artifact's cubins say they were compiled ahead of time for sm_90 and
never ran; IR panels name the stage and the specialisation distinctly; CIs in an outcome are
printed at 3 significant digits."""

import re

import pytest
from django.contrib.auth.models import User

from apps.campaigns.constants import NodeStatus, Outcome
from apps.campaigns.models import Campaign, Node
from apps.campaigns.services.evaluations import node_record_report
from apps.registry.services import artifact_create
from tests.conftest import login
from tests.registry import helpers
from tests.support.asyncio_thread import off_loop

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LONG_REASON = "n1 is 7.520x the eager baseline (95% CI [7.481234567890123, 7.559876543210987])"


def _evaluated_interpret_node(author) -> Node:
    """An accepted softmax candidate whose real interpret report went through the service that
    stores gate evidence (so the candidate page shows its compile artifacts)."""
    node = helpers.accepted_node(author)
    report = node.report
    Node.objects.filter(pk=node.pk).update(status=NodeStatus.EVALUATING, report=None)
    off_loop(node_record_report, node=Node.objects.get(pk=node.pk), report=report)
    return Node.objects.get(pk=node.pk)


def test_no_raw_values_on_artifact_and_candidate_pages(
    asgi_server, demo_users, page, artifacts_dir
):
    author = User.objects.get(username="engineer")
    node = _evaluated_interpret_node(author)
    artifact = off_loop(artifact_create, node=node, by=User.objects.get(username="admin"))
    login(page, asgi_server, "reviewer", demo_users["reviewer"])

    page.goto(f"{asgi_server}/registry/artifacts/{artifact.pk}/")
    serves = page.locator(".kv span.muted:text-is('Serves') + span").inner_text()
    assert "{" not in serves and "'" not in serves, serves
    assert "input 1:" in serves and "×" in serves
    note = page.inner_text("#binaries-not-run")
    assert "compiled ahead of time for sm_90" in note and "none of these binaries ran" in note
    rows = page.locator("#artifact-binaries tbody tr")
    assert rows.count() >= 1
    targets = rows.locator("td:nth-child(3)").all_inner_texts()
    assert all(t == "sm_90: compiled ahead of time, not run" for t in targets), targets
    labels = rows.locator("td:nth-child(1)").all_inner_texts()
    assert len(set(labels)) == len(labels), labels
    page.screenshot(path=str(artifacts_dir / "artifact-interpret-binaries.png"), full_page=True)
    page.click("[data-theme-toggle]")
    page.screenshot(
        path=str(artifacts_dir / "artifact-interpret-binaries-dark.png"), full_page=True
    )

    page.goto(f"{asgi_server}/campaigns/{node.campaign_id}/nodes/{node.key}/")
    titles = page.locator("#gate-compile details.evidence > summary").all_text_contents()
    ir = [t for t in titles if "IR" in t or t.startswith("PTX")]
    assert ir, titles
    assert len(set(ir)) == len(ir), ir
    assert any(t.startswith("Triton IR (TTIR) · ") for t in ir)
    assert all(t.endswith("compiled ahead of time for sm_90, not run") for t in ir), ir

    Campaign.objects.filter(pk=node.campaign_id).update(
        outcome=Outcome.IMPROVED, outcome_reason=LONG_REASON
    )
    page.goto(f"{asgi_server}/campaigns/{node.campaign_id}/")
    reason = page.inner_text("#campaign-outcome-reason")
    assert "(95% CI [7.48, 7.56])" in reason and "7.520x" in reason
    assert not re.search(r"\d\.\d{5,}", reason)
