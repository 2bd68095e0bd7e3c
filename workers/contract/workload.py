"""Workload parsing and trace import: plain data in, a validated ``Workload`` out.

A workload is ``{"cases": [{"name", "overrides", "dtype", "weight"}], "tolerance": {...} |
"exact", "edge_cases": bool, "serving": "graph" | "eager" | "kernelbench"}`` (the serving mode
says what decides a case's time: ``workers.gates.performance``). A malformed one raises
``WorkloadError`` naming the field.
Traces (CSV or JSON rows of constant overrides plus a call count) become weighted cases.
"""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass, field

from workers import constants as C


class WorkloadError(ValueError):
    """A workload or trace that cannot be used; the message names the offending field."""


@dataclass(frozen=True)
class Case:
    name: str
    overrides: dict = field(default_factory=dict)
    dtype: str | None = None
    weight: float = 1.0

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "overrides": dict(self.overrides),
            "dtype": self.dtype,
            "weight": self.weight,
        }


@dataclass(frozen=True)
class Workload:
    cases: tuple[Case, ...]
    tolerance: dict | str = field(default_factory=lambda: dict(C.DEFAULT_TOLERANCE))
    edge_cases: bool = True
    deterministic: bool = True
    serving: str = C.SERVING_GRAPH
    # The module's mode while it runs: "eval" (served for inference: BatchNorm reads its running
    # statistics, dropout is the identity) or "train" (BatchNorm normalises by the batch and
    # updates its running statistics in place, which a candidate must do too).
    mode: str = C.MODE_EVAL

    def to_dict(self) -> dict:
        return {
            "cases": [c.to_dict() for c in self.cases],
            "tolerance": self.tolerance,
            "edge_cases": self.edge_cases,
            "deterministic": self.deterministic,
            "serving": self.serving,
            "mode": self.mode,
        }


