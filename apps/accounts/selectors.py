"""Reads for accounts."""

from django.contrib.auth.models import User
from django.db.models import QuerySet

from apps.accounts.constants import Role


def user_roles(*, user: User) -> list[str]:
    if not user.is_authenticated:
        return []
    names = {g.name for g in user.groups.all()}
    return [r.value for r in Role if r.value in names]


def team_list() -> QuerySet[User]:
    return User.objects.filter(is_active=True).prefetch_related("groups").order_by("username")
