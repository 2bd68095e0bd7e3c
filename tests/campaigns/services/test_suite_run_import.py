"""`suite_run_import` saves a bench-script run (all of it or nothing); the management command
and the demo seed go through it."""

import json

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command

from apps.campaigns.models import SuiteResult, SuiteRun
from apps.campaigns.services import demo
from apps.campaigns.services.suites import suite_run_import
from tests.support.suite_runs import cuda_doc

pytestmark = pytest.mark.django_db


@pytest.fixture
def engineer(db):
    return User.objects.create_user("suite-engineer")


def test_import_saves_the_run_and_every_problem(engineer):
    run = suite_run_import(doc=cuda_doc(), name="kb1-h100", imported_by=engineer)
    run.refresh_from_db()
    assert (run.platform, run.baseline, run.suite) == ("cuda", "compile", "KernelBench level 1")
    assert run.fingerprint["device"] == "NVIDIA H100 80GB HBM3"
    assert run.command.startswith("scripts/bench_kernelbench.py --platform cuda")
    assert run.started_at.isoformat() == "2026-12-05T19:46:38+00:00"
    assert run.imported_by == engineer
    assert list(run.results.values_list("number", "outcome")) == [
        (19, "accepted"),
        (23, "accepted"),
        (25, "rejected"),
        (50, "no_template"),
        (89, "no_template"),
        (95, "error"),
    ]
    relu = run.results.get(number=19)
    assert (relu.family, relu.best_speedup, relu.candidate_us, relu.compile_us) == (
        "elementwise",
        1.05,
        10.0,
        10.5,
    )
    assert run.results.get(number=95).reason.startswith("timed out after 240s")


def test_a_bad_document_saves_nothing_and_says_where(engineer):
    doc = cuda_doc()
    doc["rows"][4]["problem"] = None  # the fifth row: earlier rows parse fine
    with pytest.raises(ValidationError) as caught:
        suite_run_import(doc=doc, name="broken", imported_by=engineer)
    assert caught.value.message_dict == {"document": ["rows[4].problem: expected a string"]}
    assert not SuiteRun.objects.exists() and not SuiteResult.objects.exists()


def test_a_name_in_use_is_refused(engineer):
    suite_run_import(doc=cuda_doc(), name="kb1", imported_by=engineer)
    with pytest.raises(ValidationError) as caught:
        suite_run_import(doc=cuda_doc(), name="kb1", imported_by=engineer)
    assert "named “kb1” exists already" in caught.value.message_dict["name"][0]
    assert SuiteRun.objects.count() == 1 and SuiteResult.objects.count() == 6


def test_management_command_imports_a_file(tmp_path, engineer):
    path = tmp_path / "kb1-h100.json"
    path.write_text(json.dumps(cuda_doc()))
    call_command("import_suite_run", str(path), "--user", engineer.username)
    call_command("import_suite_run", str(path), "--name", "again")
    assert list(SuiteRun.objects.order_by("id").values_list("name", flat=True)) == [
        "kb1-h100",
        "again",
    ]
    path.write_text(json.dumps({"meta": {}, "rows": []}))
    with pytest.raises(CommandError, match=r"meta.platform: expected a string"):
        call_command("import_suite_run", str(path), "--name", "empty")


def test_demo_seed_imports_the_suite_runs_in_docs(tmp_path, monkeypatch):
    from apps.accounts.services import demo_users_seed

    demo_users_seed()
    (tmp_path / "kb1-h100.json").write_text(json.dumps(cuda_doc()))
    monkeypatch.setattr(demo, "DEMO_SUITES_DIR", tmp_path)
    monkeypatch.setattr(demo, "DEMO_GPU_DIR", tmp_path / "no-gpu-searches")
    lines = demo.demo_campaigns_seed()
    run = SuiteRun.objects.get()
    assert run.name == "kb1-h100" and run.results.count() == 6
    assert any("kb1-h100.json as suite run" in line for line in lines)
    # A second seed finds a database in use and imports nothing again.
    demo.demo_campaigns_seed()
    assert SuiteRun.objects.count() == 1
