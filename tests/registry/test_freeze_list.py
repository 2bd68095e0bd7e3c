"""The registry's freeze list (/registry/artifacts/): every frozen kernel, sorted by fitness,
date, operator or platform and filtered by operator, platform and stage through the query
string, from the selector to the page."""

import itertools
import re
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.campaigns.constants import CampaignStatus, NodeStatus, Platform
from apps.campaigns.models import Campaign, Node, Problem
from apps.registry.constants import Stage
from apps.registry.models import Artifact, Region
from apps.registry.selectors.freeze_list import artifact_freeze_list, freeze_list_operators
from tests.registry import helpers

pytestmark = pytest.mark.django_db

_n = itertools.count(1)


def freeze(*, operator, platform=Platform.CUDA, stage=Stage.CANDIDATE, fitness=1.5, age=0, by=None):
    """An artifact row as the list reads it (the freeze service's checks are tested elsewhere);
    `age`: days since it was frozen."""
    n = next(_n)
    problem, _ = Problem.objects.get_or_create(
        name=operator, defaults={"title": operator, "source": "x = 1\n"}
    )
    campaign = Campaign.objects.create(
        name=f"{operator} search {n}",
        problem=problem,
        platform=platform,
        status=CampaignStatus.COMPLETED,
        created_by=by,
    )
    node = Node.objects.create(
        campaign=campaign, key=f"n{n}", generator="template", source="", fitness=fitness,
        status=NodeStatus.ACCEPTED,
    )  # fmt: skip
    region, _ = Region.objects.get_or_create(
        operator=operator,
        platform=platform,
        scope_key="all",
        defaults={"problem": problem, "scope": {}, "label": f"{operator}: every shape"},
    )
    artifact = Artifact.objects.create(
        region=region, campaign=campaign, node=node, digest=f"{n:064x}",
        body={"operator": operator, "source": "big " * 1000}, signature="s", key_id="k",
        stage=stage, created_by=by,
    )  # fmt: skip
    Artifact.objects.filter(pk=artifact.pk).update(created_at=timezone.now() - timedelta(days=age))
    return artifact


@pytest.fixture
def kernels():
    """Five kernels over two operators, two platforms and four stages; one untimed."""
    return {
        "softmax-fast": freeze(operator="softmax", fitness=3.0, stage=Stage.DEFAULT, age=9),
        "softmax-slow": freeze(operator="softmax", fitness=1.2, stage=Stage.SHADOW, age=1),
        "gelu-cuda": freeze(operator="gelu", fitness=2.0, stage=Stage.CANARY, age=5),
        "gelu-interp": freeze(operator="gelu", platform=Platform.INTERPRET, fitness=None, age=3),
        "rms-aborted": freeze(operator="rms-norm", fitness=1.7, stage=Stage.ABORTED, age=7),
    }


def names(kernels, artifacts) -> list[str]:
    by_pk = {a.pk: name for name, a in kernels.items()}
    return [by_pk[a.pk] for a in artifacts]


def test_default_is_newest_first(kernels):
    assert names(kernels, artifact_freeze_list()) == [
        "softmax-slow", "gelu-interp", "gelu-cuda", "rms-aborted", "softmax-fast",
    ]  # fmt: skip
    assert names(kernels, artifact_freeze_list(sort="date"))[0] == "softmax-fast"


def test_sort_by_fitness_keeps_untimed_last_both_ways(kernels):
    best_first = names(kernels, artifact_freeze_list(sort="-fitness"))
    assert best_first == ["softmax-fast", "gelu-cuda", "rms-aborted", "softmax-slow", "gelu-interp"]
    worst_first = names(kernels, artifact_freeze_list(sort="fitness"))
    assert worst_first == [
        "softmax-slow",
        "rms-aborted",
        "gelu-cuda",
        "softmax-fast",
        "gelu-interp",
    ]


def test_sort_by_operator_then_newest(kernels):
    assert names(kernels, artifact_freeze_list(sort="operator")) == [
        "gelu-interp", "gelu-cuda", "rms-aborted", "softmax-slow", "softmax-fast",
    ]  # fmt: skip
    assert names(kernels, artifact_freeze_list(sort="-operator"))[:2] == [
        "softmax-slow",
        "softmax-fast",
    ]


def test_sort_by_platform(kernels):
    platforms = [a.region.platform for a in artifact_freeze_list(sort="platform")]
    assert platforms == ["cuda"] * 4 + ["interpret"]
    assert artifact_freeze_list(sort="-platform").first().pk == kernels["gelu-interp"].pk


