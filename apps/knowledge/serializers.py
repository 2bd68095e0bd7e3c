"""Serializers for the knowledge API: they shape input and output only."""

import json

from django.contrib.auth.models import Group
from rest_framework import serializers

from apps.knowledge.constants import (
    CURATION_ACTIONS,
    LABEL_MAX_LENGTH,
    MODE_KIND_BOOST,
    RETRIEVAL_FEEDBACK_MAX_CHARS,
    RETRIEVAL_SOURCE_MAX_LENGTH,
    SEARCH_TEXT_MAX_LENGTH,
    EntryKind,
    EntryOrigin,
    EntryStatus,
    Visibility,
)
from apps.knowledge.models import Entry, EntryVersion

ID_MAX = 2**63 - 1  # a BigAutoField; past it SQLite raises OverflowError on `pk__in`


def _choice(choices, **kwargs) -> serializers.CharField:
    """A choice as a string field documented by its values: "status", "kind" and "origin" are
    also campaign enums, and enum components of the same name would collide in the schema."""
    values = [value for value, _ in choices]

    def one_of(value):
        if value not in values:
            raise serializers.ValidationError(f"{value!r} is not one of {values}")

    validators = [] if kwargs.get("read_only") else [one_of]
    return serializers.CharField(
        help_text=f"one of: {', '.join(values)}", validators=validators, **kwargs
    )


class EntrySerializer(serializers.ModelSerializer):
    status = _choice(EntryStatus.choices, read_only=True)
    origin = _choice(EntryOrigin.choices, read_only=True)
    kind = _choice(EntryKind.choices, read_only=True)
    visibility = _choice(Visibility.choices, read_only=True)
    tags = serializers.ListField(source="tag_list", child=serializers.CharField())
    families = serializers.ListField(source="family_list", child=serializers.CharField())
    platforms = serializers.ListField(source="platform_list", child=serializers.CharField())
    group = serializers.SlugRelatedField(slug_field="name", read_only=True)
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    url = serializers.CharField(source="get_absolute_url", read_only=True)
    score = serializers.FloatField(read_only=True, required=False, allow_null=True, default=None)

    class Meta:
        model = Entry
        fields = [
            "id",
            "slug",
            "title",
            "kind",
            "status",
            "status_note",
            "tags",
            "families",
            "platforms",
            "expires_on",
            "visibility",
            "group",
            "provenance",
            "origin",
            "source_campaign",
            "version",
            "created_by",
            "created_at",
            "updated_at",
            "url",
            "score",
        ]


class EntryDetailSerializer(EntrySerializer):
    evidence_campaigns = serializers.PrimaryKeyRelatedField(many=True, read_only=True)
    evidence_nodes = serializers.SerializerMethodField()

    class Meta(EntrySerializer.Meta):
        fields = [*EntrySerializer.Meta.fields, "body", "evidence_campaigns", "evidence_nodes"]

    def get_evidence_nodes(self, entry) -> list[str]:
        return [f"{n.campaign_id}:{n.key}" for n in entry.evidence_nodes.all()]


class EntryWriteSerializer(serializers.Serializer):
    title = serializers.CharField(max_length=200, required=False)
    body = serializers.CharField(required=False)
    kind = _choice(EntryKind.choices, required=False)
    tags = serializers.ListField(child=serializers.CharField(), required=False)
    families = serializers.ListField(child=serializers.CharField(), required=False)
    platforms = serializers.ListField(child=serializers.CharField(), required=False)
    status = _choice(EntryStatus.choices, required=False)
    expires_on = serializers.DateField(required=False, allow_null=True)
    visibility = _choice(Visibility.choices, required=False)
    group = serializers.SlugRelatedField(
        slug_field="name", queryset=Group.objects.all(), required=False, allow_null=True
    )
    provenance = serializers.DictField(required=False)
    reason = serializers.CharField(max_length=500)


