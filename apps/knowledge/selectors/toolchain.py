"""The current toolchain as the workers last reported it (node reports carry a fingerprint)."""

from apps.campaigns.models import Node


def toolchain_fingerprint_latest(*, platform: str) -> dict | None:
    """The fingerprint of the most recent evaluation on `platform`, or None if there is none."""
    row = (
        Node.objects.filter(campaign__platform=platform, evaluated_at__isnull=False)
        .exclude(report__isnull=True)
        .order_by("-evaluated_at")
        .values_list("report__fingerprint", flat=True)
        .first()
    )
    return row or None


def campaign_fingerprint(*, campaign) -> dict | None:
    """The fingerprint a campaign's evaluations ran under (its latest evaluated node's)."""
    row = (
        campaign.nodes.filter(evaluated_at__isnull=False)
        .exclude(report__isnull=True)
        .order_by("-evaluated_at")
        .values_list("report__fingerprint", flat=True)
        .first()
    )
    return row or None
