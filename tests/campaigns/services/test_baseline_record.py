"""`baseline_record` keeps a GPU campaign's baseline once in its engine state: small at any
campaign size (a real H200 baseline leaves the state under 10 kB), still compared against by
every candidate dispatched after it, and a state saved with the timings twice shrinks on its
next step."""

import copy
import json
from pathlib import Path

import pytest
from django.utils import timezone

from apps.campaigns.constants import CampaignStatus, eval_queue
from apps.campaigns.models import Campaign
from apps.campaigns.services.campaigns import campaign_cancel, campaign_create
from apps.campaigns.services.search import baseline_record, campaign_step
from workers.contract.tasks import BASELINE_TASK, EVALUATE_TASK

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]
DEMO = Path(__file__).resolve().parents[3] / "docs" / "demo" / "h200-rms_norm.json"


@pytest.fixture
def h200_baseline() -> dict:
    """The baseline an H200 measured for RMSNorm: 5 cases, eager and compile, 200 samples each
    (22.7 kB of JSON)."""
    return json.loads(DEMO.read_text())["baseline"]


@pytest.fixture
def gpu_campaign(gelu, engineer):
    campaign = campaign_create(
        problem=gelu, created_by=engineer, platform="cuda", budget_candidates=40, start=False
    )
    Campaign.objects.filter(pk=campaign.pk).update(
        status=CampaignStatus.RUNNING, started_at=timezone.now()
    )
    yield campaign
    campaign.refresh_from_db()
    if campaign.status == CampaignStatus.RUNNING:
        campaign_cancel(campaign=campaign)


def _medians(times: dict) -> dict:
    return {
        case: {name: timing["median_ms"] for name, timing in by_name.items()}
        for case, by_name in times.items()
    }


def test_the_baseline_is_kept_once_and_small_and_every_candidate_carries_it(
    gpu_campaign, h200_baseline, broker
):
    assert campaign_step(campaign_id=gpu_campaign.pk) == "baseline requested with the tuner"
    assert baseline_record(campaign_id=gpu_campaign.pk, report=copy.deepcopy(h200_baseline))

    state = Campaign.objects.get(pk=gpu_campaign.pk).engine_state
    assert "baseline_times" not in state, "the timings are not kept a second time"
    assert len(json.dumps(state)) < 10_000
    kept = state["baseline"]
    assert kept["fingerprint"] == h200_baseline["fingerprint"], "retrieval reads it"
    assert state["baseline_device_s"] == pytest.approx(h200_baseline["device_s"])
    given = {c["name"]: c["timings"] for c in h200_baseline["cases"]}
    assert _medians({c["name"]: c["timings"] for c in kept["cases"]}) == _medians(given)

    assert campaign_step(campaign_id=gpu_campaign.pk).startswith("round 1: dispatched")
    sent = broker.sent(eval_queue("cuda"), task=EVALUATE_TASK)
    assert sent
    for message in sent:
        times = message.args[2]["baseline_times"]
        assert _medians(times) == _medians(given), "each candidate is compared to it"
        eager = times["t1_h4096_bf16"]["eager"]
        assert eager["ci95_ms"] == given["t1_h4096_bf16"]["eager"]["ci95_ms"]


def test_a_state_with_the_timings_twice_is_kept_once_from_its_next_step(
    gpu_campaign, h200_baseline, broker
):
    """A campaign running when the baseline was kept twice (report + `baseline_times`, 45 kB)."""
    campaign = Campaign.objects.get(pk=gpu_campaign.pk)
    state = campaign.engine_state
    state["baseline"] = h200_baseline
    state["baseline_times"] = {c["name"]: c["timings"] for c in h200_baseline["cases"]}
    state["baseline_device_s"] = h200_baseline["device_s"]
    campaign.engine_state = state
    campaign.save(update_fields=["engine_state"])
    assert len(json.dumps(state)) > 40_000

    assert campaign_step(campaign_id=campaign.pk).startswith("round 1: dispatched")

    state = Campaign.objects.get(pk=campaign.pk).engine_state
    assert "baseline_times" not in state and len(json.dumps(state)) < 10_000
    sent = broker.sent(eval_queue("cuda"), task=EVALUATE_TASK)
    assert sent and all(m.args[2]["baseline_times"] for m in sent)


def test_the_gpu_host_is_asked_to_tune_beside_the_baseline_and_its_answer_is_kept(
    gpu_campaign, h200_baseline, broker
):
    """The control side has no GPU: the baseline task carries the tuner's request to the cuda
    queue, is not re-sent while the tuner runs, and the answer comes back with the baseline."""
    assert campaign_step(campaign_id=gpu_campaign.pk) == "baseline requested with the tuner"
    (message,) = broker.sent(eval_queue("cuda"), task=BASELINE_TASK)
    campaign_id, request, tune = message.args
    assert campaign_id == gpu_campaign.pk and tune["workload"] == gpu_campaign.workload
    assert tune["problem_source"] == gpu_campaign.problem.source
    assert campaign_step(campaign_id=gpu_campaign.pk) == "waiting for the baseline and the tuner"
    assert len(broker.sent(eval_queue("cuda"), task=BASELINE_TASK)) == 1

    answer = {"ok": True, "table": {"4,256,float32": [1, 2, 256, 2, 1, 0, 1, 1]},
              "cases": [{"name": "small", "key": "4,256,float32", "speedup": 1.2}],
              "wall_s": 80.0}  # fmt: skip
    assert baseline_record(
        campaign_id=gpu_campaign.pk, report=copy.deepcopy(h200_baseline), tuned=answer
    )
    state = Campaign.objects.get(pk=gpu_campaign.pk).engine_state
    assert state["tuned"]["table"] == answer["table"]
    assert state["baseline_device_s"] == pytest.approx(h200_baseline["device_s"] + 80.0)
    assert len(json.dumps(state)) < 10_000
