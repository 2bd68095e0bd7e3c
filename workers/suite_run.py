"""A benchmark-suite run as ``scripts/bench_kernelbench.py`` writes it (``{"meta", "rows"}``),
read into frozen dataclasses: one row per problem, the run's settings and device. The portal
imports runs through ``parse_suite_run``; a bad document is a ``ValueError`` naming the field
(``rows[3].problem: expected a string``). Keys this module does not read are ignored. No Django.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import PurePosixPath

# A row's "result" as the script writes it; "claimed" comes from a `--candidates 0` run (which
# problems a template claims, no campaign run).
OUTCOMES = ("accepted", "rejected", "no_template", "error", "claimed")
NO_TEMPLATE_PREFIX = "no template fits: "

# No-template reasons grouped for a summary: (pattern on the one-line reason, group label); a
# label of None names the group by the op the pattern captures. The same table as the script's
# `reason_group`, so the portal and the Markdown summary group alike.
REASON_GROUPS = (
    (r"convolution", "a convolution"),
    (r"_pool\d?d|avg_pool|max_pool", "pooling"),
    (r"bmm|batched matmul", "batched matmul (bmm)"),
    (r"transposed left operand", "matmul with a transposed left operand"),
    (r"templates only reduce over the last dimension", "a reduction over a non-last dimension"),
    (r"neither matches the row shape", "a weight that does not broadcast along the last dim"),
    (r"changes the row layout", "a view that changes the row layout"),
    (r"could not be traced", "the reference could not be traced"),
    (r"uses (\w+)\.\w+, which no template expresses", None),
)


def reason_group(reason: str) -> str:
    """The group a no-template reason belongs to (its own text when no pattern matches)."""
    for pattern, label in REASON_GROUPS:
        m = re.search(pattern, reason)
        if m:
            return label or f"an op no template expresses: {m.group(1)}"
    return reason.removeprefix(NO_TEMPLATE_PREFIX)


@dataclass(frozen=True)
class SuiteRow:
    """One problem's result. ``best_speedup`` (cuda only) is the best accepted kernel's
    weighted speedup over the baseline where one was accepted, else the best any candidate
    measured; ``candidate_us`` / ``compile_us`` are the best accepted kernel's first timed case."""

    number: int
    problem: str
    family: str | None
    fits: bool
    outcome: str
    reason: str
    evaluated: int
    accepted: int
    best_speedup: float | None
    candidate_us: float | None
    compile_us: float | None
    wall_s: float | None


@dataclass(frozen=True)
class SuiteRunDoc:
    """The run: where and how it ran, and its rows in problem-number order."""

    platform: str
    baseline: str | None
    started_at: datetime | None
    argv: tuple[str, ...]
    command: str
    kernelbench_commit: str
    candidates: int | None
    max_elements: int | None
    fingerprint: dict
    rows: tuple[SuiteRow, ...] = field(default_factory=tuple)


