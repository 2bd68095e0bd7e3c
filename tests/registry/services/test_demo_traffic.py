"""`make run`'s demo driver: accepted demo candidates get frozen, one goes to shadow, and the
replayed traffic gives that shadow stage real samples (not just counted fallbacks)."""

import io

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command

from apps.registry.models import Artifact, RuntimeCount, ShadowResult
from tests.registry import helpers

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


def test_demo_traffic_feeds_the_shadow_stage(asgi_server, demo_users):
    helpers.accepted_node(User.objects.get(username="engineer"))
    out = io.StringIO()
    call_command("demo_traffic", "--once", "--url", asgi_server, "--calls", "40", stdout=out)
    shadowed = Artifact.objects.get(stage="shadow")
    assert "in shadow" in out.getvalue() and "40 calls" in out.getvalue()
    assert sum(c.calls for c in RuntimeCount.objects.all()) == 40
    result = ShadowResult.objects.get(artifact=shadowed)
    assert result.samples > 0 and result.mismatches == 0
