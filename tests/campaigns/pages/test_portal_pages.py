"""Portal pages over HTTP: what they show, their role rules and their query counts."""

import json

import pytest
from django.core.cache import cache
from django.core.cache.utils import make_template_fragment_key

from apps.campaigns import charts
from apps.campaigns.models import Comment, Mention, NodeReview
from apps.campaigns.selectors import candidate_review
from tests.campaigns.support.builders import build_campaign

pytestmark = pytest.mark.django_db


def client_for(client, user):
    client.force_login(user)
    return client


def test_list_filters_sort_and_pages_keep_the_query(
    client, users, big, django_assert_max_num_queries
):
    other = build_campaign(nodes=5, user=users["engineer"], seed=1, timed=False, name="tiny interp")
    c = client_for(client, users["viewer"])
    with django_assert_max_num_queries(8):
        page = c.get("/campaigns/?platform=interpret&sort=-best").content.decode()
    assert "tiny interp" in page and "big campaign" not in page
    assert 'aria-sort="descending"' in page
    assert "sort=best" in page and "platform=interpret" in page  # the header keeps the filter
    page = c.get("/campaigns/?q=nothing-matches").content.decode()
    assert "No campaign matches these filters" in page
    assert other.pk


def test_detail_page_bounded_queries_and_charts(client, users, big, django_assert_max_num_queries):
    c = client_for(client, users["viewer"])
    with django_assert_max_num_queries(10):
        response = c.get(f"/campaigns/{big.pk}/")
    html = response.content.decode()
    assert 'id="search-graph"' in html and 'id="chart-funnel"' in html
    assert 'id="chart-fitness"' in html
    assert "Showing the newest 50 of 300 candidates" in html


def test_graph_endpoint_pages_cover_every_node(
    client, users, big, django_assert_max_num_queries, monkeypatch
):
    from apps.campaigns.selectors import graph as graph_selectors

    monkeypatch.setattr(graph_selectors, "GRAPH_PAGE_SIZE", 120)
    c = client_for(client, users["viewer"])
    seen, pages, url = 0, 0, f"/campaigns/{big.pk}/graph.json?after=0"
    while url:
        pages += 1
        with django_assert_max_num_queries(8):
            data = c.get(url).json()
        names = [t["name"] for t in data["figure"]["data"]]
        assert "accepted" in names and "mutation edge" in names
        seen += data["count"]
        url = data.get("next_url")
    assert seen == 300 and pages == 3
    first = c.get(f"/campaigns/{big.pk}/graph.json").json()["figure"]["data"]
    urls = [u for t in first if t["mode"] == "markers" for u in t["customdata"]]
    assert f"/campaigns/{big.pk}/nodes/n1/" in urls and len(urls) == 120


def test_interpret_campaign_says_it_has_no_timings(client, users):
    campaign = build_campaign(nodes=6, user=users["engineer"], timed=False, seed=3)
    html = client_for(client, users["viewer"]).get(f"/campaigns/{campaign.pk}/").content.decode()
    assert "No timings: the interpret platform" in html
    assert 'id="chart-fitness"' not in html


def test_candidate_page_diff_evidence_latency(client, users, big, django_assert_max_num_queries):
    best = big.best_node
    c = client_for(client, users["viewer"])
    # +1: the accepted candidate says why it is (or is not) the best (campaign_best_rule).
    with django_assert_max_num_queries(17):
        html = c.get(f"/campaigns/{big.pk}/nodes/{best.key}/").content.decode()
    assert 'id="diff-reference"' in html  # against the problem's reference
    assert "<ins>" in html and "<del>" in html  # word-level highlights
    assert 'id="gate-static"' in html and "<details" in html
    assert 'id="chart-latency-box"' in html and 'id="chart-latency-ecdf"' in html
    assert 'id="lineage"' in html
    assert 'class="hl"' in html or 'class="source hl"' in html


def test_candidate_page_reads_only_its_own_cases_of_the_reports(client, users, big):
    """An accepted node's report is ~150 kB of JSON (every gate's evidence): the page loaded the
    node's, its parent's and the best node's on every view, and used only the node's cases."""
    node = big.nodes.exclude(pk=big.best_node_id).filter(in_edges__parent__isnull=False).last()
    node.report = {**big.best_node.report, "gates": {"static": {"evidence": "x" * 100_000}}}
    node.save(update_fields=["report"])
    review = candidate_review(campaign_id=big.pk, key=node.key)
    assert review.parent is not None and review.best is not None
    for loaded in (review.node, review.parent, review.best):
        assert "report" in loaded.get_deferred_fields()
    assert review.latency == charts.latency_series(node.report["cases"])
    assert review.latency  # the cases did arrive
    # The rendered diffs are kept under the texts they compare, and served again as they were.
    c = client_for(client, users["viewer"])
    first = c.get(f"/campaigns/{big.pk}/nodes/{node.key}/").content.decode()
    for d in review.diffs:
        parts = [d["key"], d["slug"], d["label"], node.key]
        assert cache.get(make_template_fragment_key("review-diff", parts)) is not None
    again = c.get(f"/campaigns/{big.pk}/nodes/{node.key}/").content.decode()
    assert first.count('id="view-diff-') == again.count('id="view-diff-') == len(review.diffs)
    assert "<ins>" in again and "<del>" in again


