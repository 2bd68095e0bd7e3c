"""Permission checks shared by pages and the API, keyed by the portal permission codename."""

from django.contrib.auth.mixins import PermissionRequiredMixin
from rest_framework.permissions import BasePermission

from apps.accounts.constants import APP_LABEL, PERMISSIONS, ROLE_PERMISSIONS, Role

# The permission only the admin role holds.
ADMIN_ONLY_PERMISSION = "manage_team"
assert [r for r, perms in ROLE_PERMISSIONS.items() if ADMIN_ONLY_PERMISSION in perms] == [
    Role.ADMIN
]


def _roles_with(codename: str) -> str:
    roles = [role.label.lower() for role, perms in ROLE_PERMISSIONS.items() if codename in perms]
    return ", ".join(roles)


def denial_message(codename: str) -> str:
    return (
        f"You need permission to {PERMISSIONS[codename][0].lower()}{PERMISSIONS[codename][1:]}; "
        f"roles that have it: {_roles_with(codename)}."
    )


def has_portal_permission(user, codename: str) -> bool:
    return bool(user and user.is_authenticated and user.has_perm(f"{APP_LABEL}.{codename}"))


def is_portal_admin(user) -> bool:
    """The admin role (or a superuser): may change what others wrote, such as their comments.
    Asked as its one permission no other role has, from the user's cached permissions."""
    return has_portal_permission(user, ADMIN_ONLY_PERMISSION)


class PortalPermissionRequiredMixin(PermissionRequiredMixin):
    """Page mixin: `portal_permission = "author_campaign"`; a 403 page says which role is needed."""

    portal_permission = "view_portal"
    raise_exception = True

    def get_permission_required(self):
        return [f"{APP_LABEL}.{self.portal_permission}"]

    def get_permission_denied_message(self) -> str:
        return denial_message(self.portal_permission)


def portal_permission(codename: str) -> type[BasePermission]:
    """DRF permission class requiring `accounts.<codename>`; refusals say which role is needed."""

    class _Permission(BasePermission):
        message = denial_message(codename)

        def has_permission(self, request, view) -> bool:
            return has_portal_permission(request.user, codename)

    _Permission.__name__ = f"Has_{codename}"
    return _Permission


ReadPortal = portal_permission("view_portal")
