"""A toolchain fingerprint that differs from an entry's provenance flags it; flagged entries are
retrieved only with a warning."""

import json
from datetime import date, timedelta

import pytest
from django.core.management import call_command

from apps.knowledge.selectors.retrieval import knowledge_retrieve
from apps.knowledge.services.revalidation import knowledge_revalidate

pytestmark = pytest.mark.django_db

H200 = {
    "platform": "cuda",
    "device": "NVIDIA H200",
    "compute_capability": "9.0",
    "driver": "580.159.04",
    "cuda": "13.0",
    "torch": "2.11.0+cu130",
    "triton": "3.6.0",
}
QUERY = {"problem_name": "softmax", "family": "softmax", "platform": "cuda", "mode": "seed"}


@pytest.fixture
def observed(make_entry):
    return make_entry(
        title="Softmax rows fit registers up to 16K",
        families=["softmax"],
        platforms=["cuda"],
        provenance=H200,
    )


def test_a_newer_triton_flags_the_entry_and_retrieval_warns(observed):
    assert knowledge_revalidate(fingerprint=H200) == []
    assert knowledge_retrieve(user=None, query=QUERY)[0]["warning"] == ""

    flagged = knowledge_revalidate(fingerprint={**H200, "triton": "3.9.0", "host": "gpu-7"})

    assert [(e.pk, why) for e, why in flagged] == [(observed.pk, "triton 3.6.0 -> 3.9.0")]
    observed.refresh_from_db()
    assert observed.status == "needs_revalidation"
    assert observed.status_note == "triton 3.6.0 -> 3.9.0"
    version = observed.versions.get(number=2)
    assert version.reason.startswith("Flagged for revalidation: triton 3.6.0 -> 3.9.0")
    [hit] = knowledge_retrieve(user=None, query=QUERY)
    assert hit["id"] == observed.pk
    assert "Needs revalidation (triton 3.6.0 -> 3.9.0)" in hit["warning"]
    assert hit["body"].startswith("[WARNING: Needs revalidation")


def test_patch_releases_and_other_platforms_do_not_flag(observed):
    assert knowledge_revalidate(fingerprint={**H200, "driver": "580.163.01"}) == []
    interpreter = {"platform": "interpret", "triton": "3.9.0", "torch": "2.13.0"}
    assert knowledge_revalidate(fingerprint=interpreter) == []
    assert knowledge_revalidate(fingerprint={**H200, "device": "NVIDIA B200"}) != []


def test_an_expired_entry_is_flagged(make_entry):
    # Saved while still valid (a past expiry is refused at save), then time passes.
    expires = date.today() + timedelta(days=1)
    make_entry(title="old", expires_on=expires)
    [(entry, why)] = knowledge_revalidate(fingerprint=None, today=expires + timedelta(days=1))
    assert why == f"expired on {expires.isoformat()}"


def test_retrieval_warns_about_a_campaign_fingerprint_without_writing(observed):
    newer = {**H200, "triton": "3.9.0"}
    [hit] = knowledge_retrieve(user=None, query=QUERY, fingerprint=newer)
    assert "another toolchain (triton 3.6.0 -> 3.9.0)" in hit["warning"]
    observed.refresh_from_db()
    assert observed.status == "active"


def test_command_reads_a_fingerprint_file(observed, tmp_path, capsys):
    path = tmp_path / "fp.json"
    path.write_text(json.dumps({**H200, "triton": "3.9.0"}))
    call_command("knowledge_revalidate", "--platform", "cuda", "--fingerprint", str(path))
    out = capsys.readouterr().out
    assert "flagged 1 entries" in out and "triton 3.6.0 -> 3.9.0" in out


def test_worker_reports_are_the_current_toolchain(observed, capsys):
    from django.utils import timezone

    from apps.campaigns.models import Campaign, Node, Problem
    from apps.knowledge.selectors.retrieval import knowledge_retriever

    problem = Problem.objects.create(name="silu", title="silu", family="elementwise", source="")
    campaign = Campaign.objects.create(name="c", problem=problem, platform="cuda")
    Node.objects.create(
        campaign=campaign,
        key="n1",
        generator="template",
        source="",
        status="accepted",
        report={"fingerprint": {**H200, "triton": "3.9.0"}},
        evaluated_at=timezone.now(),
    )
    [hit] = knowledge_retriever(user=None, platform="cuda")(QUERY)
    assert "another toolchain (triton 3.6.0 -> 3.9.0)" in hit["warning"]

    call_command("knowledge_revalidate", "--platform", "cuda", "--from-reports")
    assert "flagged 1 entries" in capsys.readouterr().out
    observed.refresh_from_db()
    assert observed.status == "needs_revalidation"
