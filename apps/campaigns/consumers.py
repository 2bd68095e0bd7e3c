"""Websocket consumer for a campaign's live events. Authenticates, joins, forwards; nothing else."""

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer

from apps.accounts.permissions import has_portal_permission


def campaign_group(campaign_id: int) -> str:
    return f"campaign-{campaign_id}"


class CampaignConsumer(AsyncWebsocketConsumer):
    async def connect(self) -> None:
        user = self.scope.get("user")
        allowed = await database_sync_to_async(has_portal_permission)(user, "view_portal")
        if not allowed:
            await self.close(code=4403)
            return
        self.group = campaign_group(self.scope["url_route"]["kwargs"]["campaign_id"])
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def forward(self, event: dict) -> None:
        # The payload is the rendered partial with hx-swap-oob; htmx's ws extension swaps it.
        await self.send(text_data=event["html"])

    # One handler per event type (`campaign.progress` -> campaign_progress).
    campaign_progress = forward
    campaign_node = forward
    campaign_status = forward


CAMPAIGN_LIST_GROUP = "campaigns"


class CampaignListConsumer(CampaignConsumer):
    """The campaign list: one group for every campaign's status and progress changes."""

    async def connect(self) -> None:
        user = self.scope.get("user")
        if not await database_sync_to_async(has_portal_permission)(user, "view_portal"):
            await self.close(code=4403)
            return
        self.group = CAMPAIGN_LIST_GROUP
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()

    async def campaign_listed(self, event: dict) -> None:
        # Data only: the list re-fetches its table with the user's own filters and sort.
        import json

        await self.send(text_data=json.dumps(event.get("data", {})))
