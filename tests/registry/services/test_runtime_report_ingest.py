"""runtime_report_ingest: counts stored per cell, alarms for coverage drops and kernel errors."""

import pytest

from apps.registry.models import Alarm, RuntimeCount
from apps.registry.services import artifact_create
from tests.registry import helpers


def _count(artifact, path, calls, errors=0):
    return helpers.count_row(artifact, path, calls, [1.0] * min(calls, 5), errors)


@pytest.mark.django_db
def test_coverage_drop_and_kernel_errors_raise_alarms(users):
    a = artifact_create(node=helpers.accepted_node(users["author"]), by=users["reviewer"])
    a = helpers.advance(a, users["reviewer2"], "default")
    helpers.report(counts=[_count(a, "default", 20)], client="pod-1")
    assert not Alarm.objects.filter(kind="coverage_drop").exists()
    helpers.report(
        counts=[_count(a, "default", 5, errors=2), _count(a, "fallback", 15)], client="pod-1"
    )
    drop = Alarm.objects.get(kind="coverage_drop")
    assert "100% to 25%" in drop.message and drop.operator == "softmax"
    assert Alarm.objects.filter(kind="kernel_error", artifact=a).exists()
    # Same alarm again stays one open alarm.
    helpers.report(counts=[_count(a, "default", 5, errors=1)], client="pod-1")
    assert Alarm.objects.filter(kind="kernel_error", artifact=a).count() == 1
    assert sum(c.calls for c in RuntimeCount.objects.filter(region=a.region)) >= 45
