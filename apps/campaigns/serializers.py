"""API shapes for campaigns. They shape input and output only; services do the writes."""

from rest_framework import serializers

from apps.campaigns.constants import Baseline, Platform, Policy
from apps.campaigns.forms import MAX_UPLOAD_BYTES
from apps.campaigns.models import (
    Campaign,
    Comment,
    GateResult,
    Measurement,
    Node,
    NodeReview,
    Problem,
    ReviewDecision,
    SuiteResult,
    SuiteRun,
)


class ProblemSerializer(serializers.ModelSerializer):
    class Meta:
        model = Problem
        fields = [
            "id",
            "name",
            "title",
            "family",
            "description",
            "origin",
            "workload",
            "created_at",
        ]


class ProblemCreateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=100)
    source = serializers.CharField(max_length=MAX_UPLOAD_BYTES)
    workload = serializers.JSONField(required=False, allow_null=True)
    description = serializers.CharField(required=False, allow_blank=True)


class CampaignSerializer(serializers.ModelSerializer):
    problem = serializers.SlugRelatedField(slug_field="name", read_only=True)
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    best_node = serializers.SlugRelatedField(slug_field="key", read_only=True)

    class Meta:
        model = Campaign
        fields = [
            "id", "name", "problem", "platform", "generators", "policy", "baseline",
            "incumbent_name",
            "budget_candidates", "budget_device_seconds", "budget_wall_seconds",
            "regression_tolerance", "status", "outcome", "outcome_reason", "funnel",
            "candidates_evaluated", "device_seconds", "best_node", "best_fitness", "created_by",
            "created_at", "started_at", "finished_at", "workload",
        ]  # fmt: skip


class CampaignCreateSerializer(serializers.Serializer):
    problem = serializers.SlugRelatedField(slug_field="name", queryset=Problem.objects.all())
    name = serializers.CharField(required=False, allow_blank=True, max_length=200)
    platform = serializers.ChoiceField(choices=Platform.choices, default=Platform.INTERPRET)
    generators = serializers.ListField(
        child=serializers.ChoiceField(choices=["template", "llm", "cute"]), default=["template"]
    )
    policy = serializers.ChoiceField(choices=Policy.choices, default=Policy.BEST_FIRST)
    workload = serializers.JSONField(required=False, allow_null=True)
    budget_candidates = serializers.IntegerField(min_value=1, max_value=5000, default=12)
    budget_device_seconds = serializers.FloatField(min_value=1, default=600.0)
    budget_wall_seconds = serializers.FloatField(min_value=10, default=1800.0)
    baseline = serializers.ChoiceField(choices=Baseline.choices, default=Baseline.COMPILE)
    # The kernel served today (class ModelNew): judged against with baseline "incumbent", one
    # of the peers with "best".
    incumbent_source = serializers.CharField(
        required=False, allow_blank=True, default="", trim_whitespace=False
    )
    incumbent_name = serializers.CharField(
        required=False, allow_blank=True, default="", max_length=200
    )
    regression_tolerance = serializers.FloatField(min_value=0, max_value=1, default=0.02)


class CampaignActionSerializer(serializers.Serializer):
    action = serializers.ChoiceField(choices=["pause", "resume", "cancel"])


class NodeSerializer(serializers.ModelSerializer):
    parents = serializers.SerializerMethodField()
    edge = serializers.SerializerMethodField()

    class Meta:
        model = Node
        fields = [
            "id", "key", "round", "generator", "backend", "params", "status", "failed_gate",
            "reason",
            "fitness", "fitness_ci_low", "fitness_ci_high", "device_seconds", "wall_seconds",
            "parents", "edge", "retrieved_knowledge", "evaluated_at",
        ]  # fmt: skip

    def get_parents(self, node) -> list[str]:
        return [e.parent.key for e in node.in_edges.all() if e.parent is not None]

    def get_edge(self, node) -> str | None:
        edges = list(node.in_edges.all())
        return edges[0].kind if edges else None


class GateResultSerializer(serializers.ModelSerializer):
    class Meta:
        model = GateResult
        fields = ["order", "name", "status", "reason", "rule", "evidence", "wall_seconds",
                  "device_seconds"]  # fmt: skip


class MeasurementSerializer(serializers.ModelSerializer):
    class Meta:
        model = Measurement
        exclude = ["id", "node"]


class NodeDetailSerializer(NodeSerializer):
    gates = GateResultSerializer(many=True, read_only=True)
    measurements = MeasurementSerializer(many=True, read_only=True)

    class Meta(NodeSerializer.Meta):
        fields = NodeSerializer.Meta.fields + ["source", "gates", "measurements", "report"]


class ContinueSerializer(serializers.Serializer):
    """The new campaign's budget and platform (by default those of the candidate's campaign)."""

    budget_candidates = serializers.IntegerField(min_value=1, max_value=5000, required=False)
    platform = serializers.ChoiceField(choices=Platform.choices, required=False)


