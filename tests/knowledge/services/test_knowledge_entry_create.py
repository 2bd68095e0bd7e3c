"""Creating an entry refuses an expiry in the past (it was saved as active) and platforms the
workers do not run (issue 12, defect 7)."""

from datetime import date, timedelta

import pytest
from django.core.exceptions import ValidationError

from apps.knowledge.models import Entry

pytestmark = pytest.mark.django_db


def test_an_expiry_in_the_past_is_refused(make_entry):
    with pytest.raises(ValidationError, match="expiry date 2020-01-01 is in the past"):
        make_entry(expires_on=date(2020, 1, 1))
    with pytest.raises(ValidationError, match="in the past"):
        make_entry(expires_on=(date.today() - timedelta(days=1)).isoformat())
    assert not Entry.objects.exists()
    today = make_entry(title="valid today", expires_on=date.today())
    assert today.status == "active" and today.expires_on == date.today()


def test_an_entry_that_is_not_active_may_carry_a_past_expiry(make_entry):
    retired = make_entry(title="kept for the record", status="retired", expires_on="2020-01-01")
    assert retired.expires_on == date(2020, 1, 1)


def test_unknown_platforms_are_refused(make_entry):
    with pytest.raises(ValidationError, match="unknown platform 'rocm'"):
        make_entry(platforms=["cuda", "rocm"])
    with pytest.raises(ValidationError, match="entries apply to interpret, cuda"):
        make_entry(platforms="h200")
    entry = make_entry(platforms=["CUDA", " interpret "])
    assert entry.platform_list == ["cuda", "interpret"]
    assert make_entry(title="everywhere", platforms=[]).platform_list == []
