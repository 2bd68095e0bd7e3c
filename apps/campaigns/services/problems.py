"""Problems: the built-in catalog and uploads, validated before they are saved."""

import ast

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils.text import slugify

from apps.campaigns.constants import ProblemOrigin
from apps.campaigns.models import Problem
from workers.catalog import catalog_list
from workers.contract.workload import WorkloadError, parse_workload

REQUIRED_NAMES = ("Model", "get_inputs", "get_init_inputs")


def problem_source_check(source: str) -> None:
    """Refuse a problem file that is not in the KernelBench format, saying what is missing."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise ValidationError({"source": f"line {exc.lineno}: {exc.msg}"}) from exc
    defined = {
        node.name
        for node in tree.body
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
    }
    missing = [name for name in REQUIRED_NAMES if name not in defined]
    if missing:
        raise ValidationError(
            {"source": f"not in the KernelBench format: no top-level {', '.join(missing)}"}
        )


def workload_check(workload: dict | None, *, field: str = "workload") -> dict | None:
    """Validate a workload; the error names the offending field."""
    if workload is None:
        return None
    try:
        return parse_workload(workload).to_dict()
    except WorkloadError as exc:
        raise ValidationError({field: str(exc)}) from exc


@transaction.atomic
def problem_create(
    *,
    name: str,
    source: str,
    workload: dict | None = None,
    title: str = "",
    family: str = "",
    description: str = "",
    created_by=None,
    origin: str = ProblemOrigin.UPLOAD,
    smoke_workload: dict | None = None,
) -> Problem:
    slug = slugify(name)
    if not slug:
        raise ValidationError({"name": "a problem needs a name of letters, digits or dashes"})
    if Problem.objects.filter(name=slug).exists():
        raise ValidationError({"name": f"a problem named {slug!r} exists already"})
    problem_source_check(source)
    return Problem.objects.create(
        name=slug,
        title=title or name,
        family=family,
        description=description,
        source=source,
        workload=workload_check(workload),
        smoke_workload=workload_check(smoke_workload, field="smoke_workload"),
        origin=origin,
        created_by=created_by,
    )


@transaction.atomic
def catalog_sync() -> list[Problem]:
    """Load (or refresh) the built-in catalog problems with their workloads."""
    problems = []
    for entry in catalog_list():
        problem, _ = Problem.objects.update_or_create(
            name=entry.name.replace("_", "-"),
            defaults={
                "title": entry.name.replace("_", " "),
                "family": entry.family,
                "description": entry.description,
                "source": entry.problem_source(),
                "workload": workload_check(entry.workload()),
                "smoke_workload": workload_check(entry.workload(smoke=True)),
                "origin": ProblemOrigin.CATALOG,
            },
        )
        problems.append(problem)
    return problems
