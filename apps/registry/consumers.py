"""Websocket consumer for an operator's registry page."""

import json

from kernelevolve_site.consumers import GroupConsumer


def registry_group(operator: str) -> str:
    return f"registry-{operator}"


class RegistryConsumer(GroupConsumer):
    def group_name(self) -> str:
        return registry_group(self.scope["url_route"]["kwargs"]["operator"])

    async def forward(self, event: dict) -> None:
        # Registry events carry data, not a partial: the page re-fetches its live section.
        await self.send(text_data=json.dumps({"type": event["type"], **event.get("data", {})}))

    registry_changed = forward
    registry_alarm = forward
