"""App config for registry: it hands the campaigns' inbox its approvals and alarms."""

from django.apps import AppConfig


class RegistryConfig(AppConfig):
    name = "apps.registry"
    label = "registry"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from apps.campaigns import hooks

        hooks.inbox_register(_inbox)


def _inbox(*, user) -> dict:
    """The registry's part of a user's inbox: approvals awaiting them, open alarms (approvers)."""
    from apps.registry.selectors.registry import alarm_open_list, approvals_awaiting

    alarms = alarm_open_list()[:50] if user.has_perm("accounts.approve_promotion") else []
    return {"to_approve": list(approvals_awaiting(user=user)), "alarms": list(alarms)}
