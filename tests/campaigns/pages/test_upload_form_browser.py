"""In a real browser, the new-campaign form with uploads: files survive a form error, a workload
given once is never dropped silently, the preview shows the workload the campaign will really
run (and the smaller shapes the interpreter checks), and a slow reference check shows progress."""

import pytest

from apps.campaigns.models import Campaign, Problem
from tests.campaigns.support.builders import PROBLEM_SOURCE
from tests.conftest import login

pytestmark = [pytest.mark.browser, pytest.mark.services, pytest.mark.django_db(transaction=True)]

TRACE = "batch_size,dim,count\n16,1024,300\n4,256,100\n"
BIG_TRACE = "batch_size,dim,count\n64,4096,300\n4,256,100\n"


def _write(tmp_path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _start(page):
    page.click("text=Start campaign")
    page.wait_for_load_state("load")


def test_uploads_are_kept_after_a_form_error(asgi_server, demo_users, page, tmp_path):
    Problem.objects.create(name="row-softmax", title="taken", source=PROBLEM_SOURCE)
    login(page, asgi_server, "engineer", demo_users["engineer"])
    page.goto(asgi_server + "/campaigns/new/")
    page.set_input_files("#id_problem_file", _write(tmp_path, "row_softmax.py", PROBLEM_SOURCE))
    page.set_input_files("#id_trace_file", _write(tmp_path, "trace.csv", TRACE))
    page.fill("#id_budget_candidates", "2")
    _start(page)
    assert "exists already" in page.inner_text("#error-problem_name")
    # Both files are kept, and the page says so: no need to pick them again.
    kept = page.inner_text("#kept-files")
    assert "row_softmax.py" in kept and "trace.csv" in kept
    page.fill("#id_problem_name", "row-softmax-2")
    _start(page)
    page.wait_for_url("**/campaigns/*/")
    campaign = Campaign.objects.get()
    assert campaign.problem.name == "row-softmax-2"
    assert [c["overrides"] for c in campaign.workload["cases"]] == [
        {"batch_size": 16, "dim": 1024},
        {"batch_size": 4, "dim": 256},
    ]


def test_repicking_only_the_problem_keeps_the_workload(asgi_server, demo_users, page, tmp_path):
    broken = PROBLEM_SOURCE.replace("torch.softmax(x, dim=-1)", "torch.softmax(x, dim=-1) + y")
    login(page, asgi_server, "engineer", demo_users["engineer"])
    page.goto(asgi_server + "/campaigns/new/")
    page.set_input_files("#id_problem_file", _write(tmp_path, "row_softmax.py", broken))
    page.set_input_files("#id_trace_file", _write(tmp_path, "trace.csv", TRACE))
    page.fill("#id_budget_candidates", "2")
    _start(page)
    assert "NameError" in page.inner_text("#error-problem_file")
    assert "Pick the corrected file" in page.inner_text("#problem-not-kept")
    assert "trace.csv" in page.inner_text("#kept-files")
    # Only the problem is picked again: the campaign runs the trace's workload, not none.
    page.set_input_files("#id_problem_file", _write(tmp_path, "row_softmax.py", PROBLEM_SOURCE))
    _start(page)
    page.wait_for_url("**/campaigns/*/")
    campaign = Campaign.objects.get()
    assert campaign.workload is not None and len(campaign.workload["cases"]) == 2


def test_a_workload_in_error_is_never_dropped_silently(asgi_server, demo_users, page, tmp_path):
    login(page, asgi_server, "engineer", demo_users["engineer"])
    page.goto(asgi_server + "/campaigns/new/")
    page.set_input_files("#id_problem_file", _write(tmp_path, "row_softmax.py", PROBLEM_SOURCE))
    bad = "batch_size,dim,count\n16,1024,3\n8,64,-2\n"
    page.set_input_files("#id_trace_file", _write(tmp_path, "trace.csv", bad))
    page.fill("#id_budget_candidates", "2")
    _start(page)
    assert "trace[1]" in page.inner_text("#error-trace_file")
    assert "trace.csv" in page.inner_text("#workload-not-kept")
    assert "row_softmax.py" in page.inner_text("#kept-files")
    # Starting again without picking a workload is refused, with what to do.
    _start(page)
    assert "was not kept" in page.inner_text("#error-workload_file")
    assert not Campaign.objects.exists()
    # Dropping it on purpose runs the module as written.
    page.check("#id_no_workload")
    _start(page)
    page.wait_for_url("**/campaigns/*/")
    campaign = Campaign.objects.get()
    assert campaign.workload is None


def test_preview_shows_the_smoke_workload_on_interpret(asgi_server, demo_users, page):
    from apps.campaigns.services.problems import catalog_sync

    softmax = next(p for p in catalog_sync() if p.name == "softmax")
    login(page, asgi_server, "engineer", demo_users["engineer"])
    page.goto(asgi_server + "/campaigns/new/")
    page.select_option("#id_problem", str(softmax.pk))
    page.select_option("#id_platform", "interpret")
    page.click("#preview-button")
    page.wait_for_selector("#workload-cases")
    said = page.inner_text("#preview-workload")
    assert "smoke workload" in said and "not the production workload (5 cases)" in said
    names = page.locator("#workload-cases tbody tr td:first-child").all_inner_texts()
    assert names == [c["name"] for c in softmax.smoke_workload["cases"]]
    # On cuda the same problem runs its production workload.
    page.select_option("#id_platform", "cuda")
    page.click("#preview-button")
    page.wait_for_selector("#workload-cases")
    assert "production workload" in page.inner_text("#preview-workload")
    names = page.locator("#workload-cases tbody tr td:first-child").all_inner_texts()
    assert names == [c["name"] for c in softmax.workload["cases"]]


def test_interpret_preview_says_which_smaller_shapes_it_checks(
    asgi_server, demo_users, page, tmp_path, artifacts_dir
):
    login(page, asgi_server, "engineer", demo_users["engineer"])
    page.goto(asgi_server + "/campaigns/new/")
    page.set_input_files("#id_problem_file", _write(tmp_path, "row_softmax.py", PROBLEM_SOURCE))
    page.set_input_files("#id_trace_file", _write(tmp_path, "trace.csv", BIG_TRACE))
    page.select_option("#id_platform", "interpret")
    page.click("#preview-button")
    page.wait_for_selector("#workload-cases")
    assert "checks smaller shapes than asked for 1 of 2 cases" in page.inner_text(
        "#interpret-shapes"
    )
    big, small = page.locator("#workload-cases tbody tr td.checked-at").all_inner_texts()
    assert "dim 4096 → 1024" in big and "batch_size=64 dim=1024" in big
    assert small == "as asked"
    ran = page.inner_text("#reference-check")
    assert "(batch_size=64 dim=1024)" in ran and "output shape 64×1024." in ran
    assert "{" not in ran and "[" not in ran
    page.screenshot(path=str(artifacts_dir / "upload-preview-interpret-shapes.png"), full_page=True)
    page.click("[data-theme-toggle]")
    page.screenshot(
        path=str(artifacts_dir / "upload-preview-interpret-shapes-dark.png"), full_page=True
    )


def test_a_slow_reference_check_shows_progress(asgi_server, demo_users, page, tmp_path):
    slow = PROBLEM_SOURCE.replace(
        "        return torch.softmax(x, dim=-1)",
        "        import time\n        time.sleep(8)\n        return torch.softmax(x, dim=-1)",
    )
    login(page, asgi_server, "engineer", demo_users["engineer"])
    page.goto(asgi_server + "/campaigns/new/")
    page.set_input_files("#id_problem_file", _write(tmp_path, "slow.py", slow))
    progress = page.locator("#reference-progress")
    assert not progress.is_visible()
    # Click and read the page in one evaluation: while a form post is in flight, Playwright
    # waits for the navigation before it evaluates anything else.
    seen = page.evaluate(
        """() => new Promise(done => {
            document.getElementById('preview-button').click();
            const p = document.getElementById('reference-progress');
            const first = [p.checkVisibility(), p.innerText];
            setTimeout(() => done([...first, p.innerText]), 1500);
        })"""
    )
    visible, text, later = seen
    assert visible and "Checking the reference in the sandbox… (up to 120 s)" in text
    assert "1 s so far" in later
    page.wait_for_selector("#workload-cases", timeout=60_000)
    assert "ran case" in page.inner_text("#reference-check")


def test_picking_a_catalog_problem_drops_the_kept_upload(asgi_server, demo_users, page, tmp_path):
    from apps.campaigns.services.problems import catalog_sync

    softmax = next(p for p in catalog_sync() if p.name == "softmax")
    login(page, asgi_server, "engineer", demo_users["engineer"])
    page.goto(asgi_server + "/campaigns/new/")
    page.set_input_files("#id_problem_file", _write(tmp_path, "row_softmax.py", PROBLEM_SOURCE))
    page.set_input_files("#id_trace_file", _write(tmp_path, "trace.csv", TRACE))
    page.click("#preview-button")
    page.wait_for_selector("#kept-files")
    # The kept upload gives way to a catalog problem picked after it (no "not both" error).
    page.select_option("#id_problem", str(softmax.pk))
    page.fill("#id_budget_candidates", "2")
    _start(page)
    page.wait_for_url("**/campaigns/*/")
    campaign = Campaign.objects.get()
    assert campaign.problem_id == softmax.pk
    assert campaign.workload == softmax.smoke_workload
