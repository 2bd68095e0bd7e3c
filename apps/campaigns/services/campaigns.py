"""Campaign lifecycle: create, start, pause, resume, cancel, continue from a node."""

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone
from django.utils.text import slugify

from apps.campaigns.constants import (
    FINISHED_STATUSES,
    CampaignStatus,
    NodeStatus,
    Platform,
)
from apps.campaigns.graph_store import RowGraphStore
from apps.campaigns.models import Campaign, Node, Problem
from apps.campaigns.services.events import campaign_changed
from apps.campaigns.services.incumbents import incumbent_check
from apps.campaigns.services.problems import (
    problem_reference_check,
    problem_upload,
    workload_check,
)
from apps.campaigns.services.schedule import campaign_step_send
from apps.campaigns.services.search import campaign_nodes_settle
from workers.search.engine import campaign_new, seed_add
from workers.search.generators.llm import NOT_CONFIGURED, llm_configured

GENERATORS = ("template", "llm", "cute")
CUTE_NEEDS_CUDA = (
    "the cute generator writes CuTe DSL kernels, which have no CPU interpreter: only the cuda "
    "platform can check them"
)


def _engine_state(campaign: Campaign) -> dict:
    return campaign_new(
        problem_source=campaign.problem.source,
        problem_name=campaign.problem.name,
        workload=campaign.workload,
        platform=campaign.platform,
        generators=campaign.generators,
        policy=campaign.policy,
        max_candidates=campaign.budget_candidates,
        max_device_s=campaign.budget_device_seconds,
        max_wall_s=campaign.budget_wall_seconds,
        baseline=campaign.baseline,
        incumbent_source=campaign.incumbent_source or None,
        regression_tolerance=campaign.regression_tolerance,
        target_speedup=None,
    )


def campaign_workload(*, problem: Problem, platform: str) -> tuple[dict | None, str]:
    """The workload a campaign on `problem` runs when none is given, and which one it is:
    ``smoke`` on the interpreter (the production shapes would take hours there), else
    ``production``; ``module`` when the problem has none (one case: the module as written)."""
    if platform == Platform.INTERPRET and problem.smoke_workload:
        return problem.smoke_workload, "smoke"
    if problem.workload:
        return problem.workload, "production"
    return None, "module"


@transaction.atomic
def campaign_create(
    *,
    problem: Problem,
    created_by,
    name: str = "",
    platform: str = Platform.INTERPRET,
    generators: list[str] | None = None,
    policy: str = "best_first",
    workload: dict | None = None,
    budget_candidates: int = 12,
    budget_device_seconds: float = 600.0,
    budget_wall_seconds: float = 1800.0,
    baseline: str = "compile",
    incumbent_source: str = "",
    incumbent_name: str = "",
    regression_tolerance: float = 0.02,
    start: bool = True,
) -> Campaign:
    """Create a campaign (and start it unless told not to)."""
    incumbent_check(source=incumbent_source, baseline=baseline)
    generators = list(generators or ["template"])
    unknown = [g for g in generators if g not in GENERATORS]
    if unknown:
        raise ValidationError({"generators": f"unknown generator(s): {', '.join(unknown)}"})
    if "llm" in generators and not llm_configured():
        # Refused here: a campaign that cannot generate would sit "running, 0 of N" for good.
        raise ValidationError({"generators": NOT_CONFIGURED})
    if "cute" in generators and platform != Platform.CUDA:
        raise ValidationError({"generators": CUTE_NEEDS_CUDA})
    if budget_candidates < 1:
        raise ValidationError({"budget_candidates": "must be at least 1"})
    if workload is None:
        workload, _ = campaign_workload(problem=problem, platform=platform)
    campaign = Campaign.objects.create(
        name=name or f"{problem.name} on {platform}",
        problem=problem,
        workload=workload_check(workload),
        platform=platform,
        generators=generators,
        policy=policy,
        budget_candidates=budget_candidates,
        budget_device_seconds=budget_device_seconds,
        budget_wall_seconds=budget_wall_seconds,
        baseline=baseline,
        incumbent_source=incumbent_source,
        incumbent_name=incumbent_name if incumbent_source else "",
        regression_tolerance=regression_tolerance,
        created_by=created_by,
    )
    campaign.engine_state = _engine_state(campaign)
    campaign.save(update_fields=["engine_state"])
    if start:
        campaign_start(campaign=campaign)
    return campaign


def _enqueue_step(campaign: Campaign, countdown: float = 0) -> None:
    transaction.on_commit(lambda: campaign_step_send(campaign.pk, countdown=countdown))


@transaction.atomic
def campaign_start(*, campaign: Campaign) -> Campaign:
    campaign = Campaign.objects.select_for_update().get(pk=campaign.pk)
    if campaign.status != CampaignStatus.QUEUED or campaign.started_at:
        raise ValidationError(f"campaign is {campaign.status}; only a queued one can start")
    campaign.status = CampaignStatus.RUNNING
    campaign.started_at = campaign.heartbeat_at = timezone.now()
    campaign.save(update_fields=["status", "started_at", "heartbeat_at"])
    campaign_changed(campaign)
    _enqueue_step(campaign)
    return campaign


