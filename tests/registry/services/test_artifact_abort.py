"""Aborting an artifact (`services.promotion.artifact_abort`): an approver with a reason takes a
candidate, shadow or canary out of the way, on the record; a default leaves by rollback
instead, and an aborted one stays aborted."""

import pytest
from django.core.exceptions import PermissionDenied

from apps.registry.services import RegistryError, artifact_abort, artifact_create
from tests.registry import helpers


@pytest.mark.django_db
def test_an_approver_aborts_a_shadow_with_a_reason_on_the_record(users):
    artifact = artifact_create(node=helpers.accepted_node(users["author"]), by=users["reviewer"])
    artifact = helpers.advance(artifact, users["reviewer"], "shadow")
    with pytest.raises(PermissionDenied):
        artifact_abort(artifact=artifact, by=users["engineer"], reason="mine")
    with pytest.raises(RegistryError, match="reason"):
        artifact_abort(artifact=artifact, by=users["reviewer"], reason="  ")
    artifact.refresh_from_db()
    assert artifact.stage == "shadow"

    aborted = artifact_abort(artifact=artifact, by=users["reviewer"], reason="wrong dtype")
    assert aborted.stage == "aborted"
    event = artifact.region.events.order_by("-id").first()
    assert (event.kind, event.from_stage, event.to_stage) == ("aborted", "shadow", "aborted")
    assert event.reason == "wrong dtype" and event.actor_name == "reg-reviewer"
    assert not artifact.alarms.exists()  # a person's decision raises no alarm

    with pytest.raises(RegistryError, match="cannot abort"):
        artifact_abort(artifact=aborted, by=users["admin"], reason="again")


@pytest.mark.django_db
def test_a_default_is_not_aborted_but_rolled_back(users):
    artifact = artifact_create(node=helpers.accepted_node(users["author"]), by=users["reviewer"])
    artifact = helpers.advance(artifact, users["reviewer"], "default")
    with pytest.raises(RegistryError, match="default: cannot abort"):
        artifact_abort(artifact=artifact, by=users["admin"], reason="slow")
    artifact.refresh_from_db()
    assert artifact.stage == "default"
