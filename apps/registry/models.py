"""Models of the registry: regions, signed artifacts, approvals, append-only events, runtime
reports (counts, shadow results), gate checks and alarms.

Artifacts are frozen: their signed body never changes (a changed artifact is a new artifact),
only their stage does. Events are append-only: the ORM refuses to update or delete them, and a
database trigger refuses updates as well (deletes too on PostgreSQL; see the migration).
"""

from django.conf import settings
from django.db import models

from apps.campaigns.constants import Platform
from apps.registry.constants import (
    CANARY_MIN_SAMPLES,
    CANARY_PERCENT,
    LATENCY_TOLERANCE,
    SHADOW_MIN_SAMPLES,
    SHADOW_SAMPLE_RATE,
    AlarmKind,
    EventKind,
    GateStatus,
    Path,
    Stage,
)


class Region(models.Model):
    """Where kernels serve: (operator, platform, scope). Its default is a pointer to an artifact."""

    operator = models.CharField(max_length=100, db_index=True)
    family = models.CharField(max_length=50, blank=True)
    platform = models.CharField(max_length=20, choices=Platform)
    problem = models.ForeignKey(
        "campaigns.Problem", null=True, on_delete=models.PROTECT, related_name="+"
    )
    scope = models.JSONField()
    scope_key = models.CharField(max_length=64)
    label = models.CharField(max_length=300)
    default_artifact = models.ForeignKey(
        "Artifact", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    required_approvals = models.JSONField(default=dict, blank=True)
    shadow_min_samples = models.PositiveIntegerField(default=SHADOW_MIN_SAMPLES)
    shadow_sample_rate = models.FloatField(default=SHADOW_SAMPLE_RATE)
    canary_min_samples = models.PositiveIntegerField(default=CANARY_MIN_SAMPLES)
    latency_tolerance = models.FloatField(default=LATENCY_TOLERANCE)
    # Bumped by every transition; the manifest's version and a guard against lost updates.
    version = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["operator", "platform", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["operator", "platform", "scope_key"], name="region_unique_scope"
            )
        ]

    def __str__(self) -> str:
        return f"{self.operator}/{self.platform} [{self.label}]"


class ArtifactImmutable(Exception):
    """Raised when code tries to change a frozen artifact's signed content."""


MUTABLE_ARTIFACT_FIELDS = {"stage", "stage_entered_at", "stage_reason", "canary_percent"}


class Artifact(models.Model):
    """An accepted candidate frozen and signed: source, IR, binary hashes, toolchain, scope,
    evidence. ``body`` is exactly what ``signature`` signs and ``digest`` hashes."""

    region = models.ForeignKey(Region, on_delete=models.PROTECT, related_name="artifacts")
    campaign = models.ForeignKey(
        "campaigns.Campaign", on_delete=models.PROTECT, related_name="artifacts"
    )
    node = models.ForeignKey("campaigns.Node", on_delete=models.PROTECT, related_name="artifacts")
    digest = models.CharField(max_length=64, unique=True)
    body = models.JSONField()
    signature = models.TextField()
    key_id = models.CharField(max_length=16)
    ir = models.JSONField(default=dict, blank=True)
    supersedes = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="superseded_by"
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    stage = models.CharField(max_length=20, choices=Stage, default=Stage.CANDIDATE, db_index=True)
    stage_entered_at = models.DateTimeField(auto_now_add=True)
    stage_reason = models.TextField(blank=True)
    canary_percent = models.FloatField(default=CANARY_PERCENT)

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"#{self.pk} {self.body.get('operator')} {self.digest[:12]}"

    def save(self, *args, **kwargs):
        update_fields = kwargs.get("update_fields")
        if self.pk and (update_fields is None or set(update_fields) - MUTABLE_ARTIFACT_FIELDS):
            raise ArtifactImmutable(
                "artifacts are frozen: a changed artifact is a new artifact (artifact_narrow)"
            )
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise ArtifactImmutable("artifacts are kept for their history; retire or abort instead")

    @property
    def short(self) -> str:
        return self.digest[:12]

    @property
    def source(self) -> str:
        return self.body.get("source", "")

    @property
    def scope(self) -> dict:
        return self.body.get("scope", {})


class Approval(models.Model):
    """A reviewer's approval of one artifact for one target stage, bound to the artifact's
    digest: if the content it approved is not the content now, the approval has lapsed."""

    artifact = models.ForeignKey(Artifact, on_delete=models.PROTECT, related_name="approvals")
    stage = models.CharField(max_length=20, choices=Stage)
    digest = models.CharField(max_length=64)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    reason = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["artifact", "stage", "user"], name="approval_once_per_stage"
            )
        ]

    def __str__(self) -> str:
        return f"{self.user_id} approves #{self.artifact_id} -> {self.stage}"


class AppendOnly(Exception):
    """Raised when code tries to change or remove a history event."""