def _one_line(text: str, limit: int = 400) -> str:
    line = " ".join((text or "").split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _get(obj: dict, key: str, path: str, kinds: tuple[type, ...], what: str, default=None):
    """``obj[key]`` when it is one of ``kinds`` (None allowed only when ``default`` is not
    required), else a ValueError naming ``path.key``."""
    value = obj.get(key, default)
    if value is None:
        return None
    # bool is an int in Python; a count or a time given as true/false is an error.
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        raise ValueError(f"{path}{key}: expected {what}")
    return value


def _number(obj: dict, key: str, path: str) -> float | None:
    value = _get(obj, key, path, (int, float), "a number")
    return None if value is None else float(value)


def _count(obj: dict, key: str, path: str) -> int:
    value = _get(obj, key, path, (int,), "a whole number", default=0)
    if value < 0:
        raise ValueError(f"{path}{key}: expected a whole number, not {value}")
    return value


def _dicts(obj: dict, key: str, path: str) -> list[dict]:
    value = _get(obj, key, path, (list,), "a list", default=[])
    for i, item in enumerate(value):
        if not isinstance(item, dict):
            raise ValueError(f"{path}{key}[{i}]: expected an object")
    return value


def _best_accepted(row: dict, path: str) -> tuple[float | None, float | None, float | None]:
    """(speedup, candidate_us, compile_us) of the fastest accepted node, from its first timed
    case; all None where no node was accepted or none was timed."""
    best = None
    for i, node in enumerate(_dicts(row, "nodes", path)):
        npath = f"{path}nodes[{i}]."
        fitness = _get(node, "fitness", npath, (dict,), "an object") or {}
        speedup = _number(fitness, "speedup", f"{npath}fitness.")
        timed = _dicts(node, "timed", npath)
        if node.get("status") != "accepted":
            continue
        if best is None or (speedup or 0) > (best[0] or 0):
            best = (speedup, timed[0] if timed else {}, f"{npath}timed[0].")
    if best is None:
        return None, None, None
    speedup, case, cpath = best
    baselines = _get(case, "baselines_us", cpath, (dict,), "an object") or {}
    return (
        speedup,
        _number(case, "candidate_us", cpath),
        _number(baselines, "compile", f"{cpath}baselines_us."),
    )


def _reason(row: dict, outcome: str, path: str) -> str:
    if outcome == "no_template":
        summary = _get(row, "summary", path, (str,), "a string") or ""
        return _one_line(summary.removeprefix(NO_TEMPLATE_PREFIX))
    if outcome == "error":
        return _one_line(_get(row, "error", path, (str,), "a string") or "no result")
    if outcome == "rejected":
        ff = _get(row, "first_failure", path, (dict,), "an object")
        if ff:
            gate = _get(ff, "gate", f"{path}first_failure.", (str,), "a string") or "error"
            why = _get(ff, "reason", f"{path}first_failure.", (str,), "a string") or ""
            return _one_line(f"{gate}: {why.removeprefix(f'{gate}: ')}")
        return _one_line(_get(row, "message", path, (str,), "a string") or "")
    return ""


def _row(row: dict, i: int, cuda: bool) -> SuiteRow:
    path = f"rows[{i}]."
    name = _get(row, "problem", path, (str,), "a string")
    if not name:
        raise ValueError(f"{path}problem: expected a string")
    stem = PurePosixPath(name).stem
    m = re.match(r"(\d+)_", stem)
    if not m:
        raise ValueError(f"{path}problem: expected a file name that starts with its number")
    outcome = _get(row, "result", path, (str,), "a string")
    if outcome not in OUTCOMES:
        raise ValueError(f"{path}result: expected one of {', '.join(OUTCOMES)}")
    accepted_speedup, candidate_us, compile_us = _best_accepted(row, path)
    measured = _number(row, "best_speedup", path)
    wall = _number(row, "process_wall_s", path)
    return SuiteRow(
        number=int(m.group(1)),
        problem=stem,
        family=_get(row, "family", path, (str,), "a string") or None,
        fits=bool(_get(row, "fits", path, (bool,), "true or false", default=False)),
        outcome=outcome,
        reason=_reason(row, outcome, path),
        evaluated=_count(row, "evaluated", path),
        accepted=_count(row, "accepted", path),
        best_speedup=(accepted_speedup or measured) if cuda else None,
        candidate_us=candidate_us if cuda else None,
        compile_us=compile_us if cuda else None,
        wall_s=wall if wall is not None else _number(row, "wall_s", path),
    )


def _started_at(meta: dict) -> datetime | None:
    text = _get(meta, "started_at", "meta.", (str,), "a string")
    if not text:
        return None
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError("meta.started_at: expected an ISO 8601 time") from None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def parse_suite_run(doc: dict) -> SuiteRunDoc:
    """The run in ``doc``; a ValueError names the first field in error."""
    if not isinstance(doc, dict):
        raise ValueError("document: expected an object with meta and rows")
    meta = _get(doc, "meta", "", (dict,), "an object")
    if meta is None:
        raise ValueError("meta: expected an object")
    rows = _get(doc, "rows", "", (list,), "a list")
    if rows is None:
        raise ValueError("rows: expected a list")
    platform = _get(meta, "platform", "meta.", (str,), "a string")
    if not platform:
        raise ValueError("meta.platform: expected a string")
    argv = _get(meta, "argv", "meta.", (list,), "a list of strings") or []
    if not all(isinstance(a, str) for a in argv):
        raise ValueError("meta.argv: expected a list of strings")
    parts = _dicts(meta, "parts", "meta.")  # a run merged from runs made in parts
    commands = [] if parts else [shlex.join(argv)]
    for i, part in enumerate(parts):
        part_argv = _get(part, "argv", f"meta.parts[{i}].", (list,), "a list of strings") or []
        if not all(isinstance(a, str) for a in part_argv):
            raise ValueError(f"meta.parts[{i}].argv: expected a list of strings")
        commands.append(shlex.join(part_argv))
    cuda = platform == "cuda"
    parsed, seen, fingerprint = [], {}, None
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise ValueError(f"rows[{i}]: expected an object")
        one = _row(row, i, cuda)
        if one.problem in seen:
            raise ValueError(f"rows[{i}].problem: {one.problem} is also rows[{seen[one.problem]}]")
        seen[one.problem] = i
        if fingerprint is None:
            fingerprint = _get(row, "fingerprint", f"rows[{i}].", (dict,), "an object")
        parsed.append(one)
    return SuiteRunDoc(
        platform=platform,
        baseline=_get(meta, "baseline", "meta.", (str,), "a string"),
        started_at=_started_at(meta),
        argv=tuple(argv),
        command="\n".join(commands),
        kernelbench_commit=_get(meta, "kernelbench_commit", "meta.", (str,), "a string") or "",
        candidates=_get(meta, "candidates", "meta.", (int,), "a whole number"),
        max_elements=_get(meta, "max_elements", "meta.", (int,), "a whole number"),
        fingerprint=fingerprint or {},
        rows=tuple(sorted(parsed, key=lambda r: (r.number, r.problem))),
    )
