"""Reads for campaigns."""

from django.db.models import QuerySet

from apps.campaigns.models import Campaign, Node, Problem


def campaign_list() -> QuerySet[Campaign]:
    return Campaign.objects.select_related("problem", "created_by", "best_node").order_by(
        "-created_at"
    )


def campaign_get(*, pk: int) -> Campaign:
    return Campaign.objects.select_related("problem", "created_by", "best_node").get(pk=pk)


def campaign_nodes(*, campaign: Campaign) -> QuerySet[Node]:
    return campaign.nodes.defer("source", "report").order_by("id")


def node_get(*, campaign_id: int, key: str) -> Node:
    return (
        Node.objects.select_related("campaign", "campaign__problem")
        .prefetch_related("gates", "measurements", "in_edges__parent")
        .get(campaign_id=campaign_id, key=key)
    )


def problem_list() -> QuerySet[Problem]:
    return Problem.objects.order_by("name")
