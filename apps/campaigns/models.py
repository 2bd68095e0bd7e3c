"""Models of campaigns: problems, campaigns, the search graph, gate results and measurements."""

from django.conf import settings
from django.db import models

from apps.campaigns.constants import (
    Backend,
    Baseline,
    CampaignStatus,
    EdgeKind,
    NodeStatus,
    Outcome,
    Platform,
    Policy,
    ProblemOrigin,
    SuiteOutcome,
)


class Problem(models.Model):
    """A reference implementation in the KernelBench format and its production workload."""

    name = models.SlugField(max_length=100, unique=True)
    title = models.CharField(max_length=200)
    family = models.CharField(max_length=50, blank=True)
    description = models.TextField(blank=True)
    source = models.TextField()
    workload = models.JSONField(null=True, blank=True)
    smoke_workload = models.JSONField(null=True, blank=True)
    origin = models.CharField(max_length=20, choices=ProblemOrigin, default=ProblemOrigin.UPLOAD)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Campaign(models.Model):
    """A search: problem + workload + platform + generators + budget + acceptance rule."""

    name = models.CharField(max_length=200)
    problem = models.ForeignKey(Problem, on_delete=models.PROTECT, related_name="campaigns")
    workload = models.JSONField(null=True, blank=True)
    platform = models.CharField(max_length=20, choices=Platform, default=Platform.INTERPRET)
    generators = models.JSONField(default=list)
    policy = models.CharField(max_length=20, choices=Policy, default=Policy.BEST_FIRST)
    budget_candidates = models.PositiveIntegerField(default=12)
    budget_device_seconds = models.FloatField(default=600.0)
    budget_wall_seconds = models.FloatField(default=1800.0)
    baseline = models.CharField(max_length=20, choices=Baseline, default=Baseline.COMPILE)
    # The kernel served today (candidate format), timed beside every candidate when given: the
    # judge with the "incumbent" baseline, one of the peers with "best".
    incumbent_source = models.TextField(blank=True, default="")
    incumbent_name = models.CharField(max_length=200, blank=True, default="")
    regression_tolerance = models.FloatField(default=0.02)
    min_speedup = models.FloatField(default=1.0)
    status = models.CharField(
        max_length=20, choices=CampaignStatus, default=CampaignStatus.QUEUED, db_index=True
    )
    outcome = models.CharField(max_length=30, choices=Outcome, blank=True)
    outcome_reason = models.TextField(blank=True)
    engine_state = models.JSONField(default=dict, blank=True)
    funnel = models.JSONField(default=dict, blank=True)
    warm_start_node = models.ForeignKey(
        "Node", null=True, blank=True, on_delete=models.SET_NULL, related_name="continuations"
    )
    best_node = models.ForeignKey(
        "Node", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    best_fitness = models.FloatField(null=True, blank=True)
    candidates_evaluated = models.PositiveIntegerField(default=0)
    device_seconds = models.FloatField(default=0.0)
    # When the next watchdog step is due (re-dispatch of evaluations no worker holds).
    watchdog_at = models.DateTimeField(null=True, blank=True)
    # The last sign of life of its control side (started, resumed or a step committed), the
    # restarts the stall watchdog made since, and the last error a step failed with.
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    stall_restarts = models.PositiveSmallIntegerField(default=0)
    step_error = models.TextField(blank=True)
    # Bumped with every live progress event (services.events.campaign_changed), under the row's
    # lock: the page keeps the newest state it was shown, whichever way it came (a button's
    # answer or the websocket) and in whatever order they arrive.
    revision = models.PositiveIntegerField(default=0)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="campaigns"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.name

    @property
    def campaign_actions(self) -> list[tuple[str, str]]:
        """The control actions its status allows, as (action, label)."""
        actions = {
            CampaignStatus.RUNNING: [("pause", "Pause"), ("cancel", "Cancel")],
            CampaignStatus.PAUSED: [("resume", "Resume"), ("cancel", "Cancel")],
            CampaignStatus.QUEUED: [("cancel", "Cancel")],
        }
        return actions.get(self.status, [])

    @property
    def correct_untimed(self) -> bool:
        """An interpret campaign that found correct candidates: the interpreter times nothing,
        so its "no safe improvement" means correctness established, not timed (no failure)."""
        return self.platform == Platform.INTERPRET and self.outcome == Outcome.NO_SAFE_IMPROVEMENT

    @property
    def outcome_label(self) -> str:
        """The outcome as a reader should take it (the list's and the page's badge)."""
        if self.correct_untimed:
            return "Correctness established, not timed"
        return self.get_outcome_display() if self.outcome else ""


class Node(models.Model):
    """A candidate kernel in a campaign's search graph, with its measured state.

    The rows (with their edges) are the graph's one copy: the search engine reads and writes
    them through `apps.campaigns.graph_store.RowGraphStore`; the campaign's `engine_state` keeps
    only the search's scalars."""

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="nodes")
    key = models.CharField(max_length=64)
    round = models.PositiveIntegerField(default=0)
    generator = models.CharField(max_length=50)
    params = models.JSONField(default=dict, blank=True)
    source = models.TextField()
    # The kernel language its source declares (workers.cute_dsl.declared_backend).
    backend = models.CharField(max_length=16, choices=Backend, default=Backend.TRITON)
    status = models.CharField(
        max_length=20, choices=NodeStatus, default=NodeStatus.PENDING, db_index=True
    )
    failed_gate = models.CharField(max_length=20, blank=True)
    reason = models.TextField(blank=True)
    fitness = models.FloatField(null=True, blank=True)
    fitness_ci_low = models.FloatField(null=True, blank=True)
    fitness_ci_high = models.FloatField(null=True, blank=True)
    device_seconds = models.FloatField(default=0.0)
    wall_seconds = models.FloatField(default=0.0)
    report = models.JSONField(null=True, blank=True)
    retrieved_knowledge = models.JSONField(default=list, blank=True)
    # What the search keeps of a node besides the columns above (workers.search.graph.Node):
    # the generator's note, the sub-population of the islands policy and where the node
    # migrated, the fitness as its gate reported it (per-case speedups, worst case: what
    # per-case crossover reads), the failing gate's evidence a repair child is shown (capped),
    # and the hash of the source (duplicates are dropped).
    note = models.TextField(blank=True)
    island = models.PositiveSmallIntegerField(default=0)
    migrated_to = models.JSONField(default=list, blank=True)
    fitness_detail = models.JSONField(null=True, blank=True)
    feedback = models.TextField(blank=True)
    source_hash = models.CharField(max_length=64, blank=True)
    evaluation_key = models.CharField(max_length=128, blank=True)
    task_id = models.CharField(max_length=64, blank=True)
    dispatch_count = models.PositiveIntegerField(default=0)
    dispatched_at = models.DateTimeField(null=True, blank=True)
    evaluated_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["campaign", "id"]
        constraints = [
            models.UniqueConstraint(fields=["campaign", "key"], name="node_key_unique_in_campaign")
        ]

    def __str__(self) -> str:
        return f"{self.campaign_id}:{self.key}"


