"""Rollback: default is a pointer moved atomically; one service, one API call, one command."""

import threading

import pytest
from django.core.exceptions import PermissionDenied
from django.core.management import CommandError, call_command
from django.db import connection

from apps.registry.models import Artifact, Region
from apps.registry.selectors import previous_default, rollback_targets
from apps.registry.services import (
    RegistryError,
    artifact_approve,
    artifact_create,
    artifact_promote,
    region_rollback,
)
from tests.registry import helpers


def _two_defaults(users):
    a = artifact_create(node=helpers.accepted_node(users["author"]), by=users["reviewer"])
    a = helpers.advance(a, users["reviewer"], "default")
    b = artifact_create(node=helpers.accepted_node(users["author"]), by=users["reviewer"])
    b = helpers.advance(b, users["reviewer"], "default")
    a.refresh_from_db()
    return a, b


@pytest.mark.django_db
def test_promoting_a_new_default_retires_the_old_and_rollback_restores_it(users):
    a, b = _two_defaults(users)
    region = Region.objects.get(pk=b.region_id)
    assert a.region_id == b.region_id
    assert region.default_artifact == b and a.stage == "retired"
    assert previous_default(region=region) == a
    with pytest.raises(PermissionDenied):
        region_rollback(region=region, by=users["engineer"], reason="x")
    with pytest.raises(RegistryError, match="reason"):
        region_rollback(region=region, by=users["reviewer"], reason=" ")
    region_rollback(region=region, by=users["reviewer"], reason="p99 regression")
    region.refresh_from_db()
    a.refresh_from_db()
    b.refresh_from_db()
    assert region.default_artifact == a and a.stage == "default" and b.stage == "retired"
    event = region.events.order_by("-id").first()
    assert (event.kind, event.from_artifact, event.to_artifact) == ("rollback", b.digest, a.digest)
    assert event.actor_name == "reg-reviewer" and event.reason == "p99 regression"
    # A's previous default is still "none": rolling back again goes to the reference, not B.
    assert previous_default(region=region) is None
    assert rollback_targets(region=region) == [b]
    region_rollback(region=region, by=users["admin"], reason="all off")
    region.refresh_from_db()
    assert region.default_artifact is None


@pytest.mark.django_db
def test_rollback_to_an_earlier_artifact_and_refusals(users):
    a, b = _two_defaults(users)
    region = Region.objects.get(pk=b.region_id)
    candidate = artifact_create(node=helpers.accepted_node(users["author"]), by=users["reviewer"])
    with pytest.raises(RegistryError, match="never served"):
        region_rollback(region=region, by=users["reviewer"], reason="x", to=candidate)
    region_rollback(region=region, by=users["reviewer"], reason="x", to_reference=True)
    region.refresh_from_db()
    assert region.default_artifact is None
    with pytest.raises(RegistryError, match="nothing serves"):
        region_rollback(region=region, by=users["reviewer"], reason="x")


@pytest.mark.django_db
def test_rollback_is_atomic(users, monkeypatch):
    a, b = _two_defaults(users)
    region = Region.objects.get(pk=b.region_id)
    from apps.registry.services import promotion

    def boom(**kwargs):
        raise RuntimeError("crash while writing the event")

    monkeypatch.setattr(promotion, "event_add", boom)
    with pytest.raises(RuntimeError):
        region_rollback(region=region, by=users["reviewer"], reason="x")
    region.refresh_from_db()
    assert region.default_artifact == b
    assert Artifact.objects.get(pk=b.pk).stage == "default"
    assert Artifact.objects.get(pk=a.pk).stage == "retired"


@pytest.mark.django_db
def test_rollback_is_one_api_call(users, client):
    a, b = _two_defaults(users)
    client.force_login(users["viewer"])
    url = f"/api/registry/regions/{b.region_id}/rollback/"
    refused = client.post(url, {"reason": "x"}, content_type="application/json")
    assert refused.status_code == 403 and "reviewer" in refused.json()["detail"]
    client.force_login(users["reviewer"])
    done = client.post(url, {"reason": "bad p99"}, content_type="application/json")
    assert done.status_code == 200, done.content
    assert done.json()["default_artifact"] == a.digest


@pytest.mark.django_db
def test_rollback_command(users, capsys):
    a, b = _two_defaults(users)
    call_command("rollback", str(b.region_id), "--reason", "night page", "--user", "reg-admin")
    assert f"{b.short} -> {a.short}" in capsys.readouterr().out
    assert Region.objects.get(pk=b.region_id).default_artifact == a
    with pytest.raises(CommandError, match="reviewer"):
        call_command("rollback", str(b.region_id), "--reason", "x", "--user", "reg-viewer")


@pytest.mark.django_db(transaction=True)
def test_two_concurrent_promotions_of_one_region_exactly_one_wins(users):
    first = artifact_create(node=helpers.accepted_node(users["author"]), by=users["reviewer"])
    second = artifact_create(node=helpers.accepted_node(users["author"]), by=users["reviewer"])
    assert first.region_id == second.region_id
    for artifact in (first, second):
        artifact_approve(artifact=artifact, by=users["reviewer2"])
    barrier = threading.Barrier(2)
    results = {}

    def promote(artifact):
        barrier.wait()
        try:
            results[artifact.pk] = artifact_promote(artifact=artifact, by=users["reviewer"]).stage
        except RegistryError as exc:
            results[artifact.pk] = exc.messages[0]
        finally:
            connection.close()

    threads = [threading.Thread(target=promote, args=(a,)) for a in (first, second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stages = sorted(results.values())
    assert stages.count("shadow") == 1, results
    assert "already has a shadow" in [s for s in stages if s != "shadow"][0]
    region = Region.objects.get(pk=first.region_id)
    promoted = region.events.filter(kind="promoted")
    assert promoted.count() == 1
    assert Artifact.objects.filter(region=region, stage="shadow").count() == 1
