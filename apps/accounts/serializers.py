"""API shapes for accounts."""

from django.contrib.auth.models import User
from rest_framework import serializers


class MeSerializer(serializers.Serializer):
    username = serializers.CharField()
    roles = serializers.ListField(child=serializers.CharField())
    permissions = serializers.ListField(child=serializers.CharField())


class TeamMemberSerializer(serializers.ModelSerializer):
    roles = serializers.SerializerMethodField()

    class Meta:
        model = User
        fields = ["id", "username", "email", "roles", "last_login"]

    def get_roles(self, user) -> list[str]:
        return [g.name for g in user.groups.all()]


class TokenRequestSerializer(serializers.Serializer):
    username = serializers.CharField(max_length=150)
    password = serializers.CharField(max_length=4096, style={"input_type": "password"})
    rotate = serializers.BooleanField(
        default=False, help_text="issue a new token; the old one stops working for every client"
    )


class TokenSerializer(serializers.Serializer):
    token = serializers.CharField()
