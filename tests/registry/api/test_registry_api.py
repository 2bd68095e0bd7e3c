"""The registry through its REST API: freeze, approve, promote (gates answer 409), public key,
signed manifest with ETag, narrowing, refusals with the role needed."""

import pytest

from apps.registry import signing
from tests.registry import helpers
from workers.runtime.signing import verify

pytestmark = pytest.mark.django_db


def _post(client, url, data=None):
    return client.post(url, data or {}, content_type="application/json")


def test_whole_promotion_through_the_api(client, node, users):
    client.force_login(users["engineer"])
    refused = _post(client, "/api/registry/artifacts/", {"node": node.pk})
    assert refused.status_code == 403 and "reviewer" in refused.json()["detail"]
    client.force_login(users["reviewer"])
    created = _post(client, "/api/registry/artifacts/", {"node": node.pk})
    assert created.status_code == 201, created.content
    art = created.json()
    assert art["stage"] == "candidate" and art["body"]["scope"]["dtypes"] == ["bfloat16", "float32"]
    assert [g["status"] for g in art["gates"]] == ["pass", "pass"]
    pk = art["id"]

    client.force_login(users["author"])
    own = _post(client, f"/api/registry/artifacts/{pk}/approve/", {"reason": "mine"})
    assert own.status_code == 400 and "authored" in str(own.json())
    client.force_login(users["reviewer"])
    early = _post(client, f"/api/registry/artifacts/{pk}/promote/")
    assert early.status_code == 400 and "needs 1 approval" in str(early.json())
    assert _post(client, f"/api/registry/artifacts/{pk}/approve/").status_code == 200
    shadow = _post(client, f"/api/registry/artifacts/{pk}/promote/", {"reason": "go"})
    assert shadow.status_code == 200 and shadow.json()["stage"] == "shadow"

    assert _post(client, f"/api/registry/artifacts/{pk}/approve/").status_code == 200
    waiting = _post(client, f"/api/registry/artifacts/{pk}/promote/")
    assert waiting.status_code == 409
    assert waiting.json()["status"] == "inconclusive"
    assert "0 of 50 shadow samples" in waiting.json()["detail"]

    artifact = node.artifacts.get()
    helpers.feed_shadow(artifact, 50)
    canary = _post(client, f"/api/registry/artifacts/{pk}/promote/", {"canary_percent": 20})
    assert canary.status_code == 200 and canary.json()["canary_percent"] == 20

    events = client.get(f"/api/registry/regions/{art['region']}/events/").json()["results"]
    assert [e["kind"] for e in events][:3] == ["promoted", "approved", "promoted"]
    assert events[0]["actor_name"] == "reg-reviewer" and events[0]["evidence"]["gates"]


def test_public_key_and_signed_manifest_with_etag(client, node, users):
    from apps.registry.services import artifact_create

    artifact = helpers.advance(
        artifact_create(node=node, by=users["reviewer"]), users["reviewer2"], "shadow"
    )
    client.force_login(users["viewer"])
    key = client.get("/api/registry/public-key/").json()
    assert key["algorithm"] == "Ed25519" and key["public_key"] == signing.public_key_b64()
    r = client.get("/api/registry/manifest/?platform=interpret")
    assert r.status_code == 200
    manifest = r.json()
    verify(key["public_key"], manifest["body"], manifest["signature"])
    entry = manifest["body"]["artifacts"][artifact.digest]
    verify(key["public_key"], entry["body"], entry["signature"])
    region = manifest["body"]["regions"][0]
    assert region["shadow"]["artifact"] == artifact.digest and region["default"] is None
    assert (
        client.get(
            "/api/registry/manifest/?platform=interpret", HTTP_IF_NONE_MATCH=r["ETag"]
        ).status_code
        == 304
    )
    assert client.get("/api/registry/manifest/?platform=cuda").json()["body"]["regions"] == []


def test_narrowing_through_the_api(client, node, users):
    from apps.registry.services import artifact_create

    artifact = artifact_create(node=node, by=users["reviewer"])
    client.force_login(users["reviewer"])
    wider = _post(client, f"/api/registry/artifacts/{artifact.pk}/narrow/", {"dtypes": ["float16"]})
    assert wider.status_code == 400 and "narrow only" in str(wider.json())
    new = _post(client, f"/api/registry/artifacts/{artifact.pk}/narrow/", {"dtypes": ["float32"]})
    assert new.status_code == 201 and new.json()["body"]["scope"]["dtypes"] == ["float32"]
    assert new.json()["supersedes"] == artifact.pk


def test_only_runtime_accounts_may_report_metrics(client, users):
    # A report can abort an artifact (a shadow mismatch), so readers may not send one.
    payload = {"client": "c1", "platform": "interpret", "counts": [], "shadow": []}
    client.force_login(users["viewer"])
    refused = client.post(
        "/api/registry/runtime/reports/", payload, content_type="application/json"
    )
    assert refused.status_code == 403
    assert "runtime" in refused.json()["detail"]
    client.force_login(users["runtime"])
    accepted = client.post(
        "/api/registry/runtime/reports/", payload, content_type="application/json"
    )
    assert accepted.status_code == 201, accepted.content