@transaction.atomic
def campaign_pause(*, campaign: Campaign) -> Campaign:
    campaign = Campaign.objects.select_for_update().get(pk=campaign.pk)
    if campaign.status != CampaignStatus.RUNNING:
        raise ValidationError(f"campaign is {campaign.status}; only a running one can pause")
    campaign.status = CampaignStatus.PAUSED
    campaign.save(update_fields=["status"])
    campaign_changed(campaign)
    return campaign


@transaction.atomic
def campaign_resume(*, campaign: Campaign) -> Campaign:
    campaign = Campaign.objects.select_for_update().get(pk=campaign.pk)
    if campaign.status != CampaignStatus.PAUSED:
        raise ValidationError(f"campaign is {campaign.status}; only a paused one can resume")
    campaign.status = CampaignStatus.RUNNING
    # The stall watchdog counts from here, not from the last step before the pause.
    campaign.heartbeat_at = timezone.now()
    campaign.stall_restarts = 0
    campaign.save(update_fields=["status", "heartbeat_at", "stall_restarts"])
    campaign_changed(campaign)
    _enqueue_step(campaign)
    return campaign


@transaction.atomic
def campaign_cancel(*, campaign: Campaign, by=None) -> Campaign:
    """Stop a campaign for good. Every node not evaluated yet is settled as cancelled and its
    task revoked; a result that still arrives is kept on its node as evidence but changes no
    count, the best or the outcome (services.search.evaluation_record)."""
    campaign = Campaign.objects.select_for_update().get(pk=campaign.pk)
    if campaign.status in FINISHED_STATUSES:
        raise ValidationError(f"campaign is {campaign.status} already")
    in_flight = campaign_nodes_settle(
        campaign=campaign,
        reason="cancelled with the campaign before its evaluation finished",
    )
    campaign.status = CampaignStatus.CANCELLED
    campaign.finished_at = timezone.now()
    campaign.watchdog_at = None
    who = f" by {by.username}" if by is not None else ""
    reason = f"cancelled{who} after {campaign.candidates_evaluated} evaluations"
    if campaign.funnel.get("cancelled"):
        reason += (
            f"; {campaign.funnel['cancelled']} candidates in flight were cancelled unevaluated"
        )
    campaign.outcome_reason = reason
    campaign.save(
        update_fields=[
            "status",
            "finished_at",
            "watchdog_at",
            "outcome_reason",
            "funnel",
            "candidates_evaluated",
            "device_seconds",
        ]
    )
    campaign_changed(campaign)
    if in_flight:
        from kernelevolve_site.celery import app

        transaction.on_commit(lambda: app.control.revoke(in_flight))
    return campaign


@transaction.atomic
def campaign_continue_from_node(
    *,
    node: Node,
    created_by,
    budget_candidates: int | None = None,
    platform: str | None = None,
):
    """Warm-start a new campaign for the same operator from an earlier node, on the same
    platform unless told another (then with that platform's default workload: the smoke shapes
    on the interpreter, the production ones elsewhere)."""
    if node.status != NodeStatus.ACCEPTED:
        raise ValidationError("only an accepted candidate can seed a new campaign")
    source = node.campaign
    platform = platform or source.platform
    if platform not in Platform.values:
        raise ValidationError({"platform": f"unknown platform {platform!r}"})
    campaign = campaign_create(
        problem=source.problem,
        created_by=created_by,
        name=f"{source.problem.name} on {platform} (from {source.pk}/{node.key})",
        platform=platform,
        generators=source.generators,
        policy=source.policy,
        workload=source.workload if platform == source.platform else None,
        budget_candidates=budget_candidates or source.budget_candidates,
        budget_device_seconds=source.budget_device_seconds,
        budget_wall_seconds=source.budget_wall_seconds,
        baseline=source.baseline,
        incumbent_source=source.incumbent_source,
        incumbent_name=source.incumbent_name,
        regression_tolerance=source.regression_tolerance,
        start=False,
    )
    campaign.warm_start_node = node
    state = campaign.engine_state
    seed_add(
        state,
        source=node.source,
        generator=node.generator,
        params=node.params,
        note=f"warm start from campaign {source.pk} node {node.key}",
        store=RowGraphStore(campaign),
    )
    campaign.engine_state = state
    campaign.save(update_fields=["warm_start_node", "engine_state"])
    return campaign_start(campaign=campaign)


def campaign_create_from_upload(
    *,
    created_by,
    problem_name: str,
    problem_source: str,
    workload: dict | None,
    workload_field: str = "workload",
    **campaign_kwargs,
) -> Campaign:
    """Upload a problem (its reference runs one case in the sandbox first) and start a campaign
    on it. Nothing is created when the upload or the campaign is refused."""
    slug = slugify(problem_name)
    if not slug:
        raise ValidationError({"problem_name": "letters, digits or dashes"})
    if Problem.objects.filter(name=slug).exists():
        raise ValidationError({"problem_name": f"a problem named {slug!r} exists already"})
    # The sandbox run happens before the transaction, so no lock is held while it runs.
    problem_reference_check(source=problem_source, workload=workload, workload_field=workload_field)
    with transaction.atomic():
        problem = problem_upload(
            name=problem_name,
            source=problem_source,
            workload=workload,
            created_by=created_by,
            workload_field=workload_field,
            checked=True,
        )
        return campaign_create(
            problem=problem, created_by=created_by, workload=workload, **campaign_kwargs
        )
