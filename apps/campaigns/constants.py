"""Choices and limits for campaigns."""

from django.db import models

from workers.contract import tasks as contract


class Platform(models.TextChoices):
    INTERPRET = "interpret", "Triton interpreter (CPU, correctness only)"
    CUDA = "cuda", "CUDA (NVIDIA GPU)"


class Policy(models.TextChoices):
    BEST_FIRST = "best_first", "Best-first with diversity bonus"
    ISLANDS = "islands", "Islands with migration"


class Baseline(models.TextChoices):
    EAGER = "eager", "PyTorch eager"
    COMPILE = "compile", "torch.compile"
    MAX_AUTOTUNE = "max-autotune", "torch.compile max-autotune"
    INCUMBENT = "incumbent", "Incumbent"
    BEST = "best", "Best peer per case (compile, max-autotune, incumbent)"


class CampaignStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    PAUSED = "paused", "Paused"
    CANCELLED = "cancelled", "Cancelled"
    COMPLETED = "completed", "Completed"
    FAILED = "failed", "Failed"


ACTIVE_STATUSES = (CampaignStatus.QUEUED, CampaignStatus.RUNNING)
FINISHED_STATUSES = (CampaignStatus.CANCELLED, CampaignStatus.COMPLETED, CampaignStatus.FAILED)


class Outcome(models.TextChoices):
    IMPROVED = "improved", "Improved"
    NO_SAFE_IMPROVEMENT = "no_safe_improvement", "No safe improvement"
    BUDGET_EXHAUSTED = "budget_exhausted", "Budget exhausted"
    FAILED = "failed", "Failed"


class NodeStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    EVALUATING = "evaluating", "Evaluating"
    ACCEPTED = "accepted", "Accepted"
    REJECTED = "rejected", "Rejected"
    # Still pending or being evaluated when its campaign was cancelled or failed: never counted
    # (a result that arrives later is kept on the node as evidence; services.search).
    CANCELLED = "cancelled", "Cancelled"


# Not evaluated yet: what cancelling a campaign settles.
UNSETTLED_NODE_STATUSES = (NodeStatus.PENDING, NodeStatus.EVALUATING)


class EdgeKind(models.TextChoices):
    SEED = "seed", "Seed"
    MUTATION = "mutation", "Mutation"
    REPAIR = "repair", "Repair"
    CROSSOVER = "crossover", "Crossover"
    ALTERNATIVE = "alternative", "Alternative"


class ProblemOrigin(models.TextChoices):
    CATALOG = "catalog", "Catalog"
    UPLOAD = "upload", "Upload"


# Queue and task names: the contract both sides of Celery import (workers.contract.tasks).
CONTROL_QUEUE = contract.CONTROL_QUEUE
eval_queue = contract.eval_queue


# An evaluation whose task no worker holds after this long is dispatched again (idempotent).
EVALUATION_LEASE_S = 20
STEP_INTERVAL_S = 2.0

# The watchdog (a periodic sweep sent by every control worker, no beat process needed): a running
# campaign whose control side shows no life (no step committed, not started or resumed) for
# CAMPAIGN_STALL_S has its step restarted; after CAMPAIGN_STALL_RESTARTS restarts without one it
# fails with the reason. A healthy running campaign commits a watchdog step every
# EVALUATION_LEASE_S, even while it only waits for evaluations.
CAMPAIGN_STALL_S = 120
CAMPAIGN_STALL_RESTARTS = 3
WATCHDOG_SWEEP_S = 15.0

# Which workers consume each evaluation queue is asked of Celery this often by a control worker
# (services.queues); a queue none consumed at the last check, and none for QUEUE_WATCH_GRACE_S,
# is shown as unserved on its running campaigns. A check older than QUEUE_WATCH_STALE_S says
# nothing (no control worker is asking).
QUEUE_WATCH_S = 15.0
QUEUE_WATCH_GRACE_S = 30.0
QUEUE_WATCH_STALE_S = 90.0

# Where to start a worker for a platform's queue (README, "Workers on other machines").
EVAL_WORKER_WHERE = {
    "interpret": "on any host that can reach this portal's Redis (`make run` starts one here)",
    "cuda": (
        "on a host with an NVIDIA sm90 GPU (H100/H200) that can reach this portal's Redis and "
        "database"
    ),
}


def eval_worker_command(queue: str) -> str:
    """The command that starts a worker on an evaluation queue (README)."""
    return f".venv/bin/celery -A kernelevolve_site worker -Q {queue} --concurrency 1"


# How long the candidate page keeps a highlighted source or a diff (keyed by the texts, so they
# never go stale; the limit only bounds what the cache holds).
REVIEW_CACHE_S = 7 * 24 * 3600


class Backend(models.TextChoices):
    """The kernel language a candidate is written in (workers.cute_dsl)."""

    TRITON = "triton", "Triton"
    CUTE = "cute", "CuTe DSL"
    MIXED = "cute+triton", "CuTe DSL + Triton"


class SuiteOutcome(models.TextChoices):
    """How a benchmark-suite problem ended (the bench script's ``result``)."""

    ACCEPTED = "accepted", "accepted"
    REJECTED = "rejected", "all rejected"
    NO_TEMPLATE = "no_template", "no template"
    ERROR = "error", "error"
    CLAIMED = "claimed", "claimed, not run"
