"""Restricting an entry to a group the editor is not in: the edit page warns and asks for a tick
before saving, and once saved the entry stays visible to its curators and admins (issue 12,
defect 6: the save redirected to a 404 and the curator and admin were locked out)."""

import pytest
from django.test import Client

from apps.knowledge.models import Entry

pytestmark = pytest.mark.django_db


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def form_data(entry: Entry, **changes) -> dict:
    data = {
        "title": entry.title,
        "body": entry.body,
        "kind": entry.kind,
        "visibility": "public",
        "reason": "partners only",
    }
    return {**data, **changes}


def test_restricting_to_a_group_one_is_not_in_asks_for_a_tick_first(make_entry, people):
    entry = make_entry(by=people["curator"])
    curator = client_for(people["curator"])
    data = form_data(entry, visibility="restricted", group="hopper-partners")

    refused = curator.post(f"/knowledge/{entry.pk}/edit/", data)

    assert refused.status_code == 400
    page = refused.content.decode()
    assert "You are not in hopper-partners." in page
    assert 'name="confirm_group"' in page and "required" in page
    entry.refresh_from_db()
    assert (entry.visibility, entry.version) == ("public", 1)

    saved = curator.post(f"/knowledge/{entry.pk}/edit/", {**data, "confirm_group": "on"})

    assert saved.status_code == 302 and saved.url == f"/knowledge/{entry.pk}/"
    entry.refresh_from_db()
    assert (entry.visibility, entry.group.name) == ("restricted", "hopper-partners")
    assert entry.version == 2
    for role in ("curator", "admin", "insider"):
        page = client_for(people[role]).get(saved.url)
        assert page.status_code == 200, role
        assert entry.title in page.content.decode()
    assert client_for(people["curator"]).get(f"/knowledge/{entry.pk}/edit/").status_code == 200
    assert client_for(people["viewer"]).get(saved.url).status_code == 404


def test_no_tick_for_a_group_one_is_in_or_one_already_chosen(make_entry, people):
    entry = make_entry()
    partner = client_for(people["partner_curator"])
    data = form_data(entry, visibility="restricted", group="hopper-partners")
    assert partner.post(f"/knowledge/{entry.pk}/edit/", data).status_code == 302
    # An outsider editing the body keeps the group without being asked again.
    curator = client_for(people["curator"])
    again = curator.post(f"/knowledge/{entry.pk}/edit/", {**data, "body": "New body."})
    assert again.status_code == 302
    entry.refresh_from_db()
    assert (entry.body, entry.version) == ("New body.", 3)


def test_new_entry_restricted_to_another_group_needs_the_tick(people):
    curator = client_for(people["curator"])
    data = {
        "title": "Partner tile limits",
        "body": "Confidential.",
        "kind": "hardware_rule",
        "visibility": "restricted",
        "group": "hopper-partners",
        "reason": "new",
    }
    assert curator.post("/knowledge/new/", data).status_code == 400
    assert not Entry.objects.exists()
    created = curator.post("/knowledge/new/", {**data, "confirm_group": "on"})
    assert created.status_code == 302
    assert curator.get(created.url).status_code == 200


def test_the_warning_appears_as_the_group_is_chosen(make_entry, people):
    entry = make_entry()
    curator = client_for(people["curator"])
    edit = curator.get(f"/knowledge/{entry.pk}/edit/").content.decode()
    assert 'hx-get="/knowledge/group-check/"' in edit and '<div id="group-warning">' in edit
    url = f"/knowledge/group-check/?entry={entry.pk}&visibility=restricted&group=hopper-partners"
    warning = curator.get(url, HTTP_HX_REQUEST="true").content.decode()
    assert warning.startswith('<div id="group-warning">')
    assert "You are not in hopper-partners." in warning and 'name="confirm_group"' in warning
    public = curator.get(url.replace("restricted", "public"), HTTP_HX_REQUEST="true")
    assert "confirm_group" not in public.content.decode()
    member = client_for(people["partner_curator"]).get(url, HTTP_HX_REQUEST="true")
    assert "confirm_group" not in member.content.decode()
    assert client_for(people["viewer"]).get(url).status_code == 403
