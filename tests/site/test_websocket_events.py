"""A websocket joined to a campaign's group receives an event sent by another process."""

import subprocess
import sys

import pytest
from channels.testing import WebsocketCommunicator

from kernelevolve_site.asgi import application
from tests.support.asyncio_thread import run_async
from tests.support.processes import ROOT, service_env

SEND = (
    "import django; django.setup(); from kernelevolve_site.events import send_event; "
    "send_event('campaign-7', 'campaign.progress', html='<div id=\"progress\">3 of 10</div>')"
)


def _session_cookie(username: str) -> str:
    from django.contrib.auth.models import User
    from django.test import Client

    client = Client()
    client.force_login(User.objects.get(username=username))
    return f"sessionid={client.cookies['sessionid'].value}"


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_consumer_receives_event_from_a_worker_process(demo_users):
    run_async(_receive_event(_session_cookie("viewer")))


async def _receive_event(cookie: str) -> None:
    communicator = WebsocketCommunicator(
        application,
        "/ws/campaigns/7/",
        headers=[(b"origin", b"http://127.0.0.1"), (b"cookie", cookie.encode())],
    )
    connected, _ = await communicator.connect()
    assert connected
    sender = subprocess.run(
        [sys.executable, "-c", SEND], cwd=ROOT, env=service_env(), capture_output=True, timeout=60
    )
    assert sender.returncode == 0, sender.stderr
    message = await communicator.receive_from(timeout=10)
    assert message == '<div id="progress">3 of 10</div>'
    await communicator.disconnect()


@pytest.mark.django_db(transaction=True)
def test_anonymous_websocket_is_refused():
    run_async(_refused())


async def _refused() -> None:
    communicator = WebsocketCommunicator(
        application, "/ws/campaigns/7/", headers=[(b"origin", b"http://127.0.0.1")]
    )
    connected, _ = await communicator.connect()
    assert not connected