class Edge(models.Model):
    """How a node came to be: a typed edge from a parent node (none for seeds)."""

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="edges")
    parent = models.ForeignKey(Node, null=True, on_delete=models.CASCADE, related_name="out_edges")
    child = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="in_edges")
    kind = models.CharField(max_length=20, choices=EdgeKind)

    def __str__(self) -> str:
        return f"{self.parent_id}-{self.kind}->{self.child_id}"


class GateResult(models.Model):
    """One gate's verdict on a node, with its evidence."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="gates")
    order = models.PositiveSmallIntegerField()
    name = models.CharField(max_length=20)
    status = models.CharField(max_length=20)
    reason = models.TextField(blank=True)
    rule = models.CharField(max_length=80, blank=True)
    evidence = models.JSONField(default=dict, blank=True)
    wall_seconds = models.FloatField(default=0.0)
    device_seconds = models.FloatField(default=0.0)

    class Meta:
        ordering = ["node", "order"]

    def __str__(self) -> str:
        return f"{self.name}: {self.status}"


class Measurement(models.Model):
    """One case of a node's evaluation: its errors, its timing and the baselines' timings."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="measurements")
    case = models.CharField(max_length=200)
    kind = models.CharField(max_length=20)
    weight = models.FloatField(default=1.0)
    status = models.CharField(max_length=20)
    skip_reason = models.TextField(blank=True)
    max_abs_err = models.FloatField(null=True, blank=True)
    max_rel_err = models.FloatField(null=True, blank=True)
    median_ms = models.FloatField(null=True, blank=True)
    p10_ms = models.FloatField(null=True, blank=True)
    p90_ms = models.FloatField(null=True, blank=True)
    ci_low_ms = models.FloatField(null=True, blank=True)
    ci_high_ms = models.FloatField(null=True, blank=True)
    samples_ms = models.JSONField(default=list, blank=True)
    baselines = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["node", "id"]

    def __str__(self) -> str:
        return f"{self.node_id}:{self.case}"


