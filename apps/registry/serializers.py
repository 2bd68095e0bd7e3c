"""Shapes of registry input and output for the REST API (no logic: services decide)."""

from rest_framework import serializers

from apps.campaigns.constants import Platform
from apps.registry.constants import LATENCY_SAMPLES_KEPT, Path
from apps.registry.models import Alarm, Approval, Artifact, Event, Region

# Bounds of API input, so a malformed request is a 400 naming the field and never reaches a
# database column (PositiveIntegerField, a BigAutoField lookup) or a reader (.get() on what must
# be an object).
PG_INT_MAX = 2**31 - 1
PG_BIGINT_MAX = 2**63 - 1
DIGEST_MAX_LENGTH = 64  # sha256 hex
REASON_MAX_LENGTH = 2000
FINGERPRINT_MAX_KEYS = 64
FINGERPRINT_VALUE_MAX_LENGTH = 200


class RegionSerializer(serializers.ModelSerializer):
    default_artifact = serializers.SlugRelatedField(slug_field="digest", read_only=True)

    class Meta:
        model = Region
        fields = [
            "id", "operator", "family", "platform", "scope", "label", "default_artifact",
            "required_approvals", "shadow_min_samples", "shadow_sample_rate",
            "canary_min_samples", "latency_tolerance", "version",
        ]  # fmt: skip


class ApprovalSerializer(serializers.ModelSerializer):
    user = serializers.CharField(source="user.username")

    class Meta:
        model = Approval
        fields = ["stage", "user", "digest", "reason", "created_at"]


class GateSerializer(serializers.Serializer):
    gate = serializers.CharField()
    label = serializers.CharField()
    status = serializers.CharField()
    reason = serializers.CharField()
    evidence = serializers.JSONField()


class ArtifactSerializer(serializers.ModelSerializer):
    created_by = serializers.CharField(source="created_by.username", default=None)

    class Meta:
        model = Artifact
        fields = [
            "id", "digest", "region", "campaign", "node", "stage", "stage_entered_at",
            "stage_reason", "canary_percent", "key_id", "signature", "body", "created_by",
            "created_at", "supersedes",
        ]  # fmt: skip


class ArtifactDetailSerializer(ArtifactSerializer):
    gates = GateSerializer(many=True, read_only=True)
    approvals = ApprovalSerializer(many=True, read_only=True)

    class Meta(ArtifactSerializer.Meta):
        fields = [*ArtifactSerializer.Meta.fields, "gates", "approvals"]


class ArtifactCreateSerializer(serializers.Serializer):
    node = serializers.IntegerField(
        min_value=1, max_value=PG_BIGINT_MAX, help_text="id of an accepted campaign node"
    )
    dtypes = serializers.ListField(child=serializers.CharField(), required=False)
    constants = serializers.DictField(
        child=serializers.ListField(child=serializers.IntegerField(), min_length=2, max_length=2),
        required=False,
        help_text="narrow constant ranges: {name: [lo, hi]}",
    )


class NarrowSerializer(serializers.Serializer):
    dtypes = serializers.ListField(child=serializers.CharField(), required=False)
    constants = serializers.DictField(
        child=serializers.ListField(child=serializers.IntegerField(), min_length=2, max_length=2),
        required=False,
    )


class ReasonSerializer(serializers.Serializer):
    reason = serializers.CharField(required=False, allow_blank=True, default="")


class PromoteSerializer(ReasonSerializer):
    canary_percent = serializers.FloatField(required=False, min_value=0.01, max_value=100)


class RollbackSerializer(serializers.Serializer):
    reason = serializers.CharField()
    to_artifact = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=PG_BIGINT_MAX,
        help_text="an earlier default of this region (default: the previous one)",
    )
    to_reference = serializers.BooleanField(
        required=False, default=False, help_text="serve the PyTorch reference"
    )


class EventSerializer(serializers.ModelSerializer):
    class Meta:
        model = Event
        fields = [
            "id", "kind", "artifact", "actor_name", "from_stage", "to_stage", "from_artifact",
            "to_artifact", "reason", "evidence", "created_at",
        ]  # fmt: skip


class AlarmSerializer(serializers.ModelSerializer):
    class Meta:
        model = Alarm
        fields = [
            "id", "kind", "operator", "platform", "region", "artifact", "message", "evidence",
            "created_at", "resolved_at",
        ]  # fmt: skip


class PublicKeySerializer(serializers.Serializer):
    algorithm = serializers.CharField()
    key_id = serializers.CharField()
    public_key = serializers.CharField(help_text="raw Ed25519 public key, base64")
    public_key_pem = serializers.CharField()


