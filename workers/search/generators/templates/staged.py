"""Staged candidates (``matmul+<family>``): a chain of kernels, the products' and the rest's,
in one module (:mod:`workers.search.lowering_staged` cuts the graph).

Each stage is written by its own family's writer, as a complete candidate; they are joined
under one header, every name a stage defines at module level prefixed with its stage (``_s0``,
``_s1``, ...) so that none shadows another, and one ``ModelNew`` runs the stages' forwards in
order, each given the outputs of those before it (``stage_ref(j)``). Parameters: the
products' (every stage but the last) are the ``matmul`` family's under an ``mm_`` prefix, the
convolutions' the ``conv`` family's under ``cv_``; the last stage's are its family's; any other
stage keeps its family's defaults."""

from __future__ import annotations

import ast
import io
import tokenize

from workers.search.generators.templates.common import HEADER_IMPORTS, _header, forward_def
from workers.search.lowering_staged import stage_ref
from workers.search.trace import Plan

PREFIX = "mm_"
CONV_PREFIX = "cv_"


def split_params(params: dict) -> tuple[dict, dict]:
    """(the products' parameters, the last stage's) of a staged candidate's ``params``."""
    first = {k[len(PREFIX) :]: v for k, v in params.items() if k.startswith(PREFIX)}
    rest = {k: v for k, v in params.items() if not k.startswith((PREFIX, CONV_PREFIX))}
    return first, rest


def conv_params(params: dict) -> dict:
    """The convolutions' parameters (``cv_``) of a staged candidate's ``params``."""
    return {k[len(CONV_PREFIX) :]: v for k, v in params.items() if k.startswith(CONV_PREFIX)}


def source_staged(plan: Plan, params: dict, writers: dict, defaults: dict) -> str:
    """The candidate of a staged ``plan`` (``writers``/``defaults``: the families')."""
    products, last = split_params(params)
    owners: dict[tuple[str, str], str] = {}  # (a definition's text, its name) -> its stage tag
    bodies = []
    for i, stage in enumerate(plan.stages):
        if i == len(plan.stages) - 1:
            p = last
        else:
            p = {"matmul": products, "conv": conv_params(params)}.get(stage.family, {})
        full = {**defaults[stage.family], **p}
        source = writers[stage.family](stage, full)
        head = _header(stage, full)
        if not source.startswith(head):
            raise ValueError(f"stage {i} ({stage.family}) does not start with its header")
        bodies.append(_joined(source[len(head) :], f"_s{i}", owners))
    every = Plan(
        family=plan.family,
        forward_args=plan.forward_args,
        init_source=plan.init_source,
        preamble=plan.preamble,
        nodes=[n for stage in plan.stages for n in stage.nodes],
        summary=plan.summary,
    )
    args = ", ".join(plan.forward_args)
    lines = ["class ModelNew(nn.Module):\n" + plan.init_source, forward_def(plan).rstrip("\n")]
    for i in range(len(plan.stages)):
        given = "".join(f", {stage_ref(j)}={stage_ref(j)}" for j in range(i))
        call = f"_s{i}_ModelNew.forward(self, {args}{given})"
        last = i == len(plan.stages) - 1
        lines.append(f"        return {call}" if last else f"        {stage_ref(i)} = {call}")
    bodies.append("\n".join(lines))
    return _header(every, params) + "\n\n\n".join(b.strip("\n") for b in bodies if b) + "\n"


def _joined(body: str, tag: str, owners: dict) -> str:
    """Stage ``tag``'s ``body`` with its module-level definitions renamed for the stage (see
    ``_prefixed``), less those an earlier stage already has word for word, with everything
    they use shared too (an MLP's layers launch one kernel, written once): those are read
    from that stage. ``owners`` ((text, name) -> tag) gathers the definitions written."""
    tree = ast.parse(body)
    lines = body.splitlines(keepends=True)
    chunks = {}  # name -> (text, first line, last line)
    for node in tree.body:
        names = _defined(node)
        if len(names) == 1:
            first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
            chunks[names[0]] = ("".join(lines[first - 1 : node.end_lineno]), first, node.end_lineno)
    uses = {name: _names_in(text) & set(chunks) - {name} for name, (text, _, _) in chunks.items()}
    shared = {
        name: owners[(text, name)]
        for name, (text, _, _) in chunks.items()
        if (text, name) in owners
    }
    changed = True
    while changed:  # a definition is shared only with all it uses, from the same stage
        changed = False
        for name in list(shared):
            if any(shared.get(u) != shared[name] for u in uses[name]):
                del shared[name]
                changed = True
    for name, (text, _, _) in chunks.items():
        if name not in shared:
            owners[(text, name)] = tag
    for name in sorted(shared, key=lambda n: -chunks[n][1]):  # drop them, last first
        _, first, last = chunks[name]
        del lines[first - 1 : last]
    defined = {n for node in tree.body for n in _defined(node)}
    return _prefixed("".join(lines), tag, shared, defined)


def _defined(node: ast.stmt) -> list[str]:
    """The names a module-level statement defines."""
    if isinstance(node, ast.FunctionDef | ast.ClassDef):
        return [node.name]
    if isinstance(node, ast.Assign | ast.AnnAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return [t.id for t in targets if isinstance(t, ast.Name)]
    return []


def _names_in(text: str) -> set[str]:
    return {
        tok.string
        for tok in tokenize.generate_tokens(io.StringIO(text).readline)
        if tok.type == tokenize.NAME
    }


def _prefixed(body: str, tag: str, shared: dict, names: set) -> str:
    """``body`` with each of ``names`` (those its stage defines at module level) renamed
    ``{tag}{name}`` (``_ke_row`` -> ``_s1_ke_row``; ``ModelNew`` -> ``_s1_ModelNew``) wherever it
    is used, or ``{shared[name]}{name}`` for one an earlier stage defines; a name after a dot
    (an attribute) is another thing and kept."""
    names = names - {line.split()[1] for line in HEADER_IMPORTS if line.startswith("import ")}
    lines = body.splitlines(keepends=True)
    edits = []
    previous = None
    for tok in tokenize.generate_tokens(io.StringIO(body).readline):
        if tok.type == tokenize.NAME and tok.string in names and previous != ".":
            edits.append((tok.start, tok.end, tok.string))
        if tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT):
            previous = tok.string
    for (row, col), (_, end), name in reversed(edits):
        owner = shared.get(name, tag)
        new = f"{owner}{name}" if name.startswith("_") else f"{owner}_{name}"
        line = lines[row - 1]
        lines[row - 1] = line[:col] + new + line[end:]
    return "".join(lines)