class Comment(models.Model):
    """A reviewer's note on a candidate, optionally on one line of its source. A comment without
    a parent starts a thread (which can be resolved); a reply belongs to one thread, on its line."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="comments")
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="candidate_comments"
    )
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.CASCADE, related_name="replies"
    )
    line = models.PositiveIntegerField(null=True, blank=True)
    body = models.TextField()
    mentions = models.ManyToManyField(
        settings.AUTH_USER_MODEL, through="Mention", related_name="mentioned_in", blank=True
    )
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    edited_at = models.DateTimeField(null=True, blank=True)
    # A thread (a comment without parent) is resolved by someone, or open (both null).
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )

    class Meta:
        ordering = ["node", "created_at", "id"]

    def __str__(self) -> str:
        where = f" line {self.line}" if self.line else ""
        return f"{self.author_id} on {self.node_id}{where}"


class Mention(models.Model):
    """A user named with @username in a comment; it waits in their inbox until read."""

    comment = models.ForeignKey(Comment, on_delete=models.CASCADE)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    read_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["comment", "user"], name="mention_once_per_comment")
        ]

    def __str__(self) -> str:
        return f"@{self.user_id} in {self.comment_id}"


class ReviewDecision(models.TextChoices):
    """A reviewer's verdict on an accepted candidate (blank: marked reviewed, no verdict)."""

    APPROVED = "approved", "Approved"
    CHANGES_REQUESTED = "changes_requested", "Changes requested"


class NodeReview(models.Model):
    """A user's review of an accepted candidate: their current decision (approve, or request
    changes with what to change), when they made it; any review takes it out of their inbox.
    One row per reviewer and candidate: a new decision replaces the last one."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="reviews")
    reviewer = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="node_reviews"
    )
    decision = models.CharField(max_length=20, choices=ReviewDecision, blank=True)
    body = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["node", "reviewer"], name="review_once_per_user")
        ]

    def __str__(self) -> str:
        return f"{self.reviewer_id} reviewed {self.node_id}"


class EvalQueueWatch(models.Model):
    """Which workers consume an evaluation queue, as a control worker last asked Celery (every
    QUEUE_WATCH_S, outside any campaign lock), so a campaign page can say that nobody serves its
    queue, since when, and what to start."""

    queue = models.CharField(max_length=100, unique=True)
    # Worker names consuming the queue at the last check (empty: none).
    workers = models.JSONField(default=list, blank=True)
    checked_at = models.DateTimeField()
    # The last check at which some worker consumed it; null if none ever has since checks began.
    last_seen_at = models.DateTimeField(null=True, blank=True)
    # The first check of the current run of checks at which none did.
    unserved_since = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.queue}: {', '.join(self.workers) or 'no worker'}"


class SuiteRun(models.Model):
    """An imported run of a benchmark suite (KernelBench level 1 through the template
    generator and a small campaign per problem, as ``scripts/bench_kernelbench.py`` writes it):
    where and how it ran; one SuiteResult per problem."""

    name = models.CharField(max_length=200, unique=True)
    suite = models.CharField(max_length=100, default="KernelBench level 1")
    platform = models.CharField(max_length=20)
    baseline = models.CharField(max_length=20, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    command = models.TextField(blank=True)
    kernelbench_commit = models.CharField(max_length=200, blank=True)
    # The device and software the problems ran on (the first row's fingerprint).
    fingerprint = models.JSONField(default=dict, blank=True)
    imported_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return self.name


class SuiteResult(models.Model):
    """One problem of a suite run: the family a template claimed it for (or why none did), how
    its campaign ended, and on cuda the best speedup over the baseline."""

    run = models.ForeignKey(SuiteRun, on_delete=models.CASCADE, related_name="results")
    number = models.PositiveIntegerField()
    problem = models.CharField(max_length=200)
    family = models.CharField(max_length=50, blank=True)
    fits = models.BooleanField(default=False)
    outcome = models.CharField(max_length=20, choices=SuiteOutcome)
    # One line: why no template fits, the first candidate's failure, or the crash or timeout.
    reason = models.TextField(blank=True)
    evaluated = models.PositiveIntegerField(default=0)
    accepted = models.PositiveIntegerField(default=0)
    best_speedup = models.FloatField(null=True, blank=True)
    candidate_us = models.FloatField(null=True, blank=True)
    compile_us = models.FloatField(null=True, blank=True)
    wall_s = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["number", "problem"]
        constraints = [
            models.UniqueConstraint(fields=["run", "problem"], name="suite_problem_once_per_run")
        ]

    def __str__(self) -> str:
        return f"{self.problem}: {self.outcome}"
