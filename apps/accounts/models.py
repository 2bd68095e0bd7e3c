"""Accounts models."""

from django.db import models

from apps.accounts.constants import PERMISSIONS


class PortalPermission(models.Model):
    """Holder of the portal's role permissions (no table): `accounts.<codename>`."""

    class Meta:
        managed = False
        default_permissions = ()
        permissions = list(PERMISSIONS.items())

    def __str__(self) -> str:
        return "portal permissions"
