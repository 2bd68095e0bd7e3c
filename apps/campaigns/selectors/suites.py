"""Reads for benchmark-suite runs: the list with counts, a run's per-family summary and
no-template reasons, and its per-problem results filtered by family and outcome."""

import statistics
from dataclasses import dataclass

from django.db.models import Count, Q, QuerySet

from apps.campaigns.constants import SuiteOutcome
from apps.campaigns.models import SuiteResult, SuiteRun
from workers.suite_run import reason_group


def suite_run_list() -> QuerySet[SuiteRun]:
    """Every run, newest first, with its counts of problems, problems a template claimed and
    problems that ended with an accepted kernel (one query)."""
    # Ordered here: Meta.ordering does not apply to a query with GROUP BY.
    return (
        SuiteRun.objects.select_related("imported_by")
        .annotate(
            problems=Count("results"),
            claimed=Count("results", filter=Q(results__fits=True)),
            accepted=Count("results", filter=Q(results__outcome=SuiteOutcome.ACCEPTED)),
        )
        .order_by("-created_at", "-id")
    )


@dataclass(frozen=True)
class FamilySummary:
    """Problems a family's template claimed and how they ended; on cuda, the accepted kernels'
    speedups over the baseline (an accepted kernel passed the performance gate)."""

    family: str
    claimed: int
    accepted: int
    rejected: int
    errors: int
    faster: int | None
    median_speedup: float | None
    best_speedup: float | None


@dataclass(frozen=True)
class ReasonGroup:
    """No-template problems that share a reason (grouped by its first words)."""

    label: str
    problems: list[SuiteResult]


@dataclass(frozen=True)
class SuiteRunSummary:
    cuda: bool
    problems: int
    families: list[FamilySummary]
    total: FamilySummary
    no_template: int
    reasons: list[ReasonGroup]
    # Problems with no result (crashed or timed out), claimed or not.
    errors: list[SuiteResult]
    # Accepted problems with a speedup, in problem order (what the cuda chart draws).
    speedups: list[SuiteResult]


def _family(family: str, rows: list[SuiteResult], cuda: bool) -> FamilySummary:
    accepted = [r for r in rows if r.outcome == SuiteOutcome.ACCEPTED]
    speedups = [r.best_speedup for r in accepted if r.best_speedup is not None]
    return FamilySummary(
        family=family,
        claimed=len(rows),
        accepted=len(accepted),
        rejected=sum(r.outcome == SuiteOutcome.REJECTED for r in rows),
        errors=sum(r.outcome == SuiteOutcome.ERROR for r in rows),
        faster=sum(s > 1.0 for s in speedups) if cuda else None,
        median_speedup=statistics.median(speedups) if cuda and speedups else None,
        best_speedup=max(speedups) if cuda and speedups else None,
    )


def suite_run_summary(*, run: SuiteRun) -> SuiteRunSummary:
    """Per family (most problems first) and in all; the no-template reasons, largest group
    first; the problems without a result."""
    cuda = run.platform == "cuda"
    results = list(run.results.all())
    by_family: dict[str, list[SuiteResult]] = {}
    groups: dict[str, list[SuiteResult]] = {}
    for r in results:
        if r.fits:
            by_family.setdefault(r.family or "(not recorded)", []).append(r)
        elif r.outcome == SuiteOutcome.NO_TEMPLATE:
            groups.setdefault(reason_group(r.reason), []).append(r)
    claimed = [r for rs in by_family.values() for r in rs]
    return SuiteRunSummary(
        cuda=cuda,
        problems=len(results),
        families=[
            _family(fam, rs, cuda)
            for fam, rs in sorted(by_family.items(), key=lambda kv: (-len(kv[1]), kv[0]))
        ],
        total=_family("all", claimed, cuda),
        no_template=sum(len(v) for v in groups.values()),
        reasons=[
            ReasonGroup(label, rs)
            for label, rs in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))
        ],
        errors=[r for r in results if r.outcome == SuiteOutcome.ERROR],
        speedups=[
            r
            for r in results
            if cuda and r.outcome == SuiteOutcome.ACCEPTED and r.best_speedup is not None
        ],
    )


def suite_run_families(*, run: SuiteRun) -> list[str]:
    """The families that claimed some problem of the run (the filter's choices)."""
    families = run.results.exclude(family="").order_by("family").values_list("family", flat=True)
    return list(families.distinct())


def suite_results(
    *, run: SuiteRun, family: str | None = None, outcome: str | None = None
) -> QuerySet[SuiteResult]:
    """The run's problems in number order, of one family and one outcome when given."""
    results = run.results.all()
    if family:
        results = results.filter(family=family)
    if outcome:
        results = results.filter(outcome=outcome)
    return results
