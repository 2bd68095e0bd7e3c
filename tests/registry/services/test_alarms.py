"""Registry alarms (`services.alarms`): one open alarm per kind and place however often it is
raised, resolved only by someone who may approve promotions, and once resolved a new one can
open again."""

import pytest
from django.core.exceptions import PermissionDenied

from apps.registry.constants import AlarmKind
from apps.registry.models import Alarm
from apps.registry.services import artifact_create
from apps.registry.services.alarms import alarm_raise, alarm_resolve
from tests.registry import helpers


@pytest.mark.django_db
def test_an_alarm_is_raised_once_per_kind_and_place_until_resolved(users):
    artifact = artifact_create(node=helpers.accepted_node(users["author"]), by=users["reviewer"])
    first = alarm_raise(kind=AlarmKind.KERNEL_ERROR, message="raised 3 times", artifact=artifact)
    again = alarm_raise(kind=AlarmKind.KERNEL_ERROR, message="raised 4 times", artifact=artifact)
    other = alarm_raise(kind=AlarmKind.SHADOW_MISMATCH, message="mismatch", artifact=artifact)
    assert again.pk == first.pk and other.pk != first.pk
    assert first.message == "raised 3 times"  # the first report stands; no duplicate opened
    # the artifact's region, operator and platform are filled in from the artifact
    assert first.region_id == artifact.region_id
    assert (first.operator, first.platform) == (artifact.region.operator, artifact.region.platform)
    assert Alarm.objects.filter(resolved_at__isnull=True).count() == 2

    with pytest.raises(PermissionDenied):
        alarm_resolve(alarm=first, by=users["engineer"])
    first.refresh_from_db()
    assert first.resolved_at is None

    resolved = alarm_resolve(alarm=first, by=users["reviewer"])
    assert resolved.resolved_at is not None and resolved.resolved_by == users["reviewer"]
    at = resolved.resolved_at
    assert alarm_resolve(alarm=first, by=users["admin"]).resolved_at == at  # already resolved

    reopened = alarm_raise(kind=AlarmKind.KERNEL_ERROR, message="again", artifact=artifact)
    assert reopened.pk != first.pk and reopened.resolved_at is None


@pytest.mark.django_db
def test_an_alarm_without_an_artifact_names_its_operator(users):
    alarm = alarm_raise(
        kind=AlarmKind.COVERAGE_DROP, message="coverage 40%", operator="softmax", platform="cuda"
    )
    assert (alarm.operator, alarm.platform, alarm.region, alarm.artifact) == (
        "softmax", "cuda", None, None,
    )  # fmt: skip
    assert alarm_raise(kind=AlarmKind.COVERAGE_DROP, message="x", operator="softmax").pk == alarm.pk
