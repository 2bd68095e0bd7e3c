"""In a real browser: a cuda campaign judged against the kernel a team serves today. An
incumbent that does not parse is refused next to its field; a good one is kept through another
field's error, and the campaign page shows it and which peers judge."""

import pytest

from apps.campaigns.models import Campaign
from tests.campaigns.pages.test_incumbent import LIGER
from tests.conftest import login

pytestmark = [pytest.mark.browser, pytest.mark.services, pytest.mark.django_db(transaction=True)]


def test_an_incumbent_is_checked_kept_and_shown(
    asgi_server, demo_users, page, tmp_path, artifacts_dir
):
    from apps.campaigns.services.problems import catalog_sync

    rms_norm = next(p for p in catalog_sync() if p.name == "rms-norm")
    broken = tmp_path / "served.py"
    broken.write_text("import torch\n\nclass ModelNew(torch.nn.Module:\n    pass\n")
    good = tmp_path / "liger_rms_norm.py"
    good.write_text(LIGER.read_text())

    login(page, asgi_server, "engineer", demo_users["engineer"])
    page.goto(asgi_server + "/campaigns/new/")
    page.select_option("#id_problem", str(rms_norm.pk))
    page.select_option("#id_platform", "cuda")
    page.select_option("#id_baseline", "incumbent")
    page.set_input_files("#id_incumbent_file", str(broken))
    page.click("text=Start campaign")
    page.wait_for_selector("#error-incumbent_file")
    assert "not Python: line 3" in page.inner_text("#error-incumbent_file")
    assert "Pick the corrected file" in page.inner_text("#incumbent-not-kept")

    page.set_input_files("#id_incumbent_file", str(good))
    page.select_option("#id_baseline", "best")
    page.fill("#id_budget_candidates", "0")
    # The server's own check (the browser's min=1 would stop the submit first).
    page.eval_on_selector("#campaign-form", "form => { form.noValidate = true; }")
    page.click("text=Start campaign")
    page.wait_for_selector("#kept-incumbent")
    assert "liger_rms_norm.py" in page.inner_text("#kept-incumbent")
    page.screenshot(path=str(artifacts_dir / "incumbent-kept.png"), full_page=True)

    page.fill("#id_budget_candidates", "2")
    page.click("text=Start campaign")
    page.wait_for_url("**/campaigns/*/")
    campaign = Campaign.objects.get()
    assert campaign.incumbent_name == "liger_rms_norm.py" and campaign.baseline == "best"
    assert "max-autotune and the incumbent" in page.inner_text("#campaign-baseline")
    summary = page.inner_text("#campaign-incumbent summary")
    assert "liger_rms_norm.py" in summary and "one of the peers" in summary
    page.click("#campaign-incumbent summary")
    assert "liger_rms_norm" in page.inner_text("#campaign-incumbent pre")
    page.screenshot(path=str(artifacts_dir / "incumbent-campaign.png"), full_page=True)
