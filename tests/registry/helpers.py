"""Helpers for registry tests: real accepted nodes (a real evaluation report), promotion."""

import functools
import json
import time
from pathlib import Path

from apps.accounts.services import user_upsert
from apps.campaigns.constants import CampaignStatus, NodeStatus, Platform
from apps.campaigns.models import Campaign, Node, Problem
from apps.registry.constants import NEXT_STAGE, Stage
from apps.registry.models import Artifact
from apps.registry.services import artifact_approve, artifact_promote, runtime_report_ingest

ROOT = Path(__file__).resolve().parents[2]
PROBLEMS = ROOT / "workers" / "catalog" / "problems"
CANDIDATES = ROOT / "tests" / "workers" / "fixtures" / "candidates"
SOFTMAX = (PROBLEMS / "softmax.py").read_text()
SOFTMAX_SMOKE = json.loads((PROBLEMS / "softmax.smoke.json").read_text())
SOFTMAX_GOOD = (CANDIDATES / "softmax_good.py").read_text()
# Wrong (+0.5) when a row is shorter than 64: the smoke case b5_d40_bf16 (dim 40) catches it.
SOFTMAX_WRONG_SHORT_ROWS = SOFTMAX_GOOD.replace(
    "    y = e / tl.sum(e, axis=0)\n",
    "    y = e / tl.sum(e, axis=0)\n    if n_cols < 64:\n        y = y + 0.5\n",
)
assert SOFTMAX_WRONG_SHORT_ROWS != SOFTMAX_GOOD


@functools.cache
def softmax_report() -> dict:
    """A real evaluation report of the good softmax on the smoke workload (once per run)."""
    from workers.evaluate import EvaluationRequest, evaluate

    report = evaluate(
        EvaluationRequest(
            problem_source=SOFTMAX,
            candidate_source=SOFTMAX_GOOD,
            workload=SOFTMAX_SMOKE,
            platform="interpret",
        )
    ).to_dict()
    assert report["verdict"] == "accepted", report["reason"]
    return report


def make_users() -> dict:
    pw = "pw-registry-1"
    return {
        "author": user_upsert(username="reg-author", password=pw, roles=["engineer", "reviewer"]),
        "reviewer": user_upsert(username="reg-reviewer", password=pw, roles=["reviewer"]),
        "reviewer2": user_upsert(username="reg-reviewer2", password=pw, roles=["reviewer"]),
        "admin": user_upsert(username="reg-admin", password=pw, roles=["admin"]),
        "viewer": user_upsert(username="reg-viewer", password=pw, roles=["viewer"]),
        "engineer": user_upsert(username="reg-engineer", password=pw, roles=["engineer"]),
        "runtime": user_upsert(username="reg-runtime", password=pw, roles=["runtime"]),
    }


_counter = iter(range(1, 10**6))


def accepted_node(
    author,
    *,
    source: str = SOFTMAX_GOOD,
    platform=Platform.INTERPRET,
    baseline: str = "eager",
    fitness: dict | None = None,
) -> Node:
    """A real accepted softmax node of a new campaign judged against ``baseline``; ``fitness``
    stands in for the report's (the interpreter times nothing) as a timed campaign records it."""
    problem, _ = Problem.objects.get_or_create(
        name="softmax",
        defaults={
            "title": "Softmax",
            "family": "softmax",
            "source": SOFTMAX,
            "workload": SOFTMAX_SMOKE,
            "smoke_workload": SOFTMAX_SMOKE,
        },
    )
    n = next(_counter)
    campaign = Campaign.objects.create(
        name=f"softmax search {n}",
        problem=problem,
        workload=SOFTMAX_SMOKE,
        platform=platform,
        status=CampaignStatus.COMPLETED,
        baseline=baseline,
        created_by=author,
    )
    report = softmax_report()
    if fitness is not None:
        report = {**report, "fitness": fitness}
    return Node.objects.create(
        campaign=campaign,
        key=f"n{n}",
        generator="template",
        source=source,
        status=NodeStatus.ACCEPTED,
        report=report,
        fitness_detail=fitness,
    )