def test_candidate_page_shows_a_static_warning_as_a_warning(client, users):
    campaign = build_campaign(nodes=6, user=users["engineer"], timed=False, seed=5)
    node = campaign.nodes.exclude(failed_gate="static").first()
    warning = {"rule": "torch_fallback", "line": 46, "message": "calls torch.matmul() outside"}
    node.gates.filter(name="static").update(
        status="passed",
        reason="1 Triton kernel(s): matmul_kernel; warning [torch_fallback] line 46: ...",
        evidence={"kernels": ["matmul_kernel"], "findings": [], "warnings": [warning]},
    )
    html = (
        client_for(client, users["viewer"])
        .get(f"/campaigns/{campaign.pk}/nodes/{node.key}/")
        .content.decode()
    )
    gate = html[html.index('id="gate-static"') : html.index('id="gate-compile"')]
    assert " open" not in gate.split(">", 1)[0]  # a failed gate opens; this one stays closed
    assert '<span class="badge passed">passed</span>' in gate
    assert "Static warnings (1): not failures, the runtime checks decide" in gate
    assert "[torch_fallback] calls torch.matmul() outside (line 46)" in gate
    assert "Static findings" not in gate


def test_compare_two_candidates(client, users, big):
    html = (
        client_for(client, users["viewer"])
        .get(f"/campaigns/{big.pk}/compare/?a=n1&b=n2")
        .content.decode()
    )
    assert 'id="compare-diff"' in html
    assert "<ins>" in html


def test_comment_on_a_line_mentions_land_in_the_inbox(client, users, big):
    node = big.best_node
    c = client_for(client, users["engineer"])
    response = c.post(
        f"/campaigns/{big.pk}/nodes/{node.key}/comments/",
        {"body": "@reviewer the mask on this line looks off", "line": 10},
    )
    assert response.status_code == 302
    comment = Comment.objects.get(node=node)
    assert comment.line == 10 and comment.author.username == "engineer"
    assert Mention.objects.filter(comment=comment, user__username="reviewer").exists()
    r = client_for(client, users["reviewer"])
    inbox = r.get("/campaigns/inbox/").content.decode()
    assert "the mask on this line looks off" in inbox
    assert big.name in inbox  # its accepted best awaits review
    page = r.get(f"/campaigns/{big.pk}/nodes/{node.key}/").content.decode()
    assert 'id="line-comments-10"' in page
    # Opening the candidate read the mention; marking it reviewed clears the campaign.
    r.post(f"/campaigns/{big.pk}/nodes/{node.key}/review/")
    assert NodeReview.objects.filter(node=node, reviewer=users["reviewer"]).exists()
    inbox = r.get("/campaigns/inbox/").content.decode()
    assert "No unread mentions" in inbox
    assert "awaiting your review" in inbox and big.name not in inbox


def test_viewer_cannot_comment_and_is_told_why(client, users, big):
    response = client_for(client, users["viewer"]).post(
        f"/campaigns/{big.pk}/nodes/n1/comments/", {"body": "hi"}
    )
    assert response.status_code == 403
    assert "roles that have it: engineer, reviewer, curator, admin" in response.content.decode()
    assert not Comment.objects.exists()


def test_comment_line_out_of_range_is_refused(client, users, big):
    c = client_for(client, users["engineer"])
    response = c.post(
        f"/campaigns/{big.pk}/nodes/n1/comments/",
        {"body": "x", "line": 999},
        HTTP_HX_REQUEST="true",
    )
    # 422: htmx swaps it in (it drops a 400), so the error shows next to the form.
    assert response.status_code == 422
    html = response.content.decode()
    assert 'id="comment-error"' in html and "the source has lines 1 to" in html
    assert 'id="comments"' in html and "x</textarea>" in html, "what they wrote is kept"


def test_exports_csv_and_json(client, users, big):
    c = client_for(client, users["viewer"])
    csv_text = c.get(f"/campaigns/{big.pk}/export.csv").content.decode()
    header = csv_text.splitlines()[0]
    assert header.startswith("node,round,generator,edge,parent,status")
    assert "median_ms" in header
    data = json.loads(c.get(f"/campaigns/{big.pk}/export.json").content)
    assert {r["node"] for r in data["rows"]} == {f"n{i}" for i in range(1, 301)}


