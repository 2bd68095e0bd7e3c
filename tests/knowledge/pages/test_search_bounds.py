"""The knowledge search page with an oversized filter: the filter is ignored, not a 500."""

import pytest

pytestmark = pytest.mark.django_db


def test_the_search_page_ignores_an_oversized_filter(client, make_entry, people):
    entry = make_entry(families=["softmax"])
    client.force_login(people["viewer"])
    response = client.get("/knowledge/", {"family": "x" * 1_000_000, "tag": "y" * 1_000_000})
    assert response.status_code == 200
    assert entry.title in response.content.decode()
