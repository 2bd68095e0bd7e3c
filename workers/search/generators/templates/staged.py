"""Staged candidates (``matmul+<family>``): a chain of kernels, the products' and the rest's,
in one module (:mod:`workers.search.lowering_staged` cuts the graph).

Each stage is written by its own family's writer, as a complete candidate; they are joined
under one header, every name a stage defines at module level prefixed with its stage (``_s0``,
``_s1``, ...) so that none shadows another, and one ``ModelNew`` runs the stages' forwards in
order, each given the outputs of those before it (``stage_ref(j)``). Parameters: the
products' (every stage but the last) are the ``matmul`` family's under an ``mm_`` prefix; the
last stage's are its family's; any other stage keeps its family's defaults."""

from __future__ import annotations

import ast
import io
import tokenize

from workers.search.generators.templates.common import HEADER_IMPORTS, _header
from workers.search.lowering_staged import stage_ref
from workers.search.trace import Plan

PREFIX = "mm_"


def split_params(params: dict) -> tuple[dict, dict]:
    """(the products' parameters, the last stage's) of a staged candidate's ``params``."""
    first = {k[len(PREFIX) :]: v for k, v in params.items() if k.startswith(PREFIX)}
    rest = {k: v for k, v in params.items() if not k.startswith(PREFIX)}
    return first, rest


def source_staged(plan: Plan, params: dict, writers: dict, defaults: dict) -> str:
    """The candidate of a staged ``plan`` (``writers``/``defaults``: the families')."""
    products, last = split_params(params)
    bodies = []
    for i, stage in enumerate(plan.stages):
        if i == len(plan.stages) - 1:
            p = last
        else:
            p = products if stage.family == "matmul" else {}
        full = {**defaults[stage.family], **p}
        source = writers[stage.family](stage, full)
        head = _header(stage, full)
        if not source.startswith(head):
            raise ValueError(f"stage {i} ({stage.family}) does not start with its header")
        bodies.append(_prefixed(source[len(head) :], f"_s{i}"))
    every = Plan(
        family=plan.family,
        forward_args=plan.forward_args,
        init_source=plan.init_source,
        preamble=plan.preamble,
        nodes=[n for stage in plan.stages for n in stage.nodes],
        summary=plan.summary,
    )
    args = ", ".join(plan.forward_args)
    lines = ["class ModelNew(nn.Module):\n" + plan.init_source, f"    def forward(self, {args}):"]
    for i in range(len(plan.stages)):
        given = "".join(f", {stage_ref(j)}={stage_ref(j)}" for j in range(i))
        call = f"_s{i}_ModelNew.forward(self, {args}{given})"
        last = i == len(plan.stages) - 1
        lines.append(f"        return {call}" if last else f"        {stage_ref(i)} = {call}")
    bodies.append("\n".join(lines))
    return _header(every, params) + "\n\n\n".join(b.strip("\n") for b in bodies) + "\n"


def _prefixed(body: str, tag: str) -> str:
    """``body`` with each name it defines at module level (functions, classes, assignments)
    renamed ``{tag}{name}`` (``_ke_row`` -> ``_s1_ke_row``; ``ModelNew`` -> ``_s1_ModelNew``)
    wherever it is used: a name after a dot (an attribute) is another thing and kept."""
    names = set()
    for node in ast.parse(body).body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    names -= {line.split()[1] for line in HEADER_IMPORTS if line.startswith("import ")}
    lines = body.splitlines(keepends=True)
    edits = []
    previous = None
    for tok in tokenize.generate_tokens(io.StringIO(body).readline):
        if tok.type == tokenize.NAME and tok.string in names and previous != ".":
            edits.append((tok.start, tok.end, tok.string))
        if tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT):
            previous = tok.string
    for (row, col), (_, end), name in reversed(edits):
        new = f"{tag}{name}" if name.startswith("_") else f"{tag}_{name}"
        line = lines[row - 1]
        lines[row - 1] = line[:col] + new + line[end:]
    return "".join(lines)
