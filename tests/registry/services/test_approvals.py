"""Approval rules: never the campaign's author, N per stage, lapse when the content changes."""

import pytest
from django.core.exceptions import PermissionDenied
from django.db import connection

from apps.registry.models import Artifact
from apps.registry.selectors import artifact_gates, current_approvals
from apps.registry.services import (
    RegistryError,
    artifact_approve,
    artifact_create,
    artifact_narrow,
    artifact_promote,
)


@pytest.mark.django_db
def test_the_campaign_author_cannot_approve_even_as_reviewer(node, users):
    artifact = artifact_create(node=node, by=users["reviewer"])
    with pytest.raises(RegistryError, match="authored campaign"):
        artifact_approve(artifact=artifact, by=users["author"])
    with pytest.raises(PermissionDenied):
        artifact_approve(artifact=artifact, by=users["viewer"])
    with pytest.raises(PermissionDenied):
        artifact_promote(artifact=artifact, by=users["engineer"])
    with pytest.raises(RegistryError, match="needs 1 approval"):
        artifact_promote(artifact=artifact, by=users["reviewer"])
    artifact_approve(artifact=artifact, by=users["reviewer"])
    with pytest.raises(RegistryError, match="already approved"):
        artifact_approve(artifact=artifact, by=users["reviewer"])
    assert artifact_promote(artifact=artifact, by=users["reviewer"]).stage == "shadow"


@pytest.mark.django_db
def test_a_stage_can_require_two_approvals(node, users):
    artifact = artifact_create(node=node, by=users["reviewer"])
    region = artifact.region
    region.required_approvals = {"shadow": 2}
    region.save()
    artifact_approve(artifact=artifact, by=users["reviewer"])
    with pytest.raises(RegistryError, match="needs 2 approval.*has 1"):
        artifact_promote(artifact=artifact, by=users["reviewer"])
    artifact_approve(artifact=artifact, by=users["admin"])
    assert artifact_promote(artifact=artifact, by=users["reviewer2"]).stage == "shadow"
    events = [e.kind for e in region.events.order_by("id")]
    assert events == ["created", "approved", "approved", "promoted"]


@pytest.mark.django_db
def test_approvals_lapse_when_the_artifact_changes(node, users):
    artifact = artifact_create(node=node, by=users["reviewer"])
    artifact_approve(artifact=artifact, by=users["reviewer"])
    # Narrowing is a change: a new artifact, with none of the old one's approvals.
    narrowed = artifact_narrow(artifact=artifact, by=users["reviewer"], dtypes=["float32"])
    assert current_approvals(artifact=narrowed, stage="shadow") == []
    with pytest.raises(RegistryError, match="has 0"):
        artifact_promote(artifact=narrowed, by=users["reviewer"])
    # A change behind the ORM's back (one byte of source in the database) lapses them too,
    # and the signature gate refuses the artifact.
    other = artifact_create(node=node, by=users["reviewer2"])
    artifact_approve(artifact=other, by=users["reviewer"])
    assert len(current_approvals(artifact=other, stage="shadow")) == 1
    body = dict(other.body, source=other.body["source"].replace("softmax", "softmaX", 1))
    with connection.cursor() as cur:
        import json

        cur.execute(
            "UPDATE registry_artifact SET body = %s WHERE id = %s", [json.dumps(body), other.pk]
        )
    other = Artifact.objects.get(pk=other.pk)
    assert current_approvals(artifact=other, stage="shadow") == []
    assert artifact_gates(artifact=other)[0].status == "fail"
