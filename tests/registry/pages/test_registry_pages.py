"""Registry pages rendered by the server: index (matrix, alarms, freezable), operator page
(stages, coverage, latency figure, history, rollback only for those allowed), promotion page."""

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.registry.constants import Stage
from apps.registry.models import Artifact, Region
from apps.registry.services import artifact_approve, artifact_create
from tests.registry import helpers

pytestmark = pytest.mark.django_db


def test_index_operator_and_artifact_pages(client, users):
    a = artifact_create(node=helpers.accepted_node(users["author"]), by=users["reviewer"])
    a = helpers.advance(a, users["reviewer2"], "default")
    helpers.feed_calls(a, "default", 6, 0.8)
    helpers.feed_calls(a, "fallback", 2, 0.5)
    helpers.report(refused=[{"artifact": a.digest, "reason": "signature does not match"}])
    spare = helpers.accepted_node(users["author"])

    client.force_login(users["viewer"])
    index = client.get("/registry/").content.decode()
    assert 'data-cell="softmax/interpret/float32"' in index
    assert "83%" in index  # float32: 4 canary + 6 default of 12 calls served by a kernel
    assert 'data-kind="tampered"' in index
    assert f"data-freeze='{spare.pk}'" not in index and f'data-freeze="{spare.pk}"' not in index

    page = client.get("/registry/softmax/").content.decode()
    assert f"#{a.pk}" in page and "Kernel coverage" in page
    figure = page.split(f'id="figure-latency-{a.region_id}" type="application/json">')[1]
    figure = json.loads(figure.split("</script>")[0])
    names = {t["name"] for t in figure["data"]}
    assert names == {"Default kernel (6)", "Canary kernel (4)", "PyTorch fallback (2)"}
    assert 'id="rollback-' not in page  # viewers cannot roll back
    assert "Promoted" in page and "reg-reviewer2" in page

    client.force_login(users["reviewer"])
    page = client.get("/registry/softmax/").content.decode()
    assert f'id="rollback-{a.region_id}"' in page and 'data-confirm="Roll back the default' in page
    index = client.get("/registry/").content.decode()
    assert f'data-freeze="{spare.pk}"' in index

    artifact_page = client.get(f"/registry/artifacts/{a.pk}/").content.decode()
    assert a.digest in artifact_page and 'data-gate="signature"' in artifact_page
    assert "softmax_kernel" in artifact_page


def test_author_sees_why_they_cannot_approve(client, users):
    a = artifact_create(node=helpers.accepted_node(users["author"]), by=users["reviewer"])
    client.force_login(users["author"])
    page = client.get(f"/registry/artifacts/{a.pk}/").content.decode()
    assert 'id="author-note"' in page and 'id="approve"' not in page
    r = client.post(f"/registry/artifacts/{a.pk}/approve/", follow=True)
    assert "authored campaign" in r.content.decode()


def test_index_queries_stay_fixed_as_regions_grow_and_skip_node_reports(client, users):
    """The coverage matrix read each region's artifacts in a query of its own, and the freezable
    list loaded every accepted node's report (~150 kB of JSON each): the page took 640 ms."""
    a = artifact_create(node=helpers.accepted_node(users["author"]), by=users["reviewer"])
    helpers.advance(a, users["reviewer2"], "shadow")
    helpers.accepted_node(users["author"])
    client.force_login(users["reviewer"])

    def index_queries() -> list[str]:
        with CaptureQueriesContext(connection) as queries:
            assert client.get("/registry/").status_code == 200
        return [q["sql"] for q in queries.captured_queries]

    first = index_queries()
    for operator in ("gelu", "silu", "layer-norm"):
        Region.objects.create(
            operator=operator,
            platform="interpret",
            scope={"dtypes": ["float32"]},
            scope_key=operator,
            label=f"{operator} float32",
        )
    again = index_queries()
    assert len(again) == len(first) <= 14
    node_reads = [sql for sql in again if 'FROM "campaigns_node"' in sql]
    assert node_reads and not any('"campaigns_node"."report"' in sql for sql in node_reads)


def test_operator_artifact_pages_and_api_read_no_ir_or_node_report(client, users):
    """An artifact's IR dumps (~100 kB) are read by no page or API answer, nor is its node's
    report (~150 kB): the operator page and the artifact list loaded both for every artifact."""
    a = artifact_create(node=helpers.accepted_node(users["author"]), by=users["reviewer"])
    a = helpers.advance(a, users["reviewer2"], "default")
    client.force_login(users["reviewer"])
    pages = {
        "/registry/softmax/": f"#{a.pk}",
        f"/registry/artifacts/{a.pk}/": a.digest,
        "/api/registry/artifacts/": a.digest,
        f"/api/registry/artifacts/{a.pk}/": a.digest,
    }
    for url, shown in pages.items():
        with CaptureQueriesContext(connection) as queries:
            response = client.get(url)
        assert response.status_code == 200 and shown in response.content.decode(), url
        sql = " ".join(q["sql"] for q in queries.captured_queries)
        assert '"registry_artifact"."ir"' not in sql, url
        assert '"campaigns_node"."report"' not in sql, url
    listed = client.get("/api/registry/artifacts/").json()["results"][0]
    assert listed["body"] == a.body and listed["signature"] == a.signature


@pytest.mark.parametrize("given", ["abc", "150", "0"])
def test_an_unreadable_canary_percentage_is_refused_and_nothing_moves(client, users, given):
    a = artifact_create(node=helpers.accepted_node(users["author"]), by=users["reviewer"])
    a = helpers.advance(a, users["reviewer2"], "shadow")
    helpers.feed_shadow(a, 4)
    artifact_approve(artifact=a, by=users["reviewer2"])
    client.force_login(users["reviewer2"])
    page = client.post(
        f"/registry/artifacts/{a.pk}/promote/", {"canary_percent": given}, follow=True
    ).content.decode()
    assert "Canary percentage:" in page
    assert Artifact.objects.get(pk=a.pk).stage == Stage.SHADOW
    # A readable one promotes at exactly that share.
    client.post(f"/registry/artifacts/{a.pk}/promote/", {"canary_percent": "25"})
    fresh = Artifact.objects.get(pk=a.pk)
    assert fresh.stage == Stage.CANARY and fresh.canary_percent == 25
