"""Websocket: a campaign's events reach only subscribers of that campaign allowed to see it."""

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User

from kernelevolve_site.asgi import application
from tests.support.asyncio_thread import run_async

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


def _cookie(username: str) -> bytes:
    from django.test import Client

    client = Client()
    client.force_login(User.objects.get(username=username))
    return f"sessionid={client.cookies['sessionid'].value}".encode()


def _socket(path: str, cookie: bytes | None) -> WebsocketCommunicator:
    headers = [(b"origin", b"http://127.0.0.1")]
    if cookie:
        headers.append((b"cookie", cookie))
    return WebsocketCommunicator(application, path, headers=headers)


def test_events_reach_only_allowed_subscribers_of_that_campaign(demo_users):
    User.objects.create_user("outsider", password="x")  # signed in, but holds no role
    cookies = {name: _cookie(name) for name in ("viewer", "engineer", "outsider")}
    run_async(_scenario(cookies))


async def _scenario(cookies: dict) -> None:
    viewer_a = _socket("/ws/campaigns/9101/", cookies["viewer"])
    engineer_b = _socket("/ws/campaigns/9102/", cookies["engineer"])
    outsider_a = _socket("/ws/campaigns/9101/", cookies["outsider"])
    anonymous_a = _socket("/ws/campaigns/9101/", None)
    assert (await viewer_a.connect())[0]
    assert (await engineer_b.connect())[0]
    connected, code = await outsider_a.connect()
    assert not connected and code == 4403, "a user without a role is refused"
    assert not (await anonymous_a.connect())[0], "anonymous is refused"

    layer = get_channel_layer()
    await layer.group_send(
        "campaign-9101", {"type": "campaign.node", "html": '<tr id="node-n1">a</tr>', "data": {}}
    )
    assert await viewer_a.receive_from(timeout=5) == '<tr id="node-n1">a</tr>'
    assert await engineer_b.receive_nothing(timeout=0.5), "campaign B never sees A's events"

    await layer.group_send(
        "campaign-9102", {"type": "campaign.progress", "html": "<section>b</section>", "data": {}}
    )
    assert await engineer_b.receive_from(timeout=5) == "<section>b</section>"
    assert await viewer_a.receive_nothing(timeout=0.5)
    await viewer_a.disconnect()
    await engineer_b.disconnect()
    await sync_to_async(lambda: None)()
