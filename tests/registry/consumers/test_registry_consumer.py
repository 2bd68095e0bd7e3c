"""Registry websockets: signed-in users join their operator's group; anonymous ones are refused."""

import json

import pytest
from channels.testing import WebsocketCommunicator
from django.test import Client

from kernelevolve_site.asgi import application
from kernelevolve_site.events import send_event
from tests.support.asyncio_thread import run_async

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]
ORIGIN = (b"origin", b"http://127.0.0.1")


def _cookie(user) -> bytes:
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}".encode()


async def _connect(headers):
    communicator = WebsocketCommunicator(application, "/ws/registry/softmax/", headers=headers)
    connected, _ = await communicator.connect()
    return communicator, connected


def test_registry_events_reach_signed_in_users_only(users):
    async def scenario(cookie):
        anonymous, ok = await _connect([ORIGIN])
        assert not ok
        viewer, ok = await _connect([ORIGIN, (b"cookie", cookie)])
        assert ok
        from asgiref.sync import sync_to_async

        await sync_to_async(send_event)(
            "registry-softmax", "registry.changed", data={"region": 3, "kind": "rollback"}
        )
        message = json.loads(await viewer.receive_from(timeout=10))
        assert message == {"type": "registry.changed", "region": 3, "kind": "rollback"}
        await viewer.disconnect()

    run_async(scenario(_cookie(users["viewer"])))