class ManifestSerializer(serializers.Serializer):
    body = serializers.JSONField()
    signature = serializers.CharField()
    key_id = serializers.CharField()


class FingerprintField(serializers.JSONField):
    """A client's environment: an object of short names to scalars (strings, numbers, null)."""

    def to_internal_value(self, data):
        data = super().to_internal_value(data)
        if not isinstance(data, dict):
            raise serializers.ValidationError("must be an object of name: value")
        if len(data) > FINGERPRINT_MAX_KEYS:
            raise serializers.ValidationError(f"at most {FINGERPRINT_MAX_KEYS} entries")
        for key, value in data.items():
            if len(key) > 64:
                raise serializers.ValidationError(f"{key[:64]}…: a name of at most 64 characters")
            if value is not None and not isinstance(value, str | int | float | bool):
                raise serializers.ValidationError(
                    f"{key}: must be a string, number, boolean or null"
                )
            if isinstance(value, str) and len(value) > FINGERPRINT_VALUE_MAX_LENGTH:
                raise serializers.ValidationError(
                    f"{key}: at most {FINGERPRINT_VALUE_MAX_LENGTH} characters"
                )
            if isinstance(value, int) and abs(value) > PG_BIGINT_MAX:
                raise serializers.ValidationError(f"{key}: out of range")
        return data


class _MismatchCase(serializers.JSONField):
    """One shadow mismatch as the client reports it: an object whose case and reason are text."""

    def to_internal_value(self, data):
        data = super().to_internal_value(data)
        if not isinstance(data, dict):
            raise serializers.ValidationError("must be an object {case, reason, ...}")
        for key in ("case", "reason"):
            if key in data and not isinstance(data[key], str):
                raise serializers.ValidationError(f"{key}: must be a string")
            if len(data.get(key) or "") > REASON_MAX_LENGTH:
                raise serializers.ValidationError(f"{key}: at most {REASON_MAX_LENGTH} characters")
        return data


class _Count(serializers.Serializer):
    operator = serializers.CharField(max_length=100)
    region = serializers.IntegerField(
        allow_null=True, required=False, min_value=1, max_value=PG_BIGINT_MAX
    )
    dtype = serializers.CharField(allow_null=True, allow_blank=True, required=False, max_length=20)
    path = serializers.ChoiceField(choices=Path.choices)
    artifact = serializers.CharField(allow_null=True, required=False, max_length=DIGEST_MAX_LENGTH)
    calls = serializers.IntegerField(min_value=0, max_value=PG_INT_MAX)
    errors = serializers.IntegerField(min_value=0, max_value=PG_INT_MAX, required=False, default=0)
    latency_ms = serializers.ListField(
        child=serializers.FloatField(), required=False, max_length=4 * LATENCY_SAMPLES_KEPT
    )


class _Shadow(serializers.Serializer):
    artifact = serializers.CharField(max_length=DIGEST_MAX_LENGTH)
    region = serializers.IntegerField(
        allow_null=True, required=False, min_value=1, max_value=PG_BIGINT_MAX
    )
    samples = serializers.IntegerField(min_value=0, max_value=PG_INT_MAX)
    mismatches = serializers.IntegerField(min_value=0, max_value=PG_INT_MAX)
    cases = serializers.ListField(child=_MismatchCase(), required=False, max_length=100)

    def validate(self, attrs):
        if attrs["mismatches"] > attrs["samples"]:
            raise serializers.ValidationError({"mismatches": "more mismatches than samples"})
        return attrs


class _Refused(serializers.Serializer):
    artifact = serializers.CharField(max_length=DIGEST_MAX_LENGTH)
    reason = serializers.CharField(max_length=REASON_MAX_LENGTH)


class RuntimeReportSerializer(serializers.Serializer):
    client = serializers.CharField(max_length=200)
    platform = serializers.ChoiceField(choices=Platform.choices)
    manifest_version = serializers.IntegerField(
        allow_null=True, required=False, min_value=0, max_value=PG_INT_MAX
    )
    fingerprint = FingerprintField(required=False)
    window_start = serializers.FloatField(required=False)
    window_end = serializers.FloatField(required=False)
    counts = _Count(many=True, required=False, default=list, max_length=10_000)
    shadow = _Shadow(many=True, required=False, default=list, max_length=1_000)
    refused = _Refused(many=True, required=False, default=list, max_length=1_000)


class RuntimeReportAnswerSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    received_at = serializers.DateTimeField()


class TrafficSerializer(serializers.Serializer):
    operator = serializers.CharField()
    problem_source = serializers.CharField()
    workload = serializers.JSONField(allow_null=True)