class EntryCreateSerializer(EntryWriteSerializer):
    title = serializers.CharField(max_length=200)
    body = serializers.CharField()
    kind = _choice(EntryKind.choices)
    slug = serializers.SlugField(max_length=120, required=False)
    reason = serializers.CharField(max_length=500, required=False, default="Created")


class VersionSerializer(serializers.ModelSerializer):
    author = serializers.SlugRelatedField(slug_field="username", read_only=True)

    class Meta:
        model = EntryVersion
        fields = ["number", "author", "reason", "created_at", "snapshot"]


class RevertSerializer(serializers.Serializer):
    version = serializers.IntegerField(min_value=1, max_value=ID_MAX)
    reason = serializers.CharField(max_length=500, required=False, default="")


class CurateSerializer(serializers.Serializer):
    action = _choice([(a, a) for a in sorted(CURATION_ACTIONS)])
    reason = serializers.CharField(max_length=500, required=False, default="")


class BulkRetireSerializer(serializers.Serializer):
    ids = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=ID_MAX), min_length=1, max_length=1000
    )
    reason = serializers.CharField(max_length=500)


class RetrieveQuerySerializer(serializers.Serializer):
    problem_name = serializers.CharField(
        required=False, default="", allow_blank=True, max_length=200
    )
    problem_source = serializers.CharField(
        required=False, default="", allow_blank=True, max_length=RETRIEVAL_SOURCE_MAX_LENGTH
    )
    platform = serializers.CharField(
        required=False, default="", allow_blank=True, max_length=LABEL_MAX_LENGTH
    )
    family = serializers.CharField(
        required=False, default="", allow_blank=True, max_length=LABEL_MAX_LENGTH
    )
    mode = serializers.CharField(
        required=False, default="seed", max_length=30, help_text=", ".join(MODE_KIND_BOOST)
    )
    feedback = serializers.DictField(required=False, allow_null=True, default=None)
    limit = serializers.IntegerField(required=False, default=5, min_value=1, max_value=20)

    def validate_feedback(self, value):
        if value is not None and len(json.dumps(value)) > RETRIEVAL_FEEDBACK_MAX_CHARS:
            raise serializers.ValidationError(
                f"at most {RETRIEVAL_FEEDBACK_MAX_CHARS} characters of JSON"
            )
        return value


class EntryFilterSerializer(serializers.Serializer):
    """The entry list's query string."""

    q = serializers.CharField(
        required=False, default="", allow_blank=True, max_length=SEARCH_TEXT_MAX_LENGTH
    )
    kind = serializers.CharField(
        required=False, default="", allow_blank=True, max_length=LABEL_MAX_LENGTH
    )
    status = serializers.CharField(
        required=False, default="", allow_blank=True, max_length=LABEL_MAX_LENGTH
    )
    platform = serializers.CharField(
        required=False, default="", allow_blank=True, max_length=LABEL_MAX_LENGTH
    )
    family = serializers.CharField(
        required=False, default="", allow_blank=True, max_length=LABEL_MAX_LENGTH
    )
    tag = serializers.CharField(
        required=False, default="", allow_blank=True, max_length=LABEL_MAX_LENGTH
    )


class RetrievedSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    slug = serializers.CharField()
    title = serializers.CharField()
    body = serializers.CharField()
    kind = serializers.CharField()
    status = serializers.CharField()
    warning = serializers.CharField()
    score = serializers.FloatField()


class MarkdownFileSerializer(serializers.Serializer):
    name = serializers.CharField()
    content = serializers.CharField()


class ImportSerializer(serializers.Serializer):
    files = MarkdownFileSerializer(many=True)


class ImportResultSerializer(serializers.Serializer):
    created = serializers.ListField(child=serializers.CharField())
    updated = serializers.ListField(child=serializers.CharField())
    unchanged = serializers.ListField(child=serializers.CharField())
    errors = serializers.DictField(child=serializers.CharField())
