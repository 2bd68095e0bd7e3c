"""Roles and the permissions each one grants (DESIGN.md §7)."""

from django.db import models


class Role(models.TextChoices):
    VIEWER = "viewer", "Viewer"
    ENGINEER = "engineer", "Engineer"
    REVIEWER = "reviewer", "Reviewer"
    CURATOR = "curator", "Curator"
    ADMIN = "admin", "Admin"
    # Service accounts of production dispatch clients: they read manifests and report metrics.
    RUNTIME = "runtime", "Runtime client"


# codename -> description; all live on accounts.PortalPermission.
PERMISSIONS = {
    "view_portal": "Read campaigns, candidates, registry and knowledge",
    "author_campaign": "Author campaigns and upload problems",
    "control_campaign": "Pause, resume, cancel and continue campaigns",
    "comment_candidate": "Comment on candidates",
    "create_artifact": "Freeze an accepted candidate as a registry artifact",
    "approve_promotion": "Approve promotions of artifacts",
    "rollback_artifact": "Roll back a region's default artifact",
    "curate_knowledge": "Write, accept, retire and revert knowledge entries",
    "manage_team": "See and manage users and their roles",
    "report_runtime": "Report runtime metrics (calls, shadow mismatches, latency)",
}

ROLE_PERMISSIONS = {
    Role.VIEWER: ["view_portal"],
    Role.ENGINEER: ["view_portal", "author_campaign", "control_campaign", "comment_candidate"],
    Role.REVIEWER: [
        "view_portal",
        "comment_candidate",
        "create_artifact",
        "approve_promotion",
        "rollback_artifact",
    ],
    Role.CURATOR: ["view_portal", "comment_candidate", "curate_knowledge"],
    Role.ADMIN: list(PERMISSIONS),
    Role.RUNTIME: ["view_portal", "report_runtime"],
}

APP_LABEL = "accounts"

# Login limits (apps.accounts.login_limits): failed logins counted per username + address and
# per address, in fixed windows, so a lock-out always ends with its window.
LOGIN_WINDOW_S = 300
LOGIN_FAILURES_PER_USER_AND_ADDRESS = 10
LOGIN_FAILURES_PER_ADDRESS = 50
