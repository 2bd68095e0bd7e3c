"""Suite runs through the REST API: the list with counts in bounded queries, one run with its
problems, and imports (a refused document is a 400 with the parser's message, saving nothing)."""

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from apps.campaigns.models import SuiteRun
from apps.campaigns.services.suites import suite_run_import
from tests.support.suite_runs import cuda_doc, interpret_doc

pytestmark = pytest.mark.django_db


def api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_schema_publishes_the_suite_endpoints(tmp_path):
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "s.yml"))
    schema = (tmp_path / "s.yml").read_text()
    assert "/api/suites/:" in schema and "/api/suites/{id}/:" in schema
    assert "SuiteRunImport" in schema


def test_list_has_counts_in_bounded_queries(users, django_assert_max_num_queries):
    for i in range(3):
        suite_run_import(doc=cuda_doc(), name=f"kb1-h100-{i}", imported_by=users["engineer"])
    suite_run_import(doc=interpret_doc(), name="kb1-cpu", imported_by=None)
    client = api(users["viewer"])
    # 2 permission lookups, the count, the page (results counted and importer joined).
    with django_assert_max_num_queries(4):
        data = client.get("/api/suites/").json()
    assert data["count"] == 4
    first = data["results"][0]
    assert (first["name"], first["platform"], first["imported_by"]) == (
        "kb1-cpu",
        "interpret",
        None,
    )
    assert (first["problems"], first["claimed"], first["accepted"]) == (6, 4, 2)
    assert data["results"][1]["imported_by"] == "engineer"


def test_detail_lists_every_problem(users):
    run = suite_run_import(doc=cuda_doc(), name="kb1-h100", imported_by=users["engineer"])
    client = api(users["viewer"])
    assert client.get("/api/").json()["suites"].endswith("/api/suites/")  # found from the root
    data = client.get(f"/api/suites/{run.pk}/").json()
    assert data["fingerprint"]["device"] == "NVIDIA H100 80GB HBM3"
    assert [r["problem"] for r in data["results"]][:2] == ["19_ReLU", "23_Softmax"]
    relu = data["results"][0]
    assert (relu["outcome"], relu["best_speedup"], relu["compile_us"]) == ("accepted", 1.05, 10.5)
    assert data["results"][3]["reason"].startswith("the reference uses convolution.default")


def test_post_imports_a_run(users):
    response = api(users["engineer"]).post(
        "/api/suites/", {"name": "kb1-api", "document": cuda_doc()}, format="json"
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["name"] == "kb1-api" and body["accepted"] == 2 and len(body["results"]) == 6
    assert SuiteRun.objects.get().imported_by == users["engineer"]


def test_post_of_a_bad_document_is_a_400_naming_the_field(users):
    doc = cuda_doc()
    doc["rows"][2]["result"] = "great"
    client = api(users["engineer"])
    response = client.post("/api/suites/", {"name": "bad", "document": doc}, format="json")
    assert response.status_code == 400
    assert response.json()["document"][0].startswith("rows[2].result: expected one of")
    response = client.post("/api/suites/", {"name": "bad", "document": [1]}, format="json")
    assert response.status_code == 400
    assert "expected an object" in response.json()["document"][0]
    assert not SuiteRun.objects.exists()


def test_post_needs_the_author_permission(users):
    response = api(users["viewer"]).post(
        "/api/suites/", {"name": "kb1", "document": cuda_doc()}, format="json"
    )
    assert response.status_code == 403 and "author" in response.json()["detail"].lower()
    assert not SuiteRun.objects.exists()