_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _check_overrides(value, where: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise WorkloadError(f"{where}: must be an object of module constants")
    out = {}
    for key, v in value.items():
        if not isinstance(key, str) or not _NAME.match(key):
            raise WorkloadError(f"{where}.{key}: not a Python identifier")
        if isinstance(v, bool) or not isinstance(v, (int, float, str, list)):
            if not isinstance(v, bool):
                raise WorkloadError(f"{where}.{key}: must be a number, string or list")
        if isinstance(v, int) and not isinstance(v, bool) and v < 0:
            raise WorkloadError(f"{where}.{key}: must not be negative")
        out[key] = v
    return out


def _check_tolerance(value) -> dict | str:
    if value is None:
        return dict(C.DEFAULT_TOLERANCE)
    if value == C.EXACT:
        return C.EXACT
    if not isinstance(value, dict):
        raise WorkloadError('tolerance: must be "exact" or an object of dtype -> {atol, rtol}')
    merged = {k: dict(v) for k, v in C.DEFAULT_TOLERANCE.items()}
    for dtype, tol in value.items():
        if dtype not in C.DTYPES:
            raise WorkloadError(f"tolerance.{dtype}: unknown dtype (one of {', '.join(C.DTYPES)})")
        if tol == C.EXACT:
            merged[dtype] = C.EXACT
            continue
        if not isinstance(tol, dict):
            raise WorkloadError(f'tolerance.{dtype}: must be {{atol, rtol}} or "exact"')
        for key in ("atol", "rtol"):
            v = tol.get(key, merged[dtype][key] if isinstance(merged[dtype], dict) else 0.0)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
                raise WorkloadError(f"tolerance.{dtype}.{key}: must be a number >= 0")
        merged[dtype] = {"atol": float(tol.get("atol", 0.0)), "rtol": float(tol.get("rtol", 0.0))}
    return merged


def parse_workload(data: dict | None) -> Workload:
    """Validate a workload object (already decoded from JSON). ``None`` means one case."""
    if data is None:
        return Workload(cases=(Case(name="default"),))
    if not isinstance(data, dict):
        raise WorkloadError("workload: must be a JSON object")
    known = {"cases", "tolerance", "edge_cases", "deterministic", "trace", "serving", "mode"}
    unknown = set(data) - known
    if unknown:
        raise WorkloadError(f"{sorted(unknown)[0]}: unknown workload field")
    raw_cases = data.get("cases")
    if raw_cases is None and "trace" in data:
        raw_cases = [c.to_dict() for c in import_trace(data["trace"])]
    if raw_cases is None:
        raw_cases = [{"name": "default"}]
    if not isinstance(raw_cases, list) or not raw_cases:
        raise WorkloadError("cases: must be a non-empty list")
    cases, seen = [], set()
    for i, raw in enumerate(raw_cases):
        where = f"cases[{i}]"
        if not isinstance(raw, dict):
            raise WorkloadError(f"{where}: must be an object")
        extra = set(raw) - {"name", "overrides", "dtype", "weight"}
        if extra:
            raise WorkloadError(f"{where}.{sorted(extra)[0]}: unknown case field")
        name = raw.get("name", f"case{i}")
        if not isinstance(name, str) or not name or name.startswith("edge:"):
            raise WorkloadError(f"{where}.name: must be a non-empty string not starting 'edge:'")
        if name in seen:
            raise WorkloadError(f"{where}.name: duplicate case name {name!r}")
        seen.add(name)
        dtype = raw.get("dtype")
        if dtype is not None and dtype not in C.DTYPES:
            raise WorkloadError(f"{where}.dtype: unknown dtype {dtype!r}")
        weight = raw.get("weight", 1.0)
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or weight < 0:
            raise WorkloadError(f"{where}.weight: must be a number >= 0")
        cases.append(
            Case(
                name=name,
                overrides=_check_overrides(raw.get("overrides"), f"{where}.overrides"),
                dtype=dtype,
                weight=float(weight),
            )
        )
    if sum(c.weight for c in cases) <= 0:
        raise WorkloadError("cases[].weight: at least one case needs a positive weight")
    edge = data.get("edge_cases", True)
    if not isinstance(edge, bool):
        raise WorkloadError("edge_cases: must be true or false")
    det = data.get("deterministic", True)
    if not isinstance(det, bool):
        raise WorkloadError("deterministic: must be true or false")
    serving = data.get("serving", C.SERVING_GRAPH)
    if serving not in C.SERVING_MODES:
        raise WorkloadError(f"serving: must be one of {', '.join(C.SERVING_MODES)}")
    mode = data.get("mode", C.MODE_EVAL)
    if mode not in C.MODES:
        raise WorkloadError(f"mode: must be one of {', '.join(C.MODES)} (the module's mode)")
    return Workload(
        cases=tuple(cases),
        tolerance=_check_tolerance(data.get("tolerance")),
        edge_cases=edge,
        deterministic=det,
        serving=serving,
        mode=mode,
    )


def load_workload_text(text: str) -> Workload:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise WorkloadError(f"workload: not valid JSON ({exc.msg} at line {exc.lineno})") from exc
    return parse_workload(data)


_COUNT_KEYS = ("count", "calls", "weight", "n")
# A trace is rows of a few numbers; the portal takes uploads up to 1 MiB.
MAX_TRACE_CHARS = 1 << 20


def _number(text: str):
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text


def _csv_rows(text: str) -> list[dict]:
    """Rows of a CSV trace; a malformed line raises WorkloadError naming it."""
    reader = csv.DictReader(io.StringIO(text))
    rows = []
    try:
        for r in reader:
            if None in r.values():
                raise WorkloadError(
                    f"trace line {reader.line_num}: fewer values than the header has columns"
                )
            rows.append({k.strip(): _number(v.strip()) for k, v in r.items() if k})
    except csv.Error as exc:
        # e.g. one field past csv.field_size_limit() (128 KiB): a trace row is a few numbers.
        # line_num counts the lines read in full; the bad one is the next.
        raise WorkloadError(f"trace line {reader.line_num + 1}: not valid CSV ({exc})") from exc
    return rows


def import_trace(rows_or_text, *, fmt: str | None = None) -> list[Case]:
    """Turn a trace (CSV text, JSON text, or a list of row dicts) into weighted cases.

    Each row holds constant overrides (e.g. ``batch_size``, ``dim``), an optional ``dtype`` and a
    call count (``count``/``calls``/``weight``/``n``). Rows with identical shapes are merged and
    their counts summed.
    """
    rows = rows_or_text
    if isinstance(rows_or_text, str):
        text = rows_or_text.strip()
        if len(text) > MAX_TRACE_CHARS:
            raise WorkloadError(f"trace: larger than {MAX_TRACE_CHARS >> 10} KiB")
        if fmt == "json" or (fmt is None and text[:1] in "[{"):
            try:
                rows = json.loads(text)
            except json.JSONDecodeError as exc:
                raise WorkloadError(f"trace: not valid JSON ({exc.msg})") from exc
            except RecursionError as exc:
                raise WorkloadError("trace: JSON nested too deeply") from exc
            if isinstance(rows, dict):
                rows = rows.get("rows", rows.get("calls"))
        else:
            rows = _csv_rows(text)
    if not isinstance(rows, list) or not rows:
        raise WorkloadError("trace: must be a non-empty list of rows")
    merged: dict[tuple, list] = {}
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise WorkloadError(f"trace[{i}]: must be an object")
        row = dict(row)
        count = 1
        for key in _COUNT_KEYS:
            if key in row:
                count = row.pop(key)
                break
        if isinstance(count, bool) or not isinstance(count, (int, float)) or count < 0:
            raise WorkloadError(f"trace[{i}].count: must be a number >= 0")
        dtype = row.pop("dtype", None) or None
        if dtype is not None and dtype not in C.DTYPES:
            raise WorkloadError(f"trace[{i}].dtype: unknown dtype {dtype!r}")
        row.pop("name", None)
        overrides = _check_overrides(row, f"trace[{i}]")
        key = (tuple(sorted(overrides.items(), key=lambda kv: kv[0])), dtype)
        if key in merged:
            merged[key][2] += count
        else:
            merged[key] = [overrides, dtype, count]
    cases = []
    for overrides, dtype, count in merged.values():
        parts = [f"{k}={v}" for k, v in overrides.items()] + ([dtype] if dtype else [])
        cases.append(
            Case(name=",".join(parts) or "default", overrides=overrides, dtype=dtype, weight=count)
        )
    return cases
