"""Uploads through the API: an unusable or oversized trace is a 400 naming `trace`."""

import pytest

pytestmark = pytest.mark.django_db


def _preview(client, **data):
    return client.post("/api/problems/preview/", data, content_type="application/json")


def test_a_one_megabyte_single_line_trace_is_a_400(client, users):
    client.force_login(users["engineer"])
    response = _preview(client, trace="x" * 1_000_000)
    assert response.status_code == 400
    assert "field larger than field limit" in str(response.json()["trace"])


def test_a_trace_over_the_upload_cap_is_a_400(client, users):
    client.force_login(users["engineer"])
    response = _preview(client, trace="dim,count\n" + "8,1\n" * 300_000)
    assert response.status_code == 400
    assert "no more than 1048576 characters" in str(response.json()["trace"])


def test_a_trace_with_a_short_row_is_a_400_naming_the_line(client, users):
    client.force_login(users["engineer"])
    response = _preview(client, trace="dim,count\n8,1\n16\n")
    assert response.status_code == 400
    assert "trace line 3" in str(response.json()["trace"])
    ok = _preview(client, trace="dim,count\n8,1\n16,3\n")
    assert ok.status_code == 200 and [c["weight"] for c in ok.json()["cases"]] == [1, 3]