class ProblemUploadSerializer(serializers.Serializer):
    """An uploaded problem: its source and a workload (JSON object) or a trace (CSV/JSON text)."""

    name = serializers.CharField(max_length=100)
    source = serializers.CharField(max_length=MAX_UPLOAD_BYTES)
    workload = serializers.JSONField(required=False, allow_null=True)
    trace = serializers.CharField(required=False, allow_blank=True, max_length=MAX_UPLOAD_BYTES)
    description = serializers.CharField(required=False, allow_blank=True, max_length=10_000)


class WorkloadPreviewSerializer(serializers.Serializer):
    source = serializers.CharField(required=False, allow_blank=True, max_length=MAX_UPLOAD_BYTES)
    workload = serializers.JSONField(required=False, allow_null=True)
    trace = serializers.CharField(required=False, allow_blank=True, max_length=MAX_UPLOAD_BYTES)


class WorkloadCaseSerializer(serializers.Serializer):
    name = serializers.CharField()
    overrides = serializers.DictField()
    dtype = serializers.CharField(allow_null=True)
    weight = serializers.FloatField()
    share = serializers.FloatField()


class WorkloadPreviewResultSerializer(serializers.Serializer):
    workload = serializers.JSONField(allow_null=True)
    cases = WorkloadCaseSerializer(many=True)
    figure = serializers.JSONField(allow_null=True)
    reference_check = serializers.JSONField(allow_null=True)


class CampaignUploadSerializer(CampaignCreateSerializer):
    """A campaign on an uploaded problem (created only when the reference runs in the sandbox)."""

    problem = None
    problem_name = serializers.CharField(max_length=100)
    problem_source = serializers.CharField(max_length=MAX_UPLOAD_BYTES)
    trace = serializers.CharField(required=False, allow_blank=True, max_length=MAX_UPLOAD_BYTES)


class GraphPageSerializer(serializers.Serializer):
    figure = serializers.JSONField(help_text="Plotly figure (data + layout) of this page's nodes")
    count = serializers.IntegerField()
    next = serializers.IntegerField(allow_null=True, help_text="cursor: pass as ?after=")


class CampaignChartsSerializer(serializers.Serializer):
    funnel = serializers.JSONField(allow_null=True)
    funnel_empty = serializers.CharField()
    fitness = serializers.JSONField(allow_null=True)
    fitness_empty = serializers.CharField()
    device = serializers.JSONField(allow_null=True)
    device_empty = serializers.CharField()


class ExportRowSerializer(serializers.Serializer):
    node = serializers.CharField()
    round = serializers.IntegerField()
    generator = serializers.CharField()
    edge = serializers.CharField()
    parent = serializers.CharField()
    status = serializers.CharField()
    failed_gate = serializers.CharField()
    fitness = serializers.FloatField(allow_null=True)
    fitness_ci_low = serializers.FloatField(allow_null=True)
    fitness_ci_high = serializers.FloatField(allow_null=True)
    device_seconds = serializers.FloatField()
    wall_seconds = serializers.FloatField()
    case = serializers.CharField()
    case_kind = serializers.CharField()
    weight = serializers.FloatField(allow_null=True)
    case_status = serializers.CharField()
    max_abs_err = serializers.FloatField(allow_null=True)
    max_rel_err = serializers.FloatField(allow_null=True)
    median_ms = serializers.FloatField(allow_null=True)
    ci_low_ms = serializers.FloatField(allow_null=True)
    ci_high_ms = serializers.FloatField(allow_null=True)


class CommentSerializer(serializers.ModelSerializer):
    """A comment; `parent` makes it a reply to that thread (on the thread's line). After a write,
    `notified` names who its @mentions reached and `unknown_mentions` the names nobody has."""

    author = serializers.SlugRelatedField(slug_field="username", read_only=True)
    node = serializers.SlugRelatedField(slug_field="key", read_only=True)
    parent = serializers.PrimaryKeyRelatedField(
        queryset=Comment.objects.all(), required=False, allow_null=True
    )
    resolved = serializers.SerializerMethodField()
    resolved_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    notified = serializers.SerializerMethodField()
    unknown_mentions = serializers.SerializerMethodField()

    class Meta:
        model = Comment
        fields = [
            "id",
            "node",
            "author",
            "parent",
            "line",
            "body",
            "created_at",
            "edited_at",
            "resolved",
            "resolved_by",
            "resolved_at",
            "notified",
            "unknown_mentions",
        ]
        read_only_fields = ["id", "node", "author", "created_at", "edited_at", "resolved_at"]
        extra_kwargs = {"body": {"max_length": 10_000}}  # as the page's CommentForm

    def get_resolved(self, comment) -> bool:
        return comment.resolved_at is not None

    def get_notified(self, comment) -> list[str]:
        result = getattr(comment, "mention_result", None)
        return result.notified if result else []

    def get_unknown_mentions(self, comment) -> list[str]:
        result = getattr(comment, "mention_result", None)
        return result.unknown if result else []


class CommentEditSerializer(serializers.Serializer):
    body = serializers.CharField(max_length=10_000)


class CommentResolveSerializer(serializers.Serializer):
    resolved = serializers.BooleanField(default=True, help_text="false reopens the thread")