def test_unknown_sort_falls_back_to_newest_first(kernels):
    assert list(artifact_freeze_list(sort="digest")) == list(artifact_freeze_list())


def test_filter_by_operator(kernels):
    assert names(kernels, artifact_freeze_list(operator="gelu")) == ["gelu-interp", "gelu-cuda"]
    assert freeze_list_operators() == ["gelu", "rms-norm", "softmax"]


def test_filter_by_platform(kernels):
    assert names(kernels, artifact_freeze_list(platform="interpret")) == ["gelu-interp"]
    assert len(artifact_freeze_list(platform="cuda")) == 4


def test_filter_by_stage(kernels):
    assert names(kernels, artifact_freeze_list(stage="aborted")) == ["rms-aborted"]
    assert names(kernels, artifact_freeze_list(stage="candidate")) == ["gelu-interp"]


def test_filters_combine_with_a_sort(kernels):
    found = artifact_freeze_list(operator="softmax", platform="cuda", sort="-fitness")
    assert names(kernels, found) == ["softmax-fast", "softmax-slow"]
    assert not artifact_freeze_list(operator="softmax", stage="canary").exists()


def _rows(html: str) -> list[int]:
    return [int(pk) for pk in re.findall(r'id="artifact-row-(\d+)"', html)]


def test_page_sorts_and_filters_from_the_query_string(client, users, kernels):
    client.force_login(users["viewer"])
    html = client.get("/registry/artifacts/?sort=-fitness&platform=cuda").content.decode()
    assert _rows(html) == [kernels[k].pk for k in ("softmax-fast", "gelu-cuda", "rms-aborted",
                                                    "softmax-slow")]  # fmt: skip
    # The form keeps the filter; the headers keep it too, and the sorted one says which way.
    assert '<option value="cuda" selected>' in html
    assert 'aria-sort="descending">Fitness</a>' in html
    assert re.search(r'href="\?sort=fitness&amp;platform=cuda"[^>]*>Fitness<', html)
    assert re.search(r'href="\?sort=operator&amp;platform=cuda"[^>]*>Operator<', html)
    assert "3.000×" in html and "correct, not timed" not in html

    html = client.get("/registry/artifacts/?operator=gelu&stage=candidate").content.decode()
    assert _rows(html) == [kernels["gelu-interp"].pk]
    assert '<option value="gelu" selected>' in html and "correct, not timed" in html

    html = client.get("/registry/artifacts/?sort=operator").content.decode()
    assert _rows(html)[0] == kernels["gelu-interp"].pk
    assert 'aria-sort="ascending">Operator</a>' in html


def test_page_ignores_bad_values_and_says_when_nothing_matches(client, users, kernels):
    client.force_login(users["viewer"])
    html = client.get("/registry/artifacts/?platform=rocm&stage=frozen&sort=evil").content.decode()
    assert len(_rows(html)) == 5  # unknown filters dropped, default sort
    html = client.get("/registry/artifacts/?operator=softmax&stage=canary").content.decode()
    assert _rows(html) == [] and "No frozen kernel matches these filters" in html


def test_page_empty_registry(client, users):
    client.force_login(users["viewer"])
    html = client.get("/registry/artifacts/").content.decode()
    assert "No kernel has been frozen yet" in html


def test_page_queries_do_not_grow_with_rows(client, users, django_assert_max_num_queries):
    for i in range(30):
        freeze(operator=f"op{i % 4}", fitness=1 + i / 10, by=users["author"], age=i)
    client.force_login(users["viewer"])
    with django_assert_max_num_queries(8):
        html = client.get("/registry/artifacts/?sort=-fitness").content.decode()
    assert len(_rows(html)) == 30 and "reg-author" in html


def test_a_kernel_frozen_by_the_service_is_listed_and_linked_from_the_index(client, users):
    from apps.registry.services import artifact_create

    artifact = artifact_create(node=helpers.accepted_node(users["author"]), by=users["reviewer"])
    client.force_login(users["viewer"])
    assert 'href="/registry/artifacts/"' in client.get("/registry/").content.decode()
    html = client.get("/registry/artifacts/?platform=interpret&stage=candidate").content.decode()
    assert _rows(html) == [artifact.pk]
    assert f'href="/registry/artifacts/{artifact.pk}/"' in html
