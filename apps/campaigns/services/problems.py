"""Problems: the built-in catalog and uploads, validated before they are saved."""

import ast
import json

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils.text import slugify

from apps.campaigns.constants import ProblemOrigin
from apps.campaigns.models import Problem
from workers.catalog import catalog_list
from workers.contract.workload import WorkloadError, import_trace, parse_workload
from workers.reference_check import reference_check

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


def workload_from_upload(
    *,
    workload_text: str = "",
    trace_text: str = "",
    workload_field: str = "workload_file",
    trace_field: str = "trace_file",
) -> dict | None:
    """A workload from an uploaded workload JSON or trace (CSV/JSON rows of shapes and counts).

    Errors name the upload field and the offending entry (`trace[2].count: ...`).
    """
    if workload_text.strip() and trace_text.strip():
        raise ValidationError({trace_field: "give a workload or a trace, not both"})
    if trace_text.strip():
        try:
            cases = import_trace(trace_text)
            return parse_workload({"cases": [c.to_dict() for c in cases]}).to_dict()
        except WorkloadError as exc:
            raise ValidationError({trace_field: str(exc)}) from exc
    if workload_text.strip():
        try:
            data = json.loads(workload_text)
        except json.JSONDecodeError as exc:
            raise ValidationError(
                {workload_field: f"not valid JSON ({exc.msg} at line {exc.lineno})"}
            ) from exc
        return workload_check(data, field=workload_field)
    return None


def problem_reference_check(
    *,
    source: str,
    workload: dict | None,
    workload_field: str = "workload",
    interpret_shapes: bool = False,
) -> dict:
    """Import the reference and run its heaviest case once behind the sandbox boundary
    (``workers.reference_check``: never in the portal's process, never with its rights).
    With `interpret_shapes`, the answer's ``interpret_cases`` says for every case the smaller
    shapes the interpret platform checks instead of those asked.

    Raises ValidationError naming `source` or `workload_field`; returns what the run saw.
    """
    problem_source_check(source)
    cases = parse_workload(workload).cases
    case = max(cases, key=lambda c: c.weight).to_dict()
    scale_cases = [c.to_dict() for c in cases] if interpret_shapes else None
    result = reference_check(source=source, case=case, scale_cases=scale_cases)
    if not result.get("ok"):
        if result.get("field") is None:
            reason = result.get("error") or "the sandbox is unavailable"
            raise ValidationError({"source": f"this portal cannot run uploaded code: {reason}"})
        field = workload_field if result.get("field") == "workload" else "source"
        raise ValidationError({field: result.get("error") or "the reference check failed"})
    return result


@transaction.atomic
def problem_upload(
    *,
    name: str,
    source: str,
    workload: dict | None,
    created_by,
    description: str = "",
    workload_field: str = "workload",
    checked: bool = False,
) -> Problem:
    """An uploaded problem: the reference runs one case in the sandbox before it is saved
    (`checked=True` when the caller just ran that check)."""
    problem_source_check(source)
    if not checked:
        problem_reference_check(source=source, workload=workload, workload_field=workload_field)
    return problem_create(
        name=name,
        source=source,
        workload=workload,
        description=description,
        created_by=created_by,
        origin=ProblemOrigin.UPLOAD,
    )
