"""The dispatch client against a real ASGI server on the test database: manifest with ETag,
shadow → canary → default with replayed traffic, a mismatching shadow caught with its case,
fallbacks counted, a rollback picked up within one poll interval, offline cache, tampering."""

import json
import time

import httpx
import pytest
from rest_framework.authtoken.models import Token

from apps.registry.models import Alarm, Artifact, Region, RuntimeCount, ShadowResult
from apps.registry.services import artifact_approve, artifact_create, artifact_promote
from tests.registry import helpers
from workers.runtime import DispatchClient
from workers.runtime.replay import replay

POLL_S = 0.5
pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


def _wait(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return time.monotonic()
        time.sleep(0.02)
    raise AssertionError(f"not within {timeout}s: {what}")


def _replay(client, calls, seed=0):
    return replay(
        client,
        operator="softmax",
        problem_source=helpers.SOFTMAX,
        workload=helpers.SOFTMAX_SMOKE,
        calls=calls,
        seed=seed,
    )


def _serving(client, key):
    rows = client.serving("softmax")
    return rows[0][key] if rows else None


@pytest.fixture
def setup(asgi_server, tmp_path):
    users = helpers.make_users()
    token = Token.objects.create(user=users["runtime"]).key
    reviewer_token = Token.objects.create(user=users["reviewer"]).key
    return users, asgi_server, token, reviewer_token, tmp_path


def test_shadow_canary_default_mismatch_and_rollback_in_a_running_client(setup):
    users, url, token, reviewer_token, tmp = setup
    reviewer = users["reviewer"]
    a = artifact_create(node=helpers.accepted_node(users["author"]), by=reviewer)
    region = a.region
    region.shadow_min_samples = region.canary_min_samples = 4
    region.shadow_sample_rate = 1.0
    region.save()
    client = DispatchClient(
        url, token, platform="interpret", cache_dir=str(tmp / "rt"), poll_interval_s=POLL_S,
        report_interval_s=3600, seed=1,
    )  # fmt: skip
    try:
        assert client.manifest is not None and client.manifest.source == "network"
        # ETag: the same state answers 304.
        etag = client.manifest.etag
        r = httpx.get(
            f"{url}/api/registry/manifest/?platform=interpret",
            headers={"Authorization": f"Token {token}", "If-None-Match": etag},
        )
        assert r.status_code == 304
        # Nothing serves yet: every call is a counted fallback; a shape outside every region too.
        _replay(client, 3)
        import torch

        client.call("softmax", torch.randn(3, 500), constants={"batch_size": 3, "dim": 500})
        client.flush()
        fallback = RuntimeCount.objects.filter(path="fallback")
        assert sum(c.calls for c in fallback) == 4
        assert fallback.filter(region__isnull=True).get().calls == 1

        # shadow: the reference answers; the candidate runs beside it on sampled calls.
        artifact_approve(artifact=a, by=users["reviewer2"])
        a = artifact_promote(artifact=a, by=reviewer)
        _wait(lambda: _serving(client, "shadow") == a.digest, 2 * POLL_S + 1, "shadow in force")
        _replay(client, 6, seed=2)
        client.flush()
        shadow = ShadowResult.objects.get(artifact=a)
        assert (shadow.samples, shadow.mismatches) == (6, 0)

        # canary at 50%: real calls on both paths; then default.
        artifact_approve(artifact=a, by=users["reviewer2"])
        a = artifact_promote(artifact=a, by=reviewer, canary_percent=50)
        _wait(lambda: _serving(client, "canary") == a.digest, 2 * POLL_S + 1, "canary in force")
        _replay(client, 12, seed=3)
        client.flush()
        paths = {c.path for c in RuntimeCount.objects.filter(region=region, artifact=a)}
        assert paths == {"canary"}
        assert RuntimeCount.objects.filter(region=region, path="fallback").exists()
        artifact_approve(artifact=a, by=users["reviewer2"])
        helpers.complete_model_check(a)  # the decoder stock vs patched with this kernel
        a = artifact_promote(artifact=a, by=reviewer)
        assert a.stage == "default"
        _wait(lambda: _serving(client, "default") == a.digest, 2 * POLL_S + 1, "default")
        _replay(client, 3, seed=4)

        # A shadow that is wrong on one case is caught with that case, and aborted.
        bad = artifact_create(
            node=helpers.accepted_node(users["author"], source=helpers.SOFTMAX_WRONG_SHORT_ROWS),
            by=reviewer,
        )
        artifact_approve(artifact=bad, by=users["reviewer2"])
        artifact_promote(artifact=bad, by=reviewer)
        _wait(lambda: _serving(client, "shadow") == bad.digest, 2 * POLL_S + 1, "bad shadow")
        _replay(client, 8, seed=5)
        client.flush()
        bad.refresh_from_db()
        assert bad.stage == "aborted", bad.stage
        assert "b5_d40_bf16" in bad.stage_reason
        result = ShadowResult.objects.get(artifact=bad)
        assert result.mismatches >= 1
        assert {c["case"] for c in result.cases} == {"b5_d40_bf16"}
        assert Alarm.objects.filter(kind="shadow_mismatch", artifact=bad).exists()
        _wait(lambda: _serving(client, "shadow") is None, 2 * POLL_S + 1, "aborted shadow off")

        # A second default, then one API call rolls back; the client follows within a poll.
        b = artifact_create(node=helpers.accepted_node(users["author"]), by=reviewer)
        b = helpers.advance(b, users["reviewer2"], "default")
        _wait(lambda: _serving(client, "default") == b.digest, 2 * POLL_S + 1, "b default")
        t0 = time.monotonic()
        r = httpx.post(
            f"{url}/api/registry/regions/{region.pk}/rollback/",
            json={"reason": "p99 page"},
            headers={"Authorization": f"Token {reviewer_token}"},
        )
        assert r.status_code == 200, r.text
        switched = _wait(
            lambda: _serving(client, "default") == a.digest, POLL_S + 0.5, "rollback in force"
        )
        assert switched - t0 <= POLL_S + 0.5
        before = RuntimeCount.objects.filter(artifact=a, path="default").count()
        _replay(client, 2, seed=6)
        client.flush()
        assert RuntimeCount.objects.filter(artifact=a, path="default").count() > before
    finally:
        client.close(flush=False)


def test_offline_cache_and_tampered_artifacts_are_refused(setup):
    users, url, token, _, tmp = setup
    a = artifact_create(node=helpers.accepted_node(users["author"]), by=users["reviewer"])
    a = helpers.advance(a, users["reviewer2"], "default")
    cache = tmp / "rt"
    online = DispatchClient(url, token, cache_dir=str(cache), background=False)
    assert _serving(online, "default") == a.digest
    online.close(flush=False)

    # Offline: the portal is unreachable; the last good manifest still serves the kernel.
    dead = "http://127.0.0.1:9"
    offline = DispatchClient(dead, token, cache_dir=str(cache), background=False)
    assert offline.manifest.source == "cache" and "refused" in offline.last_error
    _replay(offline, 2)
    batch = offline.metrics.take()
    assert {c["path"] for c in batch["counts"]} == {"default"}

    # One byte of the cached manifest changed: the whole cache is refused; calls fall back.
    manifest_file = cache / "manifest-interpret.json"
    cached = json.loads(manifest_file.read_text())
    entry = cached["manifest"]["body"]["artifacts"][a.digest]
    entry["body"]["source"] = entry["body"]["source"].replace("tl.exp", "tl.exp2", 1)
    manifest_file.write_text(json.dumps(cached))
    tampered = DispatchClient(dead, token, cache_dir=str(cache), background=False)
    assert tampered.manifest is None and "manifest refused" in tampered.source.last_error

    # One byte of the artifact in the portal's database: the server's manifest is still
    # signed, but the artifact's own signature fails; the client refuses it and reports it.
    from django.db import connection

    body = dict(a.body, source=a.body["source"].replace("tl.exp", "tl.exp2", 1))
    with connection.cursor() as cur:
        cur.execute(
            "UPDATE registry_artifact SET body = %s WHERE id = %s", [json.dumps(body), a.pk]
        )
    fresh = DispatchClient(url, token, cache_dir=str(tmp / "rt2"), background=False)
    assert fresh.manifest.refused and fresh.manifest.refused[0]["artifact"] == a.digest
    assert _serving(fresh, "default") is None
    _replay(fresh, 2)
    fresh.flush()
    alarms = Alarm.objects.filter(kind="tampered", artifact=a)
    assert alarms.exists()
    assert Region.objects.get(pk=a.region_id).default_artifact_id == a.pk
    assert Artifact.objects.get(pk=a.pk).digest == a.digest
