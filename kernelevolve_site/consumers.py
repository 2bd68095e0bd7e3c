"""The base of the site's websocket consumers: authenticate, join one group, leave it.

A subclass names its group and forwards the event types it serves; nothing else lives in a
consumer (STYLE.md).
"""

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer

from apps.accounts.permissions import has_portal_permission


class GroupConsumer(AsyncWebsocketConsumer):
    """Refuses users without `view_portal` (close code 4403); joins `group_name()`."""

    def group_name(self) -> str:
        raise NotImplementedError

    async def connect(self) -> None:
        allowed = await database_sync_to_async(has_portal_permission)(
            self.scope.get("user"), "view_portal"
        )
        if not allowed:
            await self.close(code=4403)
            return
        self.group = self.group_name()
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)
