"""Freezing an artifact derives its region from the problem's `get_inputs`: the problem's own
code, run behind the sandbox boundary (never in the web server, never with its rights)."""

import pytest

from apps.registry.services.artifacts import _derive_scope
from apps.registry.services.common import RegistryError
from tests.campaigns.support.builders import PROBLEM_SOURCE


def test_the_region_of_an_honest_problem(tmp_path):
    scope = _derive_scope(PROBLEM_SOURCE, '[{"overrides": {}, "dtype": "float32"}]')
    assert scope["dtypes"] == ["float32"] and scope["inputs"]


def test_a_hostile_get_inputs_reaches_nothing_and_says_why(tmp_path):
    marker = tmp_path / "pwned"
    source = PROBLEM_SOURCE.replace(
        "def get_inputs():", f"def get_inputs():\n    open({str(marker)!r}, 'w').write('x')", 1
    )
    assert source != PROBLEM_SOURCE
    with pytest.raises(RegistryError, match="could not derive the region"):
        _derive_scope(source, '[{"overrides": {}, "dtype": "float32"}]')
    assert not marker.exists()
