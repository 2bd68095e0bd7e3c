"""Writes for accounts: role groups, users with roles, API tokens."""

from django.contrib.auth.models import Group, Permission, User
from django.contrib.contenttypes.models import ContentType
from django.db import transaction
from rest_framework.authtoken.models import Token

from apps.accounts.constants import APP_LABEL, PERMISSIONS, ROLE_PERMISSIONS, Role
from apps.accounts.models import PortalPermission


@transaction.atomic
def roles_sync() -> dict[str, list[str]]:
    """Create the role groups and give each exactly its permissions. Safe to run any time."""
    content_type = ContentType.objects.get_for_model(PortalPermission, for_concrete_model=False)
    permissions = {}
    for codename, name in PERMISSIONS.items():
        permission, _ = Permission.objects.get_or_create(
            codename=codename, content_type=content_type, defaults={"name": name}
        )
        permissions[codename] = permission
    result = {}
    for role, codenames in ROLE_PERMISSIONS.items():
        group, _ = Group.objects.get_or_create(name=role.value)
        group.permissions.set([permissions[c] for c in codenames])
        result[role.value] = [f"{APP_LABEL}.{c}" for c in codenames]
    return result


@transaction.atomic
def user_set_roles(*, user: User, roles: list[str]) -> User:
    """Replace a user's roles. Admins also get Django-admin access."""
    unknown = set(roles) - set(Role.values)
    if unknown:
        raise ValueError(f"unknown role(s): {', '.join(sorted(unknown))}")
    roles_sync()
    user.groups.set(Group.objects.filter(name__in=roles))
    user.is_staff = Role.ADMIN in roles
    user.is_superuser = Role.ADMIN in roles
    user.save(update_fields=["is_staff", "is_superuser"])
    return user


@transaction.atomic
def user_upsert(*, username: str, password: str, roles: list[str], email: str = "") -> User:
    """Create the user or reset its password and roles (so running the demo seed twice works)."""
    user, _ = User.objects.get_or_create(username=username, defaults={"email": email})
    user.set_password(password)
    user.save()
    return user_set_roles(user=user, roles=roles)


def api_token_get(*, user: User) -> Token:
    """The user's API token, created on first use: every client of the user shares it, so
    asking again never logs another client out (rotation is ``api_token_issue``)."""
    token, _ = Token.objects.get_or_create(user=user)
    return token


def api_token_issue(*, user: User) -> Token:
    """Replace the user's API token with a fresh one (the old one stops working)."""
    Token.objects.filter(user=user).delete()
    return Token.objects.create(user=user)


DEMO_PASSWORD_SUFFIX = "-demo-pass"


def demo_users_seed() -> list[tuple[str, str, str]]:
    """One demo user per role (username = role) and a second engineer; (user, pw, role) rows."""
    rows = []
    for role in Role:
        password = f"{role.value}{DEMO_PASSWORD_SUFFIX}"
        user_upsert(username=role.value, password=password, roles=[role.value])
        rows.append((role.value, password, role.value))
    user_upsert(
        username="engineer2", password=f"engineer2{DEMO_PASSWORD_SUFFIX}", roles=["engineer"]
    )
    rows.append(("engineer2", f"engineer2{DEMO_PASSWORD_SUFFIX}", "engineer"))
    return rows
