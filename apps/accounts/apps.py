"""App config: keeps the role groups in step with the code after every migrate."""

from django.apps import AppConfig
from django.db.models.signals import post_migrate


class AccountsConfig(AppConfig):
    name = "apps.accounts"
    label = "accounts"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from apps.accounts.signals import sync_roles_after_migrate

        post_migrate.connect(sync_roles_after_migrate, sender=self)
