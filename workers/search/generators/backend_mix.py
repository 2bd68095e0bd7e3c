"""One candidate from a Triton candidate and a CuTe DSL candidate of the same problem: each case
shape runs on the back end that measured faster on it (issue 15's "the search chooses between
back ends per case").

Both parents are complete candidates with the reference's constructor (the template and cute
generators keep it), so their ``ModelNew`` classes differ only in ``forward``. The composed
module keeps both sources whole, renames their classes ``_KeTriton`` and ``_KeCute``, and
defines ``ModelNew(_KeTriton)`` whose ``forward`` looks the input's rows, row length and dtype
up in a table and calls the chosen class's ``forward`` on itself: one set of parameters, two
kernels. Shapes the table does not name take Triton. The module declares
``BACKEND = "cute+triton"``; the static gate then requires launched kernels of both.

The compute core: no Django here.
"""

from __future__ import annotations

import ast
import json
import re

from workers import constants as C

TRITON_CLASS = "_KeTriton"
CUTE_CLASS = "_KeCute"
_CLASS = re.compile(r"^class ModelNew\(", re.MULTILINE)
_BACKEND_LINE = re.compile(r"""^BACKEND\s*=\s*["'][A-Za-z_+]+["']\s*\n""", re.MULTILINE)

_DISPATCH = """

# Each case shape's back end ("rows,row length,dtype"), chosen from the parents' per-case
# timings; a shape not named here runs on Triton.
_KE_BACKENDS = {table}


class ModelNew({triton}):
    def forward(self, {args}):
        shape = {x}.shape
        rows = math.prod(shape[:-1]) if shape else 1
        key = f"{{rows}},{{shape[-1] if shape else 1}},{{str({x}.dtype).removeprefix('torch.')}}"
        if _KE_BACKENDS.get(key) == "{cute_name}":
            return {cute}.forward(self, {args})
        return {triton}.forward(self, {args})
"""


class CannotCompose(ValueError):
    """The two sources cannot live in one module (a name both define differently)."""


def _body(source: str, cls: str) -> tuple[list[str], str]:
    """The source's ``from __future__`` lines, and the rest without its module docstring or
    ``BACKEND`` line, with ``ModelNew`` renamed ``cls``."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    drop: set[int] = set()
    future = []
    for i, stmt in enumerate(tree.body):
        doc = i == 0 and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)
        is_future = isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__"
        if doc or is_future:
            drop.update(range(stmt.lineno - 1, stmt.end_lineno))
            if is_future:
                future.append(ast.get_source_segment(source, stmt))
    text = "".join(line for i, line in enumerate(lines) if i not in drop)
    if len(_CLASS.findall(text)) != 1:
        raise CannotCompose("a parent does not define exactly one top-level class ModelNew")
    return future, _BACKEND_LINE.sub("", _CLASS.sub(f"class {cls}(", text))


def _definitions(source: str) -> dict[str, str]:
    """Top-level names a module defines (functions, classes, assignments) -> their text."""
    out: dict[str, str] = {}
    for stmt in ast.parse(source).body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out[stmt.name] = ast.unparse(stmt)
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for target in targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        out[name.id] = ast.unparse(stmt)
    return out


def collisions(a: str, b: str) -> list[str]:
    """Top-level names both sources define, differently (the same text twice is harmless)."""
    da, db = _definitions(a), _definitions(b)
    return sorted(n for n in set(da) & set(db) if da[n] != db[n])


def compose(
    triton_source: str, cute_source: str, backends: dict[str, str], args: list[str], x: str
) -> str:
    """The composed candidate (see the module's doc). ``backends`` maps
    ``"rows,row length,dtype"`` keys (``"1024,32768,bfloat16"``) to ``"triton"`` or ``"cute"``;
    ``args`` are the reference's forward arguments and ``x`` the one whose rows are cut."""
    bad = {k: v for k, v in backends.items() if v not in (C.BACKEND_TRITON, C.BACKEND_CUTE)}
    if bad:
        raise CannotCompose(f"unknown back end(s): {bad}")
    future_t, tri = _body(triton_source, TRITON_CLASS)
    future_c, cut = _body(cute_source, CUTE_CLASS)
    clash = collisions(tri, cut)
    if clash:
        raise CannotCompose(f"both parents define {', '.join(clash)} differently")
    future = sorted(set(future_t + future_c))
    head = "".join(f"{line}\n" for line in future)
    doc = (
        '"""Per case, the faster of a Triton and a CuTe DSL kernel (generators/backend_mix.py)."""'
    )
    dispatch = _DISPATCH.format(
        table=json.dumps(dict(sorted(backends.items())), indent=4),
        triton=TRITON_CLASS,
        cute=CUTE_CLASS,
        cute_name=C.BACKEND_CUTE,
        args=", ".join(args),
        x=x,
    )
    return (
        f"{doc}\n\n{head}\nimport math\n\n"
        f'BACKEND = "{C.BACKEND_MIXED}"\n\n'
        f"# ---- the CuTe DSL parent ----\n{cut.strip()}\n\n\n"
        f"# ---- the Triton parent ----\n{tri.strip()}\n{dispatch}"
    )
