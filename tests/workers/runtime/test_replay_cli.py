"""``python -m workers.runtime replay`` drives real calls into a shadow stage of a live portal,
and ``manage.py replay_traffic`` does the same from the portal side."""

import json
import subprocess
import sys

import pytest
from django.core.management import call_command
from rest_framework.authtoken.models import Token

from apps.registry.models import RuntimeCount, ShadowResult
from apps.registry.services import artifact_create
from tests.registry import helpers

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


def test_replay_cli_and_command_feed_the_shadow_stage(asgi_server, tmp_path, capsys):
    users = helpers.make_users()
    a = artifact_create(node=helpers.accepted_node(users["author"]), by=users["reviewer"])
    a = helpers.advance(a, users["reviewer2"], "shadow")
    region = a.region
    region.shadow_sample_rate = 1.0
    region.save()
    token = Token.objects.create(user=users["runtime"]).key
    done = subprocess.run(
        [sys.executable, "-m", "workers.runtime", "replay", "--url", asgi_server,
         "--token", token, "--operator", "softmax", "--calls", "5",
         "--cache-dir", str(tmp_path / "cli")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads(done.stdout)
    assert summary["calls"] == 5 and summary["serving"][0]["shadow"] == a.digest
    results = ShadowResult.objects.filter(artifact=a)
    assert sum(r.samples for r in results) == 5
    assert sum(r.mismatches for r in results) == 0
    fallback_before = sum(c.calls for c in RuntimeCount.objects.filter(path="fallback"))

    call_command(
        "replay_traffic", "softmax", "--url", asgi_server, "--user", "reg-runtime", "--calls", "3"
    )
    assert json.loads(capsys.readouterr().out)["calls"] == 3
    assert sum(c.calls for c in RuntimeCount.objects.filter(path="fallback")) == (
        fallback_before + 3
    )
