"""Knowledge pages through Django's client: search and filters (full page and htmx fragment),
edit with preview, history and revert, curation queue, bulk retire, import/export, roles."""

import io
import zipfile

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from apps.knowledge.models import Entry

pytestmark = pytest.mark.django_db


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_search_filters_and_htmx_fragment(starter, people):
    viewer = client_for(people["viewer"])
    page = viewer.get("/knowledge/").content.decode()
    assert "H200 copy bandwidth is 4.16 TB/s" in page and 'id="kb-search"' in page
    found = viewer.get("/knowledge/?q=bf16+upcast").content.decode()
    assert "interpreter computes bf16 arithmetic wrongly" in found
    assert "H200 copy bandwidth" not in found
    matmul = viewer.get("/knowledge/?family=matmul&kind=failed_approach").content.decode()
    assert "64x64x32 float32 tl.dot tile" in matmul and "SiLU" not in matmul
    fragment = viewer.get("/knowledge/?platform=interpret", HTTP_HX_REQUEST="true")
    html = fragment.content.decode()
    assert html.lstrip().startswith('<div id="kb-results">') and "<html" not in html
    assert "Triton interpreter computes bf16" in html and "H200 copy bandwidth" not in html
    tagged = viewer.get("/knowledge/?tag=anti-cheat").content.decode()
    assert tagged.count('<tr id="entry-') == 2
    assert "Retire selected" not in page  # viewers get no curator controls


def test_entry_page_shows_provenance_and_evidence(starter, people):
    entry = Entry.objects.get(slug="hopper-h200-copy-bandwidth")
    page = client_for(people["viewer"]).get(f"/knowledge/{entry.pk}/").content.decode()
    assert "NVIDIA H200" in page and "580.159.04" in page and "Benchmark range" in page
    assert "<strong>4.16 TB/s</strong>" in page


def test_editors_need_the_curator_role(make_entry, people):
    entry = make_entry()
    for role in ("viewer", "engineer"):
        response = client_for(people[role]).get(f"/knowledge/{entry.pk}/edit/")
        assert response.status_code == 403
        assert "roles that have it: curator, admin" in response.content.decode()


def test_edit_preview_history_and_revert(make_entry, people):
    entry = make_entry(provenance={"device": "NVIDIA H200", "notes_extra": "kept"})
    curator = client_for(people["curator"])
    form = curator.get(f"/knowledge/{entry.pk}/edit/").content.decode()
    assert 'hx-post="/knowledge/preview/"' in form and "NVIDIA H200" in form
    preview = curator.post("/knowledge/preview/", {"body": "**bold**"}).content.decode()
    assert "<strong>bold</strong>" in preview
    data = {
        "title": "Row softmax, revised",
        "body": "Load once.\r\nReduce in fp32.",
        "kind": "pattern",
        "tags": "softmax, Reduction",
        "families": "softmax",
        "platforms": "cuda",
        "visibility": "public",
        "prov_device": "NVIDIA H200",
        "prov_triton": "3.6.0",
        "reason": "",
    }
    assert curator.post(f"/knowledge/{entry.pk}/edit/", data).status_code == 400
    data["reason"] = "add provenance"
    response = curator.post(f"/knowledge/{entry.pk}/edit/", data)
    assert response.status_code == 302
    entry.refresh_from_db()
    assert entry.version == 2 and entry.tag_list == ["softmax", "reduction"]
    assert entry.provenance == {"device": "NVIDIA H200", "triton": "3.6.0", "notes_extra": "kept"}
    assert entry.body == "Load once.\nReduce in fp32."
    history = curator.get(f"/knowledge/{entry.pk}/history/").content.decode()
    assert "add provenance" in history and "curator" in history
    assert "Row softmax, revised" in history and "+ Reduce in fp32." in history
    version = curator.get(f"/knowledge/{entry.pk}/versions/2/").content.decode()
    assert "Changes since v1" in version
    curator.post(f"/knowledge/{entry.pk}/versions/1/revert/", {"reason": "undo"})
    entry.refresh_from_db()
    assert entry.version == 3 and entry.title == "Row softmax in one pass"


