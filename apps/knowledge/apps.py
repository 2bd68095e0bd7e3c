"""App config for knowledge."""

from django.apps import AppConfig


class KnowledgeConfig(AppConfig):
    name = "apps.knowledge"
    label = "knowledge"
    default_auto_field = "django.db.models.BigAutoField"
