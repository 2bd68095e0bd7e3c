"""Fixtures the campaign tests share: the demo users, and a finished 300-node campaign."""

import pytest
from django.contrib.auth.models import User

from tests.campaigns.support.builders import build_campaign


@pytest.fixture
def users(db):
    from apps.accounts.services import demo_users_seed

    demo_users_seed()
    return {u.username: u for u in User.objects.all()}


@pytest.fixture
def big(users):
    return build_campaign(nodes=300, user=users["engineer"])
