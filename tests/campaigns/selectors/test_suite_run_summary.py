"""What a suite run's page reads: per family how many problems a template claimed and how many
ended with an accepted kernel (on cuda: how much faster), the no-template reasons grouped, the
filtered problem table, and the list of runs with counts in one query."""

import pytest
from django.contrib.auth.models import User

from apps.campaigns.selectors.suites import (
    suite_results,
    suite_run_families,
    suite_run_list,
    suite_run_summary,
)
from apps.campaigns.services.suites import suite_run_import
from tests.support.suite_runs import cuda_doc, interpret_doc

pytestmark = pytest.mark.django_db


@pytest.fixture
def cuda_run(db):
    user = User.objects.create_user("suite-reader")
    return suite_run_import(doc=cuda_doc(), name="kb1-h100", imported_by=user)


def test_cuda_summary_per_family(cuda_run):
    summary = suite_run_summary(run=cuda_run)
    assert summary.cuda and summary.problems == 6
    fams = {f.family: f for f in summary.families}
    assert list(fams) == ["elementwise", "row"]  # most problems first, then by name
    ew = fams["elementwise"]
    assert (ew.claimed, ew.accepted, ew.rejected, ew.errors, ew.faster) == (2, 1, 1, 0, 1)
    assert ew.best_speedup == 1.05 and ew.median_speedup == 1.05
    row = fams["row"]
    assert (row.claimed, row.accepted, row.errors) == (2, 1, 1)
    total = summary.total
    assert (total.claimed, total.accepted, total.faster) == (4, 2, 2)
    assert total.median_speedup == pytest.approx(1.325) and total.best_speedup == 1.6
    assert [r.problem for r in summary.speedups] == ["19_ReLU", "23_Softmax"]
    assert summary.no_template == 2
    assert {g.label: [r.number for r in g.problems] for g in summary.reasons} == {
        "a convolution": [50],
        "an op no template expresses: cumsum": [89],
    }
    assert [r.number for r in summary.errors] == [95]


def test_interpret_summary_has_no_speedups(db):
    run = suite_run_import(doc=interpret_doc(), name="kb1-cpu", imported_by=None)
    summary = suite_run_summary(run=run)
    assert not summary.cuda and summary.speedups == []
    assert summary.total.accepted == 2 and summary.total.faster is None
    assert all(f.median_speedup is None for f in summary.families)


def test_results_filter_by_family_and_outcome(cuda_run):
    assert suite_run_families(run=cuda_run) == ["elementwise", "row"]
    assert [r.number for r in suite_results(run=cuda_run, family="row")] == [23, 95]
    assert [r.number for r in suite_results(run=cuda_run, outcome="no_template")] == [50, 89]
    assert [
        r.number for r in suite_results(run=cuda_run, family="elementwise", outcome="accepted")
    ] == [19]


def test_run_list_counts_in_one_query(cuda_run, django_assert_num_queries):
    suite_run_import(doc=interpret_doc(), name="kb1-cpu", imported_by=None)
    with django_assert_num_queries(1):
        runs = [
            (r.name, r.problems, r.claimed, r.accepted, r.imported_by) for r in suite_run_list()
        ]
    assert runs[0][:4] == ("kb1-cpu", 6, 4, 2)
    assert runs[1][:4] == ("kb1-h100", 6, 4, 2) and runs[1][4].username == "suite-reader"
