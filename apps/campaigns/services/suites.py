"""Writes for benchmark-suite runs: import a run the bench script wrote (all of it, or none)."""

from dataclasses import asdict

from django.core.exceptions import ValidationError
from django.db import transaction

from apps.campaigns.models import SuiteResult, SuiteRun
from workers.suite_run import parse_suite_run


def suite_run_import(*, doc: dict, name: str, imported_by) -> SuiteRun:
    """Save the run in `doc` (``scripts/bench_kernelbench.py --out``) as `name`. A document
    the parser refuses, or a name in use, is a ValidationError and saves nothing."""
    name = (name or "").strip()
    if not name:
        raise ValidationError({"name": "Give the run a name."})
    try:
        parsed = parse_suite_run(doc)
    except ValueError as exc:
        raise ValidationError({"document": str(exc)}) from exc
    with transaction.atomic():
        # Checked inside the transaction; the unique constraint settles a race.
        if SuiteRun.objects.filter(name=name).exists():
            raise ValidationError({"name": f"A suite run named “{name}” exists already."})
        run = SuiteRun.objects.create(
            name=name,
            platform=parsed.platform,
            baseline=parsed.baseline or "",
            started_at=parsed.started_at,
            command=parsed.command,
            kernelbench_commit=parsed.kernelbench_commit,
            fingerprint=parsed.fingerprint,
            imported_by=imported_by,
        )
        SuiteResult.objects.bulk_create(
            # SuiteRow's fields are the model's; a family is "" where no template fits
            SuiteResult(run=run, **{**asdict(row), "family": row.family or ""})
            for row in parsed.rows
        )
    return run