def report(platform="interpret", *, counts=(), shadow=(), refused=(), fingerprint=None, client="t"):
    now = time.time()
    payload = {
        "client": client,
        "platform": platform,
        "manifest_version": None,
        "fingerprint": fingerprint or {},
        "window_start": now - 1,
        "window_end": now,
        "counts": list(counts),
        "shadow": list(shadow),
        "refused": list(refused),
    }
    return runtime_report_ingest(payload=payload)


def feed_shadow(artifact: Artifact, samples: int, mismatches: int = 0, case="b5_d40_bf16"):
    cases = [{"case": case, "reason": "out of tolerance"}] * min(mismatches, 1)
    return report(
        artifact.region.platform,
        shadow=[
            {
                "artifact": artifact.digest,
                "region": artifact.region_id,
                "samples": samples,
                "mismatches": mismatches,
                "cases": cases,
            }
        ],
    )


def count_row(artifact: Artifact, path: str, calls: int, latency_ms: list, errors=0) -> dict:
    """One cell of a runtime report's counts: calls of one region, dtype and path."""
    return {
        "operator": artifact.region.operator,
        "region": artifact.region_id,
        "dtype": "float32",
        "path": path,
        "artifact": artifact.digest if path != "fallback" else None,
        "calls": calls,
        "errors": errors,
        "latency_ms": latency_ms,
    }


def feed_calls(artifact: Artifact, path: str, calls: int, latency_ms: float, errors=0):
    row = count_row(artifact, path, calls, [latency_ms] * calls, errors)
    return report(artifact.region.platform, counts=[row])


@functools.cache
def _model_check_report(request_json: str) -> dict:
    """The real model check (the decoder on the interpreter), once per request per run."""
    from workers.runtime.model_check import run_check

    return run_check(json.loads(request_json))


def complete_model_check(artifact: Artifact):
    """Run the artifact's model check in this process (as a worker would) and record it, so a
    default promotion finds its result; the check's row is the one the gate looks up."""
    from apps.registry.constants import Gate, GateStatus
    from apps.registry.models import GateCheck
    from apps.registry.selectors.model_check import model_check_key, model_check_request
    from apps.registry.services.promotion import artifact_model_check_record

    request = model_check_request(artifact=artifact)
    check, _ = GateCheck.objects.get_or_create(
        artifact=artifact,
        gate=Gate.MODEL,
        toolchain_key=model_check_key(request),
        defaults={"status": GateStatus.INCONCLUSIVE, "reason": "run by the test"},
    )
    run = request
    if request["platform"] == "cuda":
        import torch

        if not torch.cuda.is_available():
            # No GPU here: the same kernels in the interpreter's decoder stand in, so tests of
            # other gates can reach default; the report says where it ran.
            from apps.registry.constants import MODEL_CHECK_CONFIG

            run = {**request, **MODEL_CHECK_CONFIG["interpret"], "platform": "interpret"}
    report = _model_check_report(json.dumps(run, sort_keys=True))
    artifact_model_check_record(check_id=check.pk, report=report)
    check.refresh_from_db()
    return check


def advance(artifact: Artifact, reviewer, to: str) -> Artifact:
    """Approve and promote step by step, feeding the shadow and canary gates enough evidence."""
    region = artifact.region
    region.shadow_min_samples = 4
    region.canary_min_samples = 4
    region.save(update_fields=["shadow_min_samples", "canary_min_samples"])
    while artifact.stage != to:
        target = NEXT_STAGE[artifact.stage]
        artifact_approve(artifact=artifact, by=reviewer)
        if target == Stage.CANARY:
            feed_shadow(artifact, 4)
        if target == Stage.DEFAULT:
            feed_calls(artifact, "canary", 4, 1.0)
            complete_model_check(artifact)
        artifact = artifact_promote(artifact=artifact, by=reviewer, reason=f"to {target}")
    return artifact
