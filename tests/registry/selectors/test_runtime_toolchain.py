"""The serving toolchain as the gates read it: fingerprints stored before reports were
validated (any JSON) are skipped, never read with .get()."""

import pytest
from django.utils import timezone

from apps.registry.models import RuntimeReport
from apps.registry.selectors.gates import runtime_toolchain, toolchain_of

pytestmark = pytest.mark.django_db


def _stored(fingerprint) -> RuntimeReport:
    now = timezone.now()
    return RuntimeReport.objects.create(
        client="c", platform="interpret", fingerprint=fingerprint, window_start=now, window_end=now
    )


def test_a_bad_stored_fingerprint_is_skipped_for_the_last_good_one():
    assert runtime_toolchain(platform="interpret") is None
    _stored([[[{"a": [1]}]]])
    assert runtime_toolchain(platform="interpret") is None
    _stored({"torch": "2.5.1", "triton": "3.1.0", "host": "h"})
    _stored("a string")
    toolchain = runtime_toolchain(platform="interpret")
    assert toolchain["torch"] == "2.5.1" and toolchain["triton"] == "3.1.0"


def test_non_scalar_toolchain_values_read_as_unknown():
    assert toolchain_of({"torch": {"v": 1}, "triton": "3.1.0"})["torch"] is None
    assert toolchain_of([1, 2]) == dict.fromkeys(toolchain_of({}))
