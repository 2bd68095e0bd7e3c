"""Import a campaign that ran standalone on a GPU host (`python -m workers search --json`)."""

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from apps.campaigns.constants import Baseline, CampaignStatus, Outcome
from apps.campaigns.models import Campaign, Edge, Node, Problem
from apps.campaigns.services.evaluations import node_record_report
from apps.campaigns.services.problems import problem_create
from workers.cute_dsl import declared_backend
from workers.report import MalformedReport

REQUIRED_KEYS = ("outcome", "funnel", "nodes", "edges", "config")


@transaction.atomic
def campaign_import(*, summary: dict, created_by=None, name: str = "") -> Campaign:
    """Create a finished campaign with its whole graph from a standalone search's JSON."""
    missing = [key for key in REQUIRED_KEYS if key not in summary]
    if missing:
        raise ValidationError(f"not a search result: missing {', '.join(missing)}")
    if summary["outcome"] not in Outcome.values:
        raise ValidationError(f"outcome {summary['outcome']!r} is not one of {Outcome.values}")
    config = summary["config"]
    problem_name = (config.get("problem_name") or "imported-problem").replace("_", "-")
    problem = Problem.objects.filter(source=config["problem_source"]).first()
    if problem is None:
        suffix = Problem.objects.filter(name__startswith=problem_name).count()
        problem = problem_create(
            name=f"{problem_name}-{suffix}" if suffix else problem_name,
            source=config["problem_source"],
            workload=config.get("workload"),
            created_by=created_by,
        )
    budget = config.get("budget") or {}
    campaign = Campaign.objects.create(
        name=name or _imported_name(problem.name, config),
        problem=problem,
        workload=config.get("workload"),
        platform=config.get("platform", "cuda"),
        generators=config.get("generators", []),
        policy=config.get("policy", "best_first"),
        budget_candidates=budget.get("max_candidates") or len(summary["nodes"]),
        budget_device_seconds=budget.get("max_device_s") or 0.0,
        budget_wall_seconds=budget.get("max_wall_s") or 0.0,
        baseline=config.get("baseline", "eager"),
        incumbent_source=config.get("incumbent_source") or "",
        incumbent_name="the imported search's incumbent" if config.get("incumbent_source") else "",
        regression_tolerance=config.get("regression_tolerance", 0.02),
        status=CampaignStatus.FAILED
        if summary["outcome"] == Outcome.FAILED
        else CampaignStatus.COMPLETED,
        outcome=summary["outcome"],
        outcome_reason=summary.get("message") or "",
        # A search whose baseline and tuner were a start kept on the same GPU host says so.
        funnel={"start_reused": summary.get("start_reused"), **summary["funnel"]},
        candidates_evaluated=summary.get("candidates_evaluated") or 0,
        device_seconds=summary.get("device_s") or 0.0,
        engine_state={"imported": True, "fingerprint": summary.get("fingerprint")},
        created_by=created_by,
        started_at=timezone.now(),
        finished_at=timezone.now(),
    )
    rows = {}
    for data in summary["nodes"]:
        node = Node.objects.create(
            campaign=campaign,
            key=data["id"],
            round=data.get("round", 0),
            generator=data.get("generator", ""),
            params=data.get("params") or {},
            source=data.get("source", ""),
            backend=declared_backend(data.get("source", "")),
            source_hash=data.get("source_hash") or "",
            note=data.get("note") or "",
            island=data.get("island") or 0,
            migrated_to=data.get("migrated_to") or [],
            feedback=data.get("feedback") or "",
            retrieved_knowledge=data.get("knowledge_ids") or [],
        )
        rows[data["id"]] = node
        if data.get("report"):
            try:
                node_record_report(node=node, report=data["report"])
            except MalformedReport as exc:
                raise ValidationError(f"node {data['id']}: {exc}") from exc
    for edge in summary["edges"]:
        if edge["src"] not in rows or edge["dst"] not in rows:
            raise ValidationError(f"edge {edge} names a node that is not in the file")
        Edge.objects.create(
            campaign=campaign, parent=rows[edge["src"]], child=rows[edge["dst"]], kind=edge["type"]
        )
    for data in summary["nodes"]:
        if not data.get("parent_ids"):
            Edge.objects.create(campaign=campaign, parent=None, child=rows[data["id"]], kind="seed")
    best = summary.get("best")
    if best and best.get("id") in rows:
        campaign.best_node = Node.objects.get(pk=rows[best["id"]].pk)
        campaign.best_fitness = campaign.best_node.fitness
        campaign.save(update_fields=["best_node", "best_fitness"])
    return campaign


def _imported_name(problem: str, config: dict) -> str:
    """``rms-norm on cuda (imported)``; with what it was judged against when that is not eager
    (``rms-norm on cuda vs compile (imported)``), so two imports of one problem read apart."""
    baseline = config.get("baseline") or "eager"
    versus = "" if baseline == "eager" else f" vs {baseline}"
    if baseline == Baseline.BEST:
        versus = " vs the best peer"
    return f"{problem} on {config.get('platform')}{versus} (imported)"
