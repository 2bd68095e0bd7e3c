"""The starter set loads once (running it again changes nothing) and every entry says where it
comes from; measured entries carry the fingerprint they were measured under."""

import pytest
from django.core.management import call_command

from apps.knowledge.models import Entry

pytestmark = pytest.mark.django_db


def test_starter_set_loads_idempotently(capsys):
    call_command("knowledge_load_starter")
    call_command("knowledge_load_starter")
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("knowledge starter: 19 created")
    assert out[1] == "knowledge starter: 0 created, 0 updated, 19 unchanged"
    assert Entry.objects.filter(origin="starter", status="active", version=1).count() == 19


def test_every_starter_entry_has_honest_provenance(starter):
    kinds = set()
    for entry in Entry.objects.all():
        kinds.add(entry.kind)
        assert entry.provenance.get("source"), entry.slug
        if entry.platform_list == ["cuda"] and entry.kind != "constraint":
            prov = entry.provenance
            assert prov["device"] == "NVIDIA H200" and prov["triton"] == "3.6.0", entry.slug
            assert prov.get("benchmark_range"), entry.slug
    assert kinds == {
        "hardware_rule",
        "compiler_behaviour",
        "pattern",
        "failed_approach",
        "constraint",
    }
