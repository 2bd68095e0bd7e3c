"""Region scopes: which calls an artifact may serve (dtypes and shape ranges), plain data.

A scope is ``{"dtypes": [...], "constants": {name: [lo, hi]}, "inputs": [[[lo, hi], ...] or
None per input]}``. ``inputs`` gives, per tensor input of ``get_inputs()``, the inclusive range
of each dimension over the cases the kernel passed; a call matches when its floating dtype is
listed and every tensor's rank and dimensions fall inside. Narrowing keeps a scope inside another.
"""

from __future__ import annotations

DTYPE_NAMES = {"float32", "float16", "bfloat16", "float64"}


class ScopeError(ValueError):
    """A scope edit that is malformed or widens the scope it narrows."""


def _span(values) -> list:
    return [min(values), max(values)]


def derive(problem_source: str, cases: list[dict]) -> dict:
    """The scope covering ``cases`` ({"overrides", "dtype"}); imports the problem (torch)."""
    import tempfile

    from workers.contract import problem as P

    with tempfile.TemporaryDirectory(prefix="ke-scope-") as folder:
        module = P.load_module(problem_source, "ke_scope_problem", folder)
        shapes = [P.input_shapes(module, dict(c.get("overrides") or {})) for c in cases]
    dtypes = sorted({c.get("dtype") or "float32" for c in cases})
    names = sorted({k for c in cases for k, v in (c.get("overrides") or {}).items()})
    constants = {}
    for name in names:
        values = [(c.get("overrides") or {}).get(name) for c in cases]
        if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            constants[name] = _span(values)
    inputs = []
    for i in range(len(shapes[0]) if shapes else 0):
        per_case = [s[i] for s in shapes]
        if any(s is None for s in per_case) or len({len(s) for s in per_case}) != 1:
            inputs.append(None)
            continue
        inputs.append([_span([s[d] for s in per_case]) for d in range(len(per_case[0]))])
    return {"dtypes": dtypes, "constants": constants, "inputs": inputs}


def matches(scope: dict, dtype: str | None, shapes: list) -> bool:
    """Whether a call (floating dtype name, shape tuple or None per input) lies in ``scope``."""
    if dtype is not None and dtype not in scope.get("dtypes", []):
        return False
    ranges = scope.get("inputs") or []
    if len(shapes) != len(ranges):
        return False
    for shape, dims in zip(shapes, ranges, strict=True):
        if dims is None:
            continue
        if shape is None or len(shape) != len(dims):
            return False
        if any(not (lo <= n <= hi) for n, (lo, hi) in zip(shape, dims, strict=True)):
            return False
    return True


def _inside(inner: list, outer: list) -> bool:
    return outer[0] <= inner[0] <= inner[1] <= outer[1]


def narrow(outer: dict, *, dtypes=None, constants=None, inputs=None) -> dict:
    """A copy of ``outer`` narrowed by the given fields; raises ``ScopeError`` on widening."""
    out = {
        "dtypes": list(outer.get("dtypes", [])),
        "constants": {k: list(v) for k, v in (outer.get("constants") or {}).items()},
        "inputs": outer.get("inputs") or [],
    }
    if dtypes is not None:
        dtypes = sorted(set(dtypes))
        if not dtypes:
            raise ScopeError("dtypes: keep at least one dtype")
        extra = set(dtypes) - set(out["dtypes"])
        if extra:
            raise ScopeError(f"dtypes: {sorted(extra)[0]} is outside the scope (narrow only)")
        out["dtypes"] = dtypes
    for name, span in (constants or {}).items():
        if name not in out["constants"]:
            raise ScopeError(f"constants.{name}: not a range of this scope")
        if not (isinstance(span, list | tuple) and len(span) == 2):
            raise ScopeError(f"constants.{name}: must be [lo, hi]")
        span = [int(span[0]), int(span[1])]
        if not _inside(span, out["constants"][name]):
            raise ScopeError(
                f"constants.{name}: {span} is not inside {out['constants'][name]} (narrow only)"
            )
        out["constants"][name] = span
    if inputs is not None:
        if not within({"dtypes": out["dtypes"], "inputs": inputs}, {**out, "constants": {}}):
            raise ScopeError("inputs: ranges must lie inside the current ones (narrow only)")
        out["inputs"] = inputs
    return out


def within(inner: dict, outer: dict) -> bool:
    """Whether every call ``inner`` admits is admitted by ``outer``."""
    if not set(inner.get("dtypes", [])) <= set(outer.get("dtypes", [])):
        return False
    a, b = inner.get("inputs") or [], outer.get("inputs") or []
    if len(a) != len(b):
        return False
    for dims_in, dims_out in zip(a, b, strict=True):
        if dims_out is None:
            continue
        if dims_in is None or len(dims_in) != len(dims_out):
            return False
        if not all(_inside(x, y) for x, y in zip(dims_in, dims_out, strict=True)):
            return False
    for name, span in (inner.get("constants") or {}).items():
        if name in (outer.get("constants") or {}) and not _inside(span, outer["constants"][name]):
            return False
    return True


def describe(scope: dict) -> str:
    """A short human label: dtypes and constant ranges."""
    parts = [",".join(scope.get("dtypes", []))]
    for name, (lo, hi) in sorted((scope.get("constants") or {}).items()):
        parts.append(f"{name} {lo}" if lo == hi else f"{name} {lo}–{hi}")
    return " · ".join(p for p in parts if p)


def _serve(request: dict) -> dict:
    return {"scope": derive(request["problem_source"], request["cases"])}


if __name__ == "__main__":
    # Run behind the sandbox by workers.confined.run_confined: the problem's own code runs here.
    from workers.confined import serve_json

    serve_json(_serve)
