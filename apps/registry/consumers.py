"""Websocket consumer for an operator's registry page: authenticates, joins, forwards."""

import json

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer

from apps.accounts.permissions import has_portal_permission


def registry_group(operator: str) -> str:
    return f"registry-{operator}"


class RegistryConsumer(AsyncWebsocketConsumer):
    async def connect(self) -> None:
        allowed = await database_sync_to_async(has_portal_permission)(
            self.scope.get("user"), "view_portal"
        )
        if not allowed:
            await self.close(code=4403)
            return
        self.group = registry_group(self.scope["url_route"]["kwargs"]["operator"])
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def forward(self, event: dict) -> None:
        # Registry events carry data, not a partial: the page re-fetches its live section.
        await self.send(text_data=json.dumps({"type": event["type"], **event.get("data", {})}))

    registry_changed = forward
    registry_alarm = forward
