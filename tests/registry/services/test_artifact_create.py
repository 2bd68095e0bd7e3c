"""artifact_create / artifact_narrow: region from the workload passed, signature, narrowing."""

import pytest
from django.core.exceptions import PermissionDenied

from apps.registry.models import Artifact, ArtifactImmutable
from apps.registry.selectors import artifact_gates
from apps.registry.services import RegistryError, artifact_create, artifact_narrow
from workers.runtime.signing import digest, verify


@pytest.mark.django_db
def test_artifact_is_signed_with_region_from_the_workload(node, users):
    from apps.registry import signing

    artifact = artifact_create(node=node, by=users["reviewer"])
    body = artifact.body
    assert body["operator"] == "softmax" and body["platform"] == "interpret"
    # smoke workload: b8_d96 float32 and b5_d40 bfloat16
    assert body["scope"]["dtypes"] == ["bfloat16", "float32"]
    assert body["scope"]["constants"] == {"batch_size": [5, 8], "dim": [40, 96]}
    assert body["scope"]["inputs"] == [[[5, 8], [40, 96]]]
    assert body["source"] == node.source
    assert body["binaries"][0]["cubin_sha256"]
    assert body["toolchain"]["triton"]
    assert body["backend"] == "triton" and body["binaries"][0]["backend"] == "triton"
    assert artifact.digest == digest(body)
    verify(signing.public_key_b64(), body, artifact.signature)
    assert artifact.region.default_artifact is None
    assert artifact.events.get().kind == "created"
    assert artifact_gates(artifact=artifact)[0].status == "pass"


@pytest.mark.django_db
def test_only_reviewers_freeze_and_only_accepted_nodes(node, users):
    with pytest.raises(PermissionDenied, match="reviewer"):
        artifact_create(node=node, by=users["engineer"])
    node.status = "rejected"
    node.save()
    with pytest.raises(RegistryError, match="only accepted"):
        artifact_create(node=node, by=users["reviewer"])


@pytest.mark.django_db
def test_frozen_content_cannot_be_saved_or_deleted(node, users):
    artifact = artifact_create(node=node, by=users["reviewer"])
    artifact.body = {**artifact.body, "source": artifact.body["source"] + "#"}
    with pytest.raises(ArtifactImmutable):
        artifact.save()
    with pytest.raises(ArtifactImmutable):
        artifact.delete()
    assert Artifact.objects.get(pk=artifact.pk).source == node.source


@pytest.mark.django_db
def test_narrowing_makes_a_new_artifact_and_refuses_widening(node, users):
    artifact = artifact_create(node=node, by=users["reviewer"])
    narrow = artifact_narrow(artifact=artifact, by=users["reviewer"], dtypes=["float32"])
    assert narrow.pk != artifact.pk and narrow.digest != artifact.digest
    assert narrow.scope["dtypes"] == ["float32"]
    assert narrow.scope["inputs"] == [[[8, 8], [96, 96]]]
    assert narrow.region_id == artifact.region_id and narrow.supersedes_id == artifact.pk
    artifact.refresh_from_db()
    assert artifact.stage == "aborted" and "superseded" in artifact.stage_reason
    with pytest.raises(RegistryError, match="narrow only"):
        artifact_narrow(artifact=narrow, by=users["reviewer"], dtypes=["float32", "float16"])
    with pytest.raises(RegistryError, match="narrow only"):
        artifact_create(node=node, by=users["reviewer"], constants={"dim": [40, 4096]})
