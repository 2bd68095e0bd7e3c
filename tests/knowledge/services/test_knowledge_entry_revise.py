"""Every edit is a version with author and reason; revert restores content as a new version."""

from datetime import date, timedelta

import pytest
from django.core.exceptions import ValidationError

from apps.knowledge.models import Entry
from apps.knowledge.services.entries import (
    knowledge_entries_retire,
    knowledge_entry_curate,
    knowledge_entry_revert,
    knowledge_entry_revise,
)

pytestmark = pytest.mark.django_db


def test_each_edit_is_a_version_with_author_and_reason(make_entry, people):
    entry = make_entry(by=people["curator"], tags=["softmax"])
    entry = knowledge_entry_revise(
        entry=entry, by=people["curator"], reason="measured on H200", body="New body.", tags=["x"]
    )
    assert entry.version == 2
    versions = list(entry.versions.order_by("number"))
    assert [v.number for v in versions] == [1, 2]
    assert versions[0].snapshot["body"] == "Load the row once, reduce in float32."
    assert versions[0].snapshot["tags"] == ["softmax"]
    assert versions[1].snapshot["body"] == "New body."
    assert versions[1].author == people["curator"]
    assert versions[1].reason == "measured on H200"


def test_an_edit_needs_a_reason_and_a_change(make_entry, people):
    entry = make_entry()
    with pytest.raises(ValidationError, match="say why"):
        knowledge_entry_revise(entry=entry, by=people["curator"], reason=" ", body="x")
    with pytest.raises(ValidationError, match="nothing changed"):
        knowledge_entry_revise(entry=entry, by=people["curator"], reason="r", body=entry.body)
    assert entry.versions.count() == 1


def test_revert_restores_an_old_version_as_a_new_one(make_entry, people):
    entry = make_entry(title="Original", provenance={"triton": "3.6.0"})
    knowledge_entry_revise(
        entry=entry, by=people["curator"], reason="oops", title="Vandalised", provenance={}
    )
    entry = knowledge_entry_revert(entry=entry, by=people["admin"], number=1, reason="bad edit")
    entry.refresh_from_db()
    assert (entry.title, entry.provenance, entry.version) == ("Original", {"triton": "3.6.0"}, 3)
    latest = entry.versions.get(number=3)
    assert latest.reason == "Revert to version 1: bad edit"
    assert latest.author == people["admin"]
    with pytest.raises(ValidationError, match="current content"):
        knowledge_entry_revert(entry=entry, by=people["admin"], number=3)


def test_restricted_needs_a_group_and_public_drops_it(make_entry, people):
    with pytest.raises(ValidationError, match="group"):
        make_entry(visibility="restricted")
    entry = make_entry(visibility="restricted", group=people["group"])
    entry = knowledge_entry_revise(entry=entry, by=None, reason="publish", visibility="public")
    assert entry.group is None


def test_curation_guards_status_changes(make_entry, people):
    draft = make_entry(status="draft")
    with pytest.raises(ValidationError, match="cannot revalidated"):
        knowledge_entry_curate(entry=draft, by=people["curator"], action="revalidated")
    accepted = knowledge_entry_curate(entry=draft, by=people["curator"], action="accept")
    assert accepted.status == "active"
    assert accepted.versions.get(number=2).reason.startswith("Accept")


def test_bulk_retire_skips_entries_already_retired(make_entry, people):
    a, b = make_entry(title="a"), make_entry(title="b", status="retired")
    with pytest.raises(ValidationError):
        knowledge_entries_retire(entries=[a, b], by=people["curator"], reason="")
    retired = knowledge_entries_retire(entries=[a, b], by=people["curator"], reason="stale")
    assert [e.title for e in retired] == ["a"]
    a.refresh_from_db()
    assert a.status == "retired" and a.version == 2


def test_a_revision_cannot_leave_an_active_entry_expired(make_entry, people):
    entry = make_entry(expires_on=date.today() + timedelta(days=30))
    with pytest.raises(ValidationError, match="expiry date 2020-01-01 is in the past"):
        knowledge_entry_revise(
            entry=entry, by=people["curator"], reason="r", expires_on="2020-01-01"
        )
    with pytest.raises(ValidationError, match="unknown platform 'tpu'"):
        knowledge_entry_revise(entry=entry, by=people["curator"], reason="r", platforms=["tpu"])
    entry.refresh_from_db()
    assert entry.version == 1
    # Once flagged (or retired) an entry may keep the date it expired on; reactivating it
    # asks for a new one.
    Entry.objects.filter(pk=entry.pk).update(expires_on=date(2020, 1, 1))
    entry.refresh_from_db()
    with pytest.raises(ValidationError, match="in the past"):
        knowledge_entry_revise(entry=entry, by=people["curator"], reason="typo", body="Fixed.")
    retired = knowledge_entry_curate(entry=entry, by=people["curator"], action="retire")
    with pytest.raises(ValidationError, match="in the past"):
        knowledge_entry_curate(entry=retired, by=people["curator"], action="reactivate")
    later = date.today() + timedelta(days=90)
    revived = knowledge_entry_revise(
        entry=retired, by=people["curator"], reason="still holds", status="active", expires_on=later
    )
    assert (revived.status, revived.expires_on) == ("active", later)
