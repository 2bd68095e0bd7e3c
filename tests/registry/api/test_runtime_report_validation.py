"""A runtime report of the wrong shape is refused at the boundary (400 naming the field), and
rows stored before that check do not break the pages that read them."""

import pytest

from apps.registry.models import RuntimeReport, ShadowResult
from apps.registry.services import artifact_create

pytestmark = pytest.mark.django_db

URL = "/api/registry/runtime/reports/"


def _report(**overrides) -> dict:
    return {"client": "c1", "platform": "interpret", "counts": [], "shadow": [], **overrides}


def _post(client, payload):
    return client.post(URL, payload, content_type="application/json")


@pytest.mark.parametrize(
    ("payload", "field", "message"),
    [
        (_report(fingerprint=[[[{"a": [1]}]]]), "fingerprint", "must be an object"),
        (_report(fingerprint={"torch": {"v": "2.5"}}), "fingerprint", "torch: must be a string"),
        (_report(fingerprint={"torch": "x" * 201}), "fingerprint", "at most 200 characters"),
        (_report(manifest_version=-1), "manifest_version", "greater than or equal to 0"),
        (_report(manifest_version=10**30), "manifest_version", "less than or equal to"),
        (
            _report(counts=[{"operator": "softmax", "path": "default", "calls": 2**40}]),
            "counts",
            "less than or equal to",
        ),
        (
            _report(counts=[{"operator": "s", "path": "default", "calls": 1, "dtype": "x" * 21}]),
            "counts",
            "no more than 20 characters",
        ),
        (
            _report(shadow=[{"artifact": "a", "samples": 1, "mismatches": 1, "cases": [[1]]}]),
            "shadow",
            "must be an object",
        ),
        (
            _report(shadow=[{"artifact": "a", "samples": 1, "mismatches": 2}]),
            "shadow",
            "more mismatches than samples",
        ),
    ],
)
def test_malformed_report_is_a_400_naming_the_field(client, users, payload, field, message):
    client.force_login(users["runtime"])
    response = _post(client, payload)
    assert response.status_code == 400, response.content
    assert field in response.json() and message in str(response.json()[field])
    assert not RuntimeReport.objects.exists()


def test_a_report_as_the_dispatch_client_sends_it_is_accepted(client, users):
    client.force_login(users["runtime"])
    fingerprint = {
        "platform": "interpret",
        "device": "cpu (Triton interpreter)",
        "compute_capability": None,
        "torch": "2.5.1",
        "cpus": 2,
        "memory_bytes": 150_000_000_000,
    }
    mismatch = {
        "case": "b5_d40_bf16",
        "dtype": "bfloat16",
        "shapes": [[5, 40], None],
        "constants": {"dim": 40},
        "reason": "output 0: 3 of 200 elements out of tolerance",
        "max_abs_err": 0.5,
        "nan": False,
    }
    payload = _report(
        manifest_version=3,
        fingerprint=fingerprint,
        window_start=1.7e9,
        window_end=1.7e9 + 10,
        counts=[{"operator": "softmax", "path": "fallback", "calls": 5, "latency_ms": [0.1]}],
        shadow=[{"artifact": "f" * 64, "samples": 2, "mismatches": 1, "cases": [mismatch]}],
    )
    assert _post(client, payload).status_code == 201
    assert RuntimeReport.objects.get().fingerprint == fingerprint


def test_pages_and_api_survive_a_bad_fingerprint_stored_before_validation(client, node, users):
    artifact = artifact_create(node=node, by=users["reviewer"])
    RuntimeReport.objects.create(
        client="old", platform="interpret", fingerprint=[[[{"a": [1]}]]], window_start=
        artifact.created_at, window_end=artifact.created_at,
    )  # fmt: skip
    ShadowResult.objects.create(
        report=RuntimeReport.objects.get(),
        artifact=artifact,
        region=artifact.region,
        samples=1,
        mismatches=1,
        cases=[[1], "x"],
    )
    client.force_login(users["reviewer"])
    detail = client.get(f"/api/registry/artifacts/{artifact.pk}/")
    assert detail.status_code == 200
    toolchain = next(g for g in detail.json()["gates"] if g["gate"] == "toolchain")
    assert toolchain["status"] == "pass" and "no runtime client has reported" in toolchain["reason"]
    assert client.get(f"/registry/artifacts/{artifact.pk}/").status_code == 200
    assert client.get(f"/registry/{artifact.region.operator}/").status_code == 200