class NodeReviewSerializer(serializers.ModelSerializer):
    """A user's review of a candidate: their decision (blank: marked reviewed, no decision),
    what they said, and when they decided (a new decision replaces their last one)."""

    reviewer = serializers.SlugRelatedField(slug_field="username", read_only=True)
    node = serializers.SlugRelatedField(slug_field="key", read_only=True)

    class Meta:
        model = NodeReview
        fields = ["id", "node", "reviewer", "decision", "body", "decided_at", "created_at"]


class NodeReviewDecisionSerializer(serializers.Serializer):
    """A review, as the candidate page's review box takes it: `approved` (a comment is
    optional) or `changes_requested` (the comment says what to change, so it is required); no
    decision only marks the candidate reviewed, and then takes no comment."""

    decision = serializers.ChoiceField(
        choices=ReviewDecision.choices,
        allow_blank=True,
        default="",
        error_messages={
            "invalid_choice": (
                f'unknown decision "{{input}}": one of {", ".join(ReviewDecision.values)}, '
                "or none to mark the candidate reviewed"
            )
        },
    )
    body = serializers.CharField(allow_blank=True, default="")

    def validate(self, data: dict) -> dict:
        if data["body"].strip() and not data["decision"]:
            # The page's buttons always send a decision with the comment; alone it would be
            # dropped, so it is refused.
            raise serializers.ValidationError(
                {"body": "a comment goes with a decision (approved or changes_requested)"}
            )
        return data


class CompareCaseSerializer(serializers.Serializer):
    case = serializers.CharField()
    left_median_ms = serializers.FloatField(allow_null=True)
    right_median_ms = serializers.FloatField(allow_null=True)


class CompareSerializer(serializers.Serializer):
    left = NodeSerializer()
    right = NodeSerializer()
    unified_diff = serializers.CharField()
    added = serializers.IntegerField()
    removed = serializers.IntegerField()
    cases = CompareCaseSerializer(many=True)


class MentionSerializer(serializers.Serializer):
    campaign = serializers.IntegerField(source="comment.node.campaign_id")
    node = serializers.CharField(source="comment.node.key")
    author = serializers.CharField(source="comment.author.username")
    line = serializers.IntegerField(source="comment.line", allow_null=True)
    body = serializers.CharField(source="comment.body")
    created_at = serializers.DateTimeField(source="comment.created_at")


class InboxApprovalSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    digest = serializers.CharField()
    stage = serializers.CharField()
    operator = serializers.CharField(source="region.operator")
    platform = serializers.CharField(source="region.platform")
    campaign = serializers.IntegerField(source="campaign_id")


class InboxAlarmSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    kind = serializers.CharField()
    operator = serializers.CharField()
    platform = serializers.CharField()
    message = serializers.CharField()
    artifact = serializers.IntegerField(source="artifact_id", allow_null=True)
    created_at = serializers.DateTimeField()


class InboxSerializer(serializers.Serializer):
    to_review = CampaignSerializer(many=True)
    mentions = MentionSerializer(many=True)
    to_approve = InboxApprovalSerializer(many=True)
    alarms = InboxAlarmSerializer(many=True)


class PortfolioRowSerializer(serializers.Serializer):
    family = serializers.CharField()
    platform = serializers.CharField()
    campaigns = serializers.IntegerField()
    improved = serializers.IntegerField()
    no_safe_improvement = serializers.IntegerField()
    running = serializers.IntegerField()
    evaluated = serializers.IntegerField()
    device_hours = serializers.FloatField()
    device_seconds_per_improvement = serializers.FloatField(allow_null=True)
    funnel = serializers.DictField(child=serializers.IntegerField())


class SuiteResultSerializer(serializers.ModelSerializer):
    class Meta:
        model = SuiteResult
        fields = [
            "number",
            "problem",
            "family",
            "fits",
            "outcome",
            "reason",
            "evaluated",
            "accepted",
            "best_speedup",
            "candidate_us",
            "compile_us",
            "wall_s",
        ]


class SuiteRunSerializer(serializers.ModelSerializer):
    """A suite run with its counts (from `suite_run_list`'s annotations)."""

    imported_by = serializers.CharField(source="imported_by.username", default=None)
    problems = serializers.IntegerField(read_only=True)
    claimed = serializers.IntegerField(read_only=True)
    accepted = serializers.IntegerField(read_only=True)

    class Meta:
        model = SuiteRun
        fields = [
            "id",
            "name",
            "suite",
            "platform",
            "baseline",
            "started_at",
            "command",
            "kernelbench_commit",
            "fingerprint",
            "imported_by",
            "created_at",
            "problems",
            "claimed",
            "accepted",
        ]


class SuiteRunDetailSerializer(SuiteRunSerializer):
    results = SuiteResultSerializer(many=True, read_only=True)

    class Meta(SuiteRunSerializer.Meta):
        fields = [*SuiteRunSerializer.Meta.fields, "results"]


class SuiteRunImportSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=200)
    document = serializers.JSONField(
        help_text="The JSON that scripts/bench_kernelbench.py --out wrote: {meta, rows}."
    )
