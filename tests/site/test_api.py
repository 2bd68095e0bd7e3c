"""API error handling shared by every endpoint: a body too large is a 413 that says so."""

import pytest
from django.test import override_settings

pytestmark = pytest.mark.django_db


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=1000)
def test_a_json_body_over_the_size_limit_is_a_413(client):
    body = '{"username": "' + "x" * 2000 + '", "password": "p"}'
    response = client.post("/api/auth/token/", body, content_type="application/json")
    assert response.status_code == 413
    assert "larger than 1000 bytes" in response.json()["detail"]