class EventQuerySet(models.QuerySet):
    def update(self, **kwargs):
        raise AppendOnly("registry events are append-only")

    def delete(self):
        raise AppendOnly("registry events are append-only")

    def bulk_update(self, *args, **kwargs):
        raise AppendOnly("registry events are append-only")


class Event(models.Model):
    """One transition in a region's history: who, when, why, from -> to, evidence. Append-only."""

    region = models.ForeignKey(Region, on_delete=models.PROTECT, related_name="events")
    artifact = models.ForeignKey(
        Artifact, null=True, blank=True, on_delete=models.PROTECT, related_name="events"
    )
    kind = models.CharField(max_length=20, choices=EventKind)
    # No FK constraint: deleting a user must not rewrite history; the name is kept.
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        related_name="+",
    )
    actor_name = models.CharField(max_length=150)
    from_stage = models.CharField(max_length=20, blank=True)
    to_stage = models.CharField(max_length=20, blank=True)
    from_artifact = models.CharField(max_length=64, blank=True)
    to_artifact = models.CharField(max_length=64, blank=True)
    reason = models.TextField(blank=True)
    evidence = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    objects = EventQuerySet.as_manager()

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"{self.kind} {self.from_stage}->{self.to_stage} by {self.actor_name}"

    def save(self, *args, **kwargs):
        if self.pk is not None or not self._state.adding:
            raise AppendOnly("registry events are append-only")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise AppendOnly("registry events are append-only")


class GateCheck(models.Model):
    """The stored outcome of a gate that ran work: correctness re-run under another toolchain."""

    artifact = models.ForeignKey(Artifact, on_delete=models.PROTECT, related_name="checks")
    gate = models.CharField(max_length=20)
    toolchain_key = models.CharField(max_length=64)
    status = models.CharField(max_length=20, choices=GateStatus)
    reason = models.TextField()
    evidence = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # The re-run is a task on the platform's evaluation queue (a cuda one needs a GPU host):
    # when it was last sent, how often, and when its result came back.
    queue = models.CharField(max_length=40, blank=True)
    dispatched_at = models.DateTimeField(null=True, blank=True)
    dispatch_count = models.PositiveIntegerField(default=0)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"#{self.artifact_id} {self.gate}: {self.status}"


class RuntimeReport(models.Model):
    """One batch of metrics a dispatch client posted (its window, toolchain, refusals)."""

    client = models.CharField(max_length=200)
    platform = models.CharField(max_length=20, choices=Platform)
    manifest_version = models.PositiveIntegerField(null=True, blank=True)
    fingerprint = models.JSONField(default=dict, blank=True)
    refused = models.JSONField(default=list, blank=True)
    window_start = models.DateTimeField()
    window_end = models.DateTimeField()
    reported_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    received_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"report {self.pk} from {self.client}"


class RuntimeCount(models.Model):
    """Calls of one report in one cell: operator, region, dtype, serving path, artifact."""

    report = models.ForeignKey(RuntimeReport, on_delete=models.CASCADE, related_name="counts")
    operator = models.CharField(max_length=100, db_index=True)
    platform = models.CharField(max_length=20, choices=Platform)
    region = models.ForeignKey(Region, null=True, on_delete=models.PROTECT, related_name="counts")
    artifact = models.ForeignKey(
        Artifact, null=True, on_delete=models.PROTECT, related_name="counts"
    )
    dtype = models.CharField(max_length=20, blank=True)
    path = models.CharField(max_length=20, choices=Path)
    calls = models.PositiveIntegerField()
    errors = models.PositiveIntegerField(default=0)
    latency_ms = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.operator}/{self.path}: {self.calls}"


class ShadowResult(models.Model):
    """Shadow comparisons of one report for one artifact, with the cases that mismatched."""

    report = models.ForeignKey(RuntimeReport, on_delete=models.CASCADE, related_name="shadows")
    artifact = models.ForeignKey(Artifact, on_delete=models.PROTECT, related_name="shadows")
    region = models.ForeignKey(Region, on_delete=models.PROTECT, related_name="shadows")
    samples = models.PositiveIntegerField()
    mismatches = models.PositiveIntegerField()
    cases = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"#{self.artifact_id}: {self.mismatches}/{self.samples}"


class Alarm(models.Model):
    """Something a reviewer must look at; open until someone acknowledges it."""

    kind = models.CharField(max_length=30, choices=AlarmKind)
    operator = models.CharField(max_length=100, blank=True)
    platform = models.CharField(max_length=20, blank=True)
    region = models.ForeignKey(
        Region, null=True, blank=True, on_delete=models.PROTECT, related_name="alarms"
    )
    artifact = models.ForeignKey(
        Artifact, null=True, blank=True, on_delete=models.PROTECT, related_name="alarms"
    )
    message = models.TextField()
    evidence = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"{self.kind}: {self.message[:60]}"
