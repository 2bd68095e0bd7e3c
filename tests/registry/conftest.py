"""Registry fixtures: users of each role and a creator of real accepted softmax nodes."""

import pytest

from tests.registry import helpers


@pytest.fixture
def users(db):
    return helpers.make_users()


@pytest.fixture
def node(users):
    return helpers.accepted_node(users["author"])
