"""Signal receivers; they only call services."""

from apps.accounts.services import roles_sync


def sync_roles_after_migrate(**kwargs) -> None:
    roles_sync()
