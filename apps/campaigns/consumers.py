"""Websocket consumers for campaigns: one campaign's live page, and the campaign list."""

import json

from kernelevolve_site.consumers import GroupConsumer

CAMPAIGN_LIST_GROUP = "campaigns"


def campaign_group(campaign_id: int) -> str:
    return f"campaign-{campaign_id}"


class CampaignConsumer(GroupConsumer):
    def group_name(self) -> str:
        return campaign_group(self.scope["url_route"]["kwargs"]["campaign_id"])

    async def forward(self, event: dict) -> None:
        # The payload is the rendered partial with hx-swap-oob; htmx's ws extension swaps it.
        await self.send(text_data=event["html"])

    # One handler per event type (`campaign.progress` -> campaign_progress).
    campaign_progress = forward
    campaign_node = forward
    campaign_status = forward


class CampaignListConsumer(GroupConsumer):
    """The campaign list: one group for every campaign's status and progress changes."""

    def group_name(self) -> str:
        return CAMPAIGN_LIST_GROUP

    async def campaign_listed(self, event: dict) -> None:
        # Data only: the list re-fetches its table with the user's own filters and sort.
        await self.send(text_data=json.dumps(event.get("data", {})))


def node_group(node_id: int) -> str:
    return f"node-{node_id}"


class NodeConsumer(GroupConsumer):
    """A candidate's page: new comments (and reviews) from other readers."""

    def group_name(self) -> str:
        return node_group(self.scope["url_route"]["kwargs"]["node_id"])

    async def node_comment(self, event: dict) -> None:
        # Data only: the page re-fetches its comment section unless the reader is writing one.
        await self.send(text_data=json.dumps(event.get("data", {})))
