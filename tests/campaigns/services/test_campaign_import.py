"""`import_campaign` brings in a search that ran standalone on the H200 (real GPU data)."""

import json
from pathlib import Path

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command

from apps.campaigns.charts import latency_series
from apps.campaigns.models import Campaign, Measurement
from apps.campaigns.services.imports import campaign_import

DEMO = Path(__file__).resolve().parents[3] / "docs" / "demo"

pytestmark = pytest.mark.django_db


def test_import_of_a_gpu_search_keeps_graph_verdicts_and_timings(tmp_path):
    summary = json.loads((DEMO / "h200-rms_norm.json").read_text())
    call_command("import_campaign", str(DEMO / "h200-rms_norm.json"))
    campaign = Campaign.objects.get()
    assert campaign.platform == "cuda" and campaign.status == "completed"
    assert campaign.outcome == summary["outcome"] == "improved"
    assert campaign.nodes.count() == len(summary["nodes"])
    assert campaign.edges.filter(parent__isnull=False).count() == len(summary["edges"])
    assert campaign.best_node.key == summary["best"]["id"]
    assert campaign.best_fitness == pytest.approx(summary["best"]["fitness"]["speedup"])
    timed = Measurement.objects.filter(node=campaign.best_node, median_ms__isnull=False)
    assert timed.count() >= 5 and all(m.samples_ms for m in timed)
    assert all("eager" in m.baselines for m in timed)


def test_import_refuses_a_file_that_is_not_a_search_result():
    with pytest.raises(ValidationError, match="missing"):
        campaign_import(summary={"outcome": "improved", "nodes": []})
    assert not Campaign.objects.exists()


def test_import_refuses_a_measured_case_of_the_wrong_type_and_names_it():
    """A hand-edited file whose case weight is a word: the import says which node and field,
    and keeps nothing (before, the error escaped as a ValueError from inside the import)."""
    summary = json.loads((DEMO / "h200-rms_norm.json").read_text())
    node = next(n for n in summary["nodes"] if (n.get("report") or {}).get("cases"))
    node["report"]["cases"][0]["weight"] = "heavy"
    with pytest.raises(ValidationError, match=rf"node {node['id']}: .*cases\[0\]\.weight"):
        campaign_import(summary=summary)
    assert not Campaign.objects.exists()


def test_a_search_against_the_best_peer_names_each_cases_peer(client, users):
    """The session-27 H200 RMSNorm search, judged case by case against the fastest of compile,
    max-autotune and Liger-Kernel (the incumbent): its name says so, every timed case keeps
    every peer's time, and the candidate page says against which peer each case was judged."""
    summary = json.loads((DEMO / "h200-best-rms_norm.json").read_text())
    campaign = campaign_import(summary=summary)
    assert campaign.name == "rms-norm on cuda vs the best peer (imported)"
    assert campaign.baseline == "best"
    assert campaign.outcome == "improved" and campaign.best_fitness > 1.0
    timed = Measurement.objects.filter(node=campaign.best_node, median_ms__isnull=False)
    assert timed.count() == 5
    peers = {"eager", "compile", "max-autotune", "incumbent", "best"}
    assert all(peers <= set(m.baselines) for m in timed)
    judged = {m.case: m.baselines["best"]["peer"] for m in timed}
    assert judged["t1_h4096_bf16"] == "incumbent"
    assert judged["t8192_h8192_bf16"] == "max-autotune"

    client.force_login(users["engineer"])
    page = client.get(f"/campaigns/{campaign.pk}/").content.decode()
    assert "the fastest of torch.compile, max-autotune and the incumbent" in page
    node = client.get(f"/campaigns/{campaign.pk}/nodes/{campaign.best_node.key}/")
    html = node.content.decode()
    assert '<small class="muted judged-peer">against incumbent</small>' in html
    assert '<small class="muted judged-peer">against max-autotune</small>' in html
    assert "<th>best ms</th>" not in html  # a copy of one of the peers: not repeated
    cases = campaign.best_node.report["cases"]
    runs = {r["name"] for c in latency_series(cases) for r in c["runs"]}
    assert runs == {"candidate", "eager", "compile", "max-autotune", "incumbent"}


