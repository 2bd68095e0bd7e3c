"""The model check gate: a default promotion of an operator the decoder uses waits for the
check, which runs on a worker of the artifact's platform (never in the web process); a kernel
that agrees with the stock decoder goes to default, one that changes its logits is aborted; the
artifact page shows the output agreement and the step-time section."""

import time

import pytest

from apps.registry.models import Artifact, GateCheck
from apps.registry.selectors import artifact_gates
from apps.registry.services import (
    PromotionBlocked,
    artifact_approve,
    artifact_create,
    artifact_promote,
)
from tests.registry import helpers


def _to_canary(users, source=helpers.SOFTMAX_GOOD):
    node = helpers.accepted_node(users["author"], source=source)
    a = artifact_create(node=node, by=users["reviewer"])
    a = helpers.advance(a, users["reviewer"], "canary")
    helpers.feed_calls(a, "canary", 4, 1.0)
    artifact_approve(artifact=a, by=users["reviewer"])
    return a


def _model_gate(artifact):
    return next(g for g in artifact_gates(artifact=artifact) if g.gate == "model")


def _wait_for_result(artifact, timeout=240):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        check = GateCheck.objects.filter(artifact=artifact, gate="model").first()
        if check is not None and check.status != "inconclusive":
            return check
        time.sleep(0.5)
    raise AssertionError("the model check never came back")


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_model_check_runs_on_a_worker_and_gates_default(users, control_worker, eval_worker):
    good = _to_canary(users)
    assert _model_gate(good).status == "inconclusive"
    with pytest.raises(PromotionBlocked, match="model check .* sent to eval.interpret"):
        artifact_promote(artifact=good, by=users["reviewer"])
    check = _wait_for_result(good)
    assert check.status == "pass", check.reason
    assert "outputs agree" in check.reason and "kernels served" in check.reason
    assert check.evidence["served"][good.digest] > 0
    assert check.evidence["agreement"]["steps"]["decode"]["top1_agreement"] == 1.0
    assert artifact_promote(artifact=good, by=users["reviewer"]).stage == "default"

    # Wrong when a row is shorter than 64: the decode step's 48-key softmax rows catch it.
    bad = _to_canary(users, source=helpers.SOFTMAX_WRONG_SHORT_ROWS)
    with pytest.raises(PromotionBlocked, match="waiting"):
        artifact_promote(artifact=bad, by=users["reviewer"])
    check = _wait_for_result(bad)
    assert check.status == "fail" and "logits out of tolerance" in check.reason
    bad = Artifact.objects.get(pk=bad.pk)
    assert bad.stage == "aborted" and "Model check" in bad.stage_reason


@pytest.mark.django_db
def test_artifact_page_shows_the_model_check(client, users):
    a = artifact_create(node=helpers.accepted_node(users["author"]), by=users["reviewer"])
    a = helpers.advance(a, users["reviewer2"], "canary")
    client.force_login(users["reviewer"])
    page = client.get(f"/registry/artifacts/{a.pk}/").content.decode()
    assert 'id="model-check-none"' in page
    gate = page.split('data-gate="model"')[1].split("</tr>")[0]
    assert "inconclusive" in gate and "must run stock vs patched" in gate

    helpers.feed_calls(a, "canary", 4, 1.0)
    check = helpers.complete_model_check(a)
    page = client.get(f"/registry/artifacts/{a.pk}/").content.decode()
    gate = page.split('data-gate="model"')[1].split("</tr>")[0]
    assert ">pass<" in gate
    assert 'id="model-check-status"' in page and check.reason in page
    agreement = page.split('id="model-check-agreement"')[1].split("</table>")[0]
    assert 'data-step="prefill"' in agreement and 'data-step="decode"' in agreement
    assert "not measured on the interpreter" in page  # step time: said, not invented
    coverage = page.split('id="model-check-coverage"')[1].split("</table>")[0]
    assert "softmax" in coverage and "outside every region" in coverage  # prefill rows
    assert "patch_model(model)" in page
