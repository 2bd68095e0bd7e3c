"""Template context: the signed-in user's roles, for navigation and buttons."""

from apps.accounts.selectors import user_roles


def roles(request) -> dict:
    return {"user_roles": user_roles(user=request.user)}
