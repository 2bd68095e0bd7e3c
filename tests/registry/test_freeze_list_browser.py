"""In a real browser: from the registry's index to the freeze list, sorted by fitness from its
header (twice: reversed) and narrowed by the stage filter; screenshots in light and dark."""

import pytest
from django.contrib.auth.models import User

from apps.campaigns.constants import Platform
from apps.registry.constants import Stage
from tests.conftest import login
from tests.registry.test_freeze_list import freeze

pytestmark = [pytest.mark.browser, pytest.mark.services, pytest.mark.django_db(transaction=True)]

FITNESS = "Array.from(document.querySelectorAll('#freeze-list td.fitness'), e => e.textContent)"


def test_sort_by_fitness_and_filter_by_stage(asgi_server, demo_users, page, artifacts_dir):
    by = User.objects.get(username="engineer")
    freeze(operator="softmax", fitness=3.25, stage=Stage.DEFAULT, age=4, by=by)
    freeze(operator="softmax", fitness=1.1, stage=Stage.SHADOW, age=2, by=by)
    freeze(operator="gelu", fitness=2.05, stage=Stage.CANARY, age=3, by=by)
    freeze(operator="gelu", platform=Platform.INTERPRET, fitness=None, age=1, by=by)
    login(page, asgi_server, "viewer", demo_users["viewer"])
    page.goto(f"{asgi_server}/registry/")
    page.click("#freeze-list-link")
    page.wait_for_selector("#freeze-list")
    page.click("#freeze-list th a:text-is('Fitness')")
    page.wait_for_url("**sort=fitness*")
    assert page.evaluate(FITNESS) == ["1.100×", "2.050×", "3.250×", "correct, not timed"]
    page.click("#freeze-list th a:text-is('Fitness')")
    page.wait_for_url("**sort=-fitness*")
    assert page.evaluate(FITNESS)[:3] == ["3.250×", "2.050×", "1.100×"]
    page.screenshot(path=str(artifacts_dir / "registry-freeze-list-light.png"), full_page=True)

    page.select_option("select[name=stage]", "canary")
    page.click("#freeze-list-filters button[type=submit]")
    page.wait_for_url("**stage=canary*")
    assert page.evaluate(FITNESS) == ["2.050×"]
    assert "sort=-fitness" in page.url  # the filter keeps the sort
    page.goto(f"{asgi_server}/registry/artifacts/?sort=-fitness")
    page.click("[data-theme-toggle]")
    assert page.evaluate("document.documentElement.dataset.theme") == "dark"
    page.screenshot(path=str(artifacts_dir / "registry-freeze-list-dark.png"), full_page=True)
