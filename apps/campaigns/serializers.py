"""API shapes for campaigns. They shape input and output only; services do the writes."""

from rest_framework import serializers

from apps.campaigns.constants import Baseline, Platform, Policy
from apps.campaigns.models import Campaign, GateResult, Measurement, Node, Problem


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
    source = serializers.CharField()
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
        child=serializers.ChoiceField(choices=["template", "llm"]), default=["template"]
    )
    policy = serializers.ChoiceField(choices=Policy.choices, default=Policy.BEST_FIRST)
    workload = serializers.JSONField(required=False, allow_null=True)
    budget_candidates = serializers.IntegerField(min_value=1, max_value=5000, default=12)
    budget_device_seconds = serializers.FloatField(min_value=1, default=600.0)
    budget_wall_seconds = serializers.FloatField(min_value=10, default=1800.0)
    baseline = serializers.ChoiceField(choices=Baseline.choices, default=Baseline.EAGER)
    regression_tolerance = serializers.FloatField(min_value=0, max_value=1, default=0.02)


class CampaignActionSerializer(serializers.Serializer):
    action = serializers.ChoiceField(choices=["pause", "resume", "cancel"])


class NodeSerializer(serializers.ModelSerializer):
    parents = serializers.SerializerMethodField()
    edge = serializers.SerializerMethodField()

    class Meta:
        model = Node
        fields = [
            "id", "key", "round", "generator", "params", "status", "failed_gate", "reason",
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
    budget_candidates = serializers.IntegerField(min_value=1, max_value=5000, required=False)