def test_the_candidate_page_says_where_a_peer_misses_the_contract(client, users):
    """A peer's output is checked against the contract beside its timing (a TF32 convolution
    under compile, an incumbent with a bug): the case's row on the candidate page says which
    peer missed it and by how much, with the gate's reason on hover."""
    summary = json.loads((DEMO / "h200-best-rms_norm.json").read_text())
    best = next(n for n in summary["nodes"] if n["id"] == summary["best"]["id"])
    case = next(c for c in best["report"]["cases"] if c["name"] == "t8192_h8192_bf16")
    case["peer_checks"] = {
        "compile": {"passes": True, "max_abs_err": 0.0078, "reason": None},
        "incumbent": {
            "passes": False,
            "max_abs_err": 0.25,
            "reason": "output 0: 812 of 67108864 elements outside atol=0.01 rtol=0.01",
        },
    }
    campaign = campaign_import(summary=summary)
    client.force_login(users["engineer"])
    html = client.get(f"/campaigns/{campaign.pk}/nodes/{campaign.best_node.key}/").content.decode()
    assert html.count('class="peer-miss"') == 1
    assert "incumbent misses the contract here (max abs err 0.25)" in html
    assert 'title="output 0: 812 of 67108864 elements outside atol=0.01 rtol=0.01"' in html
    assert "compile misses" not in html


def test_a_search_that_reused_its_start_says_so_and_why_most_acceptances_were_not_rechecked(
    client, users
):
    """The throughput demo run (issue 11): a second softmax search on the same H200 reused
    the first one's baseline and tuner. The campaign page says the start was reused and was not
    charged; an acceptance that cannot replace the best says it was not re-measured in a fresh
    process, and the best says a fresh process agrees."""
    summary = json.loads((DEMO / "h200-throughput-softmax.json").read_text())
    campaign = campaign_import(summary=summary)
    assert campaign.funnel["baseline_device_s"] == 0.0
    client.force_login(users["engineer"])
    page = client.get(f"/campaigns/{campaign.pk}/").content.decode()
    assert 'id="campaign-start-reused"' in page and "not charged to this campaign" in page
    reasons = {n.key: n.reason for n in campaign.nodes.filter(status="accepted")}
    assert "a fresh process agrees" in reasons[campaign.best_node.key]
    skipped = [k for k, r in reasons.items() if "not re-measured in a fresh process" in r]
    assert skipped and campaign.best_node.key not in skipped


def test_a_cute_candidate_is_shown_as_one(client, users):
    """Issue 15: a candidate written in CuTe DSL (its source declares ``BACKEND = "cute"``) is
    recorded as such; its page and the graph's hover say so, the Triton ones say nothing new."""
    summary = json.loads((DEMO / "h200-rms_norm.json").read_text())
    cute = Path(__file__).resolve().parents[2] / "workers/fixtures/candidates/cute_rms_norm.py"
    node = summary["nodes"][-1]
    node["source"] = cute.read_text()
    campaign = campaign_import(summary=summary)
    backends = dict(campaign.nodes.values_list("key", "backend"))
    assert backends.pop(node["id"]) == "cute" and set(backends.values()) == {"triton"}

    client.force_login(users["engineer"])
    html = client.get(f"/campaigns/{campaign.pk}/nodes/{node['id']}/").content.decode()
    assert 'id="node-backend"' in html and ">CuTe DSL</span>" in html
    other = next(iter(backends))
    assert (
        ">Triton</span>" in client.get(f"/campaigns/{campaign.pk}/nodes/{other}/").content.decode()
    )
    api = client.get(f"/api/campaigns/{campaign.pk}/nodes/").json()
    rows = api["results"] if isinstance(api, dict) else api
    assert {r["key"]: r["backend"] for r in rows}[node["id"]] == "cute"
    graph = client.get(f"/campaigns/{campaign.pk}/graph.json").json()
    hovers = [t for trace in graph["figure"]["data"] for t in trace.get("text") or []]
    assert sum("CuTe DSL" in h for h in hovers) == 1


def test_a_candidate_of_both_back_ends_is_shown_as_both(client, users):
    """A back-end mix (``BACKEND = "cute+triton"``: each case on the faster of a Triton and a
    CuTe parent) is recorded, shown and hovered as both."""
    summary = json.loads((DEMO / "h200-rms_norm.json").read_text())
    node = summary["nodes"][-1]
    node["source"] = 'BACKEND = "cute+triton"\n' + node["source"]
    campaign = campaign_import(summary=summary)
    assert campaign.nodes.get(key=node["id"]).backend == "cute+triton"
    client.force_login(users["engineer"])
    html = client.get(f"/campaigns/{campaign.pk}/nodes/{node['id']}/").content.decode()
    assert ">CuTe DSL + Triton</span>" in html
    graph = client.get(f"/campaigns/{campaign.pk}/graph.json").json()
    hovers = [t for trace in graph["figure"]["data"] for t in trace.get("text") or []]
    assert sum("· CuTe DSL + Triton" in h for h in hovers) == 1