def test_curation_queue_accepts_drafts_over_htmx(make_entry, people):
    draft = make_entry(title="A draft finding", status="draft")
    flagged = make_entry(title="Stale", status="needs_revalidation", status_note="triton 3.6→3.9")
    curator = client_for(people["curator"])
    queue = curator.get("/knowledge/curation/").content.decode()
    assert "A draft finding" in queue and "triton 3.6→3.9" in queue
    row = curator.post(
        f"/knowledge/{draft.pk}/curate/", {"action": "accept"}, HTTP_HX_REQUEST="true"
    ).content.decode()
    assert row.startswith(f'<tr id="queue-{draft.pk}">') and "accept: done" in row
    draft.refresh_from_db()
    assert draft.status == "active"
    curator.post(f"/knowledge/{flagged.pk}/curate/", {"action": "revalidated", "reason": "ok"})
    flagged.refresh_from_db()
    assert flagged.status == "active"
    assert client_for(people["viewer"]).get("/knowledge/curation/").status_code == 403


def test_bulk_retire(make_entry, people):
    a, b, c = (make_entry(title=t) for t in "abc")
    curator = client_for(people["curator"])
    curator.post("/knowledge/retire/", {"entry": [a.pk, b.pk], "reason": "superseded"})
    statuses = dict(Entry.objects.values_list("title", "status"))
    assert statuses == {"a": "retired", "b": "retired", "c": "active"}
    page = curator.get("/knowledge/").content.decode()
    assert ">c</a>" in page and ">a</a>" not in page
    assert ">a</a>" in curator.get("/knowledge/?status=retired").content.decode()


def test_export_zip_and_import_upload(make_entry, people):
    make_entry(slug="kept-in-git", title="Kept in git")
    archive = client_for(people["viewer"]).get("/knowledge/export/")
    with zipfile.ZipFile(io.BytesIO(archive.content)) as zf:
        assert zf.namelist() == ["knowledge/kept-in-git.md"]
        text = zf.read("knowledge/kept-in-git.md").decode()
    upload = SimpleUploadedFile("copy.md", text.replace("kept-in-git", "copy").encode())
    page = client_for(people["curator"]).post("/knowledge/import/", {"files": [upload]})
    assert "Created 1, updated 0" in page.content.decode()
    assert Entry.objects.filter(slug="copy").exists()


def test_entry_page_lists_evidence_without_reading_node_reports(starter, people):
    """The evidence list shows a node's key, status and campaign id; it loaded each node's
    report (~150 kB of JSON) and its campaign's engine state."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from tests.campaigns.support.builders import build_campaign

    campaign = build_campaign(nodes=4, user=people["engineer"], seed=7, name="evidence run")
    node = campaign.best_node
    entry = Entry.objects.get(slug="hopper-h200-copy-bandwidth")
    entry.evidence_campaigns.add(campaign)
    entry.evidence_nodes.add(node)
    viewer = client_for(people["viewer"])
    with CaptureQueriesContext(connection) as queries:
        page = viewer.get(f"/knowledge/{entry.pk}/").content.decode()
    assert f"campaign {campaign.pk}: evidence run" in page
    assert f"node {node.key} of campaign {campaign.pk}" in page
    assert f'<span class="badge {node.status}">' in page
    sql = " ".join(q["sql"] for q in queries.captured_queries)
    assert '"campaigns_node"."report"' not in sql and "engine_state" not in sql


def test_search_page_unicode_and_symbols(make_entry, people):
    make_entry(title="Notes on ünïcødé kernels")
    make_entry(title="Checked ✓ note")
    viewer = client_for(people["viewer"])
    found = viewer.get("/knowledge/", {"q": "ünïcødé"}).content.decode()
    assert "Notes on ünïcødé kernels" in found and "Checked ✓ note" not in found
    symbols = viewer.get("/knowledge/", {"q": "✓"}, HTTP_HX_REQUEST="true").content.decode()
    assert "Nothing to search for: “✓” has no letter or digit." in symbols
    assert 'id="entry-' not in symbols


def test_edit_page_refuses_a_past_expiry_and_unknown_platforms(make_entry, people):
    entry = make_entry()
    curator = client_for(people["curator"])
    data = {
        "title": entry.title,
        "body": entry.body,
        "kind": "pattern",
        "visibility": "public",
        "reason": "update",
    }
    past = curator.post(f"/knowledge/{entry.pk}/edit/", {**data, "expires_on": "2020-01-01"})
    assert past.status_code == 400
    assert "expiry date 2020-01-01 is in the past" in past.content.decode()
    rocm = curator.post(f"/knowledge/{entry.pk}/edit/", {**data, "platforms": "cuda, rocm"})
    assert rocm.status_code == 400 and "unknown platform &#x27;rocm&#x27;" in rocm.content.decode()
    entry.refresh_from_db()
    assert (entry.version, entry.expires_on, entry.platform_list) == (1, None, [])
