"""In a real browser: a suite run's page shows the per-family table and the speedup chart, its
problem table filters by family in place (htmx) and without JavaScript, and importing a broken
run file shows the parser's message and saves nothing (issue 11)."""

import json

import pytest
from django.contrib.auth.models import User

from apps.campaigns.models import SuiteRun
from apps.campaigns.services.suites import suite_run_import
from tests.conftest import login, wait_for_js
from tests.support.suite_runs import cuda_doc

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PROBLEMS = (
    "() => [...document.querySelectorAll('#suite-results-table tbody tr')]"
    ".map(r => r.dataset.problem)"
)


def _run() -> SuiteRun:
    return suite_run_import(
        doc=cuda_doc(), name="kb1-h100", imported_by=User.objects.get(username="engineer")
    )


def test_suite_page_family_table_chart_and_filter(asgi_server, demo_users, page):
    run = _run()
    login(page, asgi_server, "viewer", demo_users["viewer"])
    page.click("nav >> text=Suites")
    row = page.locator("#suite-runs tr[data-run='kb1-h100']")
    assert row.locator(".claimed").inner_text() == "4"
    assert row.locator(".accepted").inner_text() == "2"
    assert page.locator("#suite-import").count() == 0  # a viewer may not import
    row.locator("a").click()

    assert "judged against compile" in page.inner_text("#suite-header")
    assert page.locator("nav a[aria-current=page]").inner_text() == "Suites"
    assert "NVIDIA H100 80GB HBM3" in page.inner_text("#suite-fingerprint")
    family = page.locator("#suite-family-table tr[data-family='elementwise']")
    assert [family.locator(f".{c}").inner_text() for c in ("claimed", "accepted", "faster")] == [
        "2",
        "1",
        "1",
    ]
    total = page.locator("#suite-family-table tr.total")
    assert total.locator(".best").inner_text() == "1.600x"
    assert "a convolution" in page.inner_text("#suite-reason-table")
    assert "timed out after 240s" in page.inner_text("#suite-errors")

    # The chart: one bar per accepted problem and the line at 1.0.
    wait_for_js(page, "document.querySelectorAll('#chart-suite .bars .point').length === 2")
    assert page.locator("#chart-suite .shapelayer path").count() == 1

    assert len(page.evaluate(PROBLEMS)) == 6
    page.evaluate("window.__marker = 'no reload'")
    page.select_option("#id_family", "row")
    wait_for_js(page, f"({PROBLEMS})().join() === '23_Softmax,95_CrossEntropyLoss'")
    assert page.evaluate("window.__marker") == "no reload"
    assert "family=row" in page.url
    assert run.results.count() == 6


def test_filter_works_without_javascript(asgi_server, demo_users, browser):
    run = _run()
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    try:
        page.goto(asgi_server + "/accounts/login/")
        page.fill("#id_username", "viewer")
        page.fill("#id_password", demo_users["viewer"])
        page.click("button[type=submit]")
        page.goto(f"{asgi_server}/campaigns/suites/{run.pk}/")
        page.select_option("#id_outcome", "no_template")
        page.click("#suite-filters button[type=submit]")
        page.wait_for_url("**outcome=no_template**")
        problems = page.locator("#suite-results-table tbody tr").evaluate_all(
            "rows => rows.map(r => r.dataset.problem)"
        )
        assert problems == ["50_conv_standard_2D__square_input__square_kernel", "89_cumsum"]
    finally:
        context.close()


def test_broken_file_shows_the_parsers_message(asgi_server, demo_users, page):
    login(page, asgi_server, "engineer", demo_users["engineer"])
    page.goto(f"{asgi_server}/campaigns/suites/")
    doc = cuda_doc()
    doc["rows"][2]["problem"] = 25
    page.fill("#id_name", "broken run")
    page.set_input_files(
        "#id_file",
        {"name": "kb.json", "mimeType": "application/json", "buffer": json.dumps(doc).encode()},
    )
    page.click("#suite-import button[type=submit]")
    assert page.inner_text("#error-file") == "rows[2].problem: expected a string"
    assert page.input_value("#id_name") == "broken run"
    assert not SuiteRun.objects.exists()

    # The same file mended imports and opens the run.
    page.set_input_files(
        "#id_file",
        {
            "name": "kb.json",
            "mimeType": "application/json",
            "buffer": json.dumps(cuda_doc()).encode(),
        },
    )
    page.click("#suite-import button[type=submit]")
    page.wait_for_selector("#suite-family-table")
    assert "Imported broken run: 6 problems." in page.inner_text(".messages")
