"""Markdown files with front matter: export -> import round trip, re-import, bad files."""

import pytest
from django.core.management import call_command

from apps.knowledge.markdown_files import entry_markdown, markdown_parse
from apps.knowledge.models import Entry
from apps.knowledge.selectors.exports import knowledge_export_files
from apps.knowledge.services.entries import entry_snapshot
from apps.knowledge.services.imports import knowledge_import

pytestmark = pytest.mark.django_db


def test_export_then_import_round_trips_every_field(starter, secret, people):
    files = knowledge_export_files(user=people["insider"])
    assert len(files) == len(starter.created) + 1
    before = {e.slug: entry_snapshot(e) for e in Entry.objects.all()}
    Entry.objects.all().delete()

    result = knowledge_import(files=files, by=people["partner_curator"])

    assert sorted(result.created) == sorted(before) and not result.errors
    after = {e.slug: entry_snapshot(e) for e in Entry.objects.all()}
    assert after == before
    again = knowledge_import(files=files, by=people["partner_curator"])
    assert sorted(again.unchanged) == sorted(before) and not again.created


def test_a_changed_file_becomes_a_new_version(make_entry, people):
    entry = make_entry(slug="softmax-note", provenance={"triton": "3.6.0"})
    text = entry_markdown(entry).replace("reduce in float32", "reduce in float32 (fp32 acc)")
    result = knowledge_import(files=[("softmax-note.md", text)], by=people["curator"])
    assert result.updated == ["softmax-note"]
    entry.refresh_from_db()
    assert entry.version == 2 and "(fp32 acc)" in entry.body
    assert entry.versions.get(number=2).reason == "Imported from softmax-note.md"


def test_bad_files_are_reported_one_by_one(make_entry, secret, people):
    restricted = entry_markdown(secret)
    files = [
        ("plain.md", "no front matter"),
        ("kind.md", "---\nslug: x\ntitle: X\nkind: rumour\n---\nbody"),
        ("group.md", restricted.replace("hopper-partners", "nobody").replace(secret.slug, "new")),
        ("hidden.md", restricted),
        ("good.md", "---\nslug: fine\ntitle: Fine\nkind: pattern\n---\nA body."),
    ]
    result = knowledge_import(files=files, by=people["curator"])
    assert result.created == ["fine"]
    assert "no front matter" in result.errors["plain.md"]
    assert "kind 'rumour'" in result.errors["kind.md"]
    assert "no group named 'nobody'" in result.errors["group.md"]
    # Curators see every entry; an importer outside the group (`--user` of the command) does not.
    assert result.unchanged == [secret.slug]
    outsider = knowledge_import(files=[("hidden.md", restricted)], by=people["viewer"])
    assert "may not see" in outsider.errors["hidden.md"]


def test_front_matter_is_yaml_with_lists_and_provenance(starter):
    entry = Entry.objects.get(slug="hopper-h200-copy-bandwidth")
    meta = markdown_parse(entry_markdown(entry))
    assert meta["provenance"]["compute_capability"] == "9.0"
    assert meta["platforms"] == ["cuda"] and "4.16 TB/s" in meta["body"]


def test_commands_export_and_import_a_directory(starter, tmp_path, capsys):
    call_command("knowledge_export", str(tmp_path))
    assert len(list(tmp_path.glob("*.md"))) == len(starter.created)
    Entry.objects.all().delete()
    call_command("knowledge_import", str(tmp_path))
    assert f"{len(starter.created)} created" in capsys.readouterr().out


def test_an_active_file_past_its_expiry_is_imported_as_needing_revalidation(people):
    text = "---\nslug: old-note\ntitle: Old note\nkind: pattern\nexpires_on: 2020-01-01\n---\nBody."
    result = knowledge_import(files=[("old-note.md", text)], by=people["curator"])
    assert result.created == ["old-note"], result.errors
    entry = Entry.objects.get(slug="old-note")
    assert (entry.status, entry.status_note) == ("needs_revalidation", "expired on 2020-01-01")
    rocm = text.replace("old-note", "rocm-note").replace("kind:", "platforms: [rocm]\nkind:")
    refused = knowledge_import(files=[("rocm-note.md", rocm)], by=people["curator"])
    assert "unknown platform 'rocm'" in refused.errors["rocm-note.md"]