def test_portfolio_by_family_and_platform(client, users, big):
    build_campaign(nodes=4, user=users["engineer"], timed=False, seed=5, name="interp")
    html = client_for(client, users["viewer"]).get("/campaigns/portfolio/").content.decode()
    assert 'id="portfolio-table"' in html and "softmax" in html
    assert "interpret" in html and "cuda" in html


def test_candidate_page_shows_device_time_host_overhead_and_the_paired_speedup(client, users):
    campaign = build_campaign(nodes=4, user=users["engineer"], seed=9)
    best = campaign.best_node
    report = dict(best.report)
    first = dict(report["cases"][0])
    first["timing"] = {
        **first["timing"],
        "mode": "graph",
        "device_median_ms": 0.00152,
        "host_median_ms": 0.0413,
    }
    first["paired"] = {campaign.baseline: {"speedup": 1.125, "ci95": [1.1237, 1.1249]}}
    report["cases"] = [first] + report["cases"][1:]
    best.report = report
    best.save(update_fields=["report"])
    html = (
        client_for(client, users["viewer"])
        .get(f"/campaigns/{campaign.pk}/nodes/{best.key}/")
        .content.decode()
    )
    table = html[html.index('<table id="cases">') :]
    table = table[: table.index("</table>")]
    assert "Device µs" in table and "Host µs/call" in table
    row = next(r for r in table.split("<tr>") if f"<td>{first['name']}</td>" in r)
    assert "<td>1.52</td>" in row and "<td>41.3</td>" in row
    assert "1.125× [1.124, 1.125]" in row


def test_campaign_lists_and_pages_read_no_node_report(client, users, big):
    """The campaign list, page and API joined the best node with its report (~150 kB of JSON,
    every gate's evidence) and the problem with its source and workloads: 25 campaigns parsed
    megabytes per request. The API's node list loaded each parent's report for its key, the
    compare page both nodes' reports. None of them shows a report."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    c = client_for(client, users["viewer"])
    urls = [
        "/campaigns/",
        f"/campaigns/{big.pk}/",
        f"/campaigns/{big.pk}/compare/?a=n1&b=n2",
        "/campaigns/inbox/",
        "/api/campaigns/",
        f"/api/campaigns/{big.pk}/",
        f"/api/campaigns/{big.pk}/nodes/",
        "/api/inbox/",
    ]
    for url in urls:
        with CaptureQueriesContext(connection) as queries:
            response = c.get(url)
        assert response.status_code == 200, url
        sql = " ".join(q["sql"] for q in queries.captured_queries)
        assert '"campaigns_node"."report"' not in sql, url
        assert '"campaigns_problem"."workload"' not in sql, url
    listed = c.get("/api/campaigns/").json()["results"][0]
    assert listed["best_node"] == big.best_node.key and listed["problem"] == big.problem.name
    nodes = c.get(f"/api/campaigns/{big.pk}/nodes/").json()["results"]
    child = next(n for n in nodes if n["parents"])
    edge = big.nodes.get(key=child["key"]).in_edges.select_related("parent").first()
    assert child["parents"] == [edge.parent.key] and child["edge"] == edge.kind
    page = c.get(f"/campaigns/{big.pk}/").content.decode()
    assert big.best_node.key in page and big.problem.name in page


def test_source_table_rows_come_from_the_cache_and_new_comments_show_in_place(client, users, big):
    """The source table's rows (a fifth of the page's CPU) are cached per run of lines under the
    text and the range; a comment cuts a run, so it shows under its line at once."""
    import re

    node = big.best_node
    count = len(node.source.splitlines())
    url = f"/campaigns/{big.pk}/nodes/{node.key}/"
    c = client_for(client, users["engineer"])

    def rows(html: str) -> list[str]:
        table = html.split('id="node-source">')[1].split("</table>")[0]
        return re.findall(
            r'<tr (?:id="L(\d+)"|class="line-comments" id="line-comments-(\d+)")', table
        )

    first = c.get(url).content.decode()
    assert [no for no, _ in rows(first)] == [str(i) for i in range(1, count + 1)]
    review = candidate_review(campaign_id=big.pk, key=node.key)
    key = make_template_fragment_key("review-source", [review.source_blocks[0]["key"]])
    assert len(review.source_blocks) == 1 and cache.get(key) is not None

    def table(html: str) -> str:
        return html.split('id="node-source">')[1].split("</table>")[0]

    assert table(c.get(url).content.decode()) == table(first)  # from the cache, the same rows

    for line in (3, 1):
        c.post(f"{url}comments/", {"body": f"look at line {line}", "line": line})
    shown = rows(c.get(url).content.decode())
    assert shown[:6] == [("1", ""), ("", "1"), ("2", ""), ("3", ""), ("", "3"), ("4", "")]
    assert [no for no, _ in shown if no] == [str(i) for i in range(1, count + 1)]
    page = c.get(url).content.decode()
    assert "look at line 3" in page.split('id="line-comments-3"')[1].split("</tr>")[0]
