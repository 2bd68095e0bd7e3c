"""Source review helpers: syntax highlighting by line and side-by-side diffs with word highlights.

Pure functions of text (no database); selectors call them to build the candidate page.
"""

import difflib
import json
import re
from dataclasses import dataclass

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer
from pygments.styles import get_style_by_name
from pygments.token import STANDARD_TYPES

from apps.campaigns.text import IR_STAGES, gpu_target, specialisation_labels

_FORMATTER = HtmlFormatter(nowrap=True)
# Pygments' default style is made for a light page (names and imports in #0000FF); on the dark
# theme's code background that is unreadable, so the dark theme gets a style made for it.
DARK_STYLE = "github-dark"
_LEXER = PythonLexer()
_WORDS = re.compile(r"\w+|\s+|[^\w\s]")


def highlighted_lines(source: str) -> list[SafeString]:
    """The source highlighted by Pygments, one safe HTML string per line."""
    if not source:
        return []
    html = highlight(source, _LEXER, _FORMATTER)
    # Pygments closes spans at line ends when nowrap is set, so splitting keeps tags balanced.
    lines = html.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [mark_safe(line) for line in lines]  # noqa: S308 - Pygments escapes the source


def _token_rules(style_name: str, scope: str) -> list[str]:
    """One rule per token class with every property stated, so no rule of the light style
    shows through the dark one (Pygments' own style sheet leaves unset properties out)."""
    style = get_style_by_name(style_name)
    rules = []
    for ttype, cls in STANDARD_TYPES.items():
        if not cls:
            continue
        s = style.style_for_token(ttype)
        props = [
            f"color: #{s['color']}" if s["color"] else "color: inherit",
            f"background-color: #{s['bgcolor']}"
            if s["bgcolor"]
            else "background-color: transparent",
            "font-weight: bold" if s["bold"] else "font-weight: normal",
            "font-style: italic" if s["italic"] else "font-style: normal",
            f"border: 1px solid #{s['border']}" if s["border"] else "border: 0",
        ]
        rules.append(f"{scope} .{cls} {{ {'; '.join(props)} }}")
    return rules


def pygments_css() -> str:
    """Light highlighting (Pygments' default) and, under the dark theme (picked, or followed
    from the system), the dark style's colours for every token."""
    light = _FORMATTER.get_style_defs(".hl")
    dark_rules = _token_rules(DARK_STYLE, ':root[data-theme="dark"] .hl')
    auto_rules = _token_rules(DARK_STYLE, ':root[data-theme="auto"] .hl')
    media = "@media (prefers-color-scheme: dark) {\n" + "\n".join(auto_rules) + "\n}"
    return "\n".join([light, *dark_rules, media]) + "\n"


@dataclass(frozen=True)
class DiffRow:
    kind: str  # equal | replace | delete | insert
    left_no: int | None
    left: SafeString
    right_no: int | None
    right: SafeString


def _word_diff(a: str, b: str) -> tuple[SafeString, SafeString]:
    """Both lines with the changed words wrapped in <del>/<ins>."""
    wa, wb = _WORDS.findall(a), _WORDS.findall(b)
    left, right = [], []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, wa, wb, autojunk=False).get_opcodes():
        old, new = escape("".join(wa[i1:i2])), escape("".join(wb[j1:j2]))
        if tag == "equal":
            left.append(old)
            right.append(new)
            continue
        if old:
            left.append(f"<del>{old}</del>")
        if new:
            right.append(f"<ins>{new}</ins>")
    return mark_safe("".join(left)), mark_safe("".join(right))  # noqa: S308 - escaped above


def side_by_side(old: str, new: str, *, context: int = 3) -> list[DiffRow | None]:
    """Rows of a side-by-side diff; `None` marks skipped unchanged lines between hunks."""
    a, b = old.splitlines(), new.splitlines()
    rows: list[DiffRow | None] = []
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for group_no, group in enumerate(matcher.get_grouped_opcodes(context)):
        if group_no:
            rows.append(None)
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                for k in range(i2 - i1):
                    rows.append(
                        DiffRow(
                            "equal", i1 + k + 1, escape(a[i1 + k]), j1 + k + 1, escape(b[j1 + k])
                        )
                    )
                continue
            span = max(i2 - i1, j2 - j1)
            for k in range(span):
                left = a[i1 + k] if i1 + k < i2 else None
                right = b[j1 + k] if j1 + k < j2 else None
                if left is not None and right is not None:
                    lhtml, rhtml = _word_diff(left, right)
                    rows.append(DiffRow("replace", i1 + k + 1, lhtml, j1 + k + 1, rhtml))
                elif left is not None:
                    rows.append(DiffRow("delete", i1 + k + 1, escape(left), None, mark_safe("")))
                else:
                    rows.append(DiffRow("insert", None, mark_safe(""), j1 + k + 1, escape(right)))
    return rows


def diff_stats(rows: list[DiffRow | None]) -> dict:
    changed = [r for r in rows if r is not None and r.kind != "equal"]
    return {
        "added": sum(1 for r in changed if r.right_no is not None),
        "removed": sum(1 for r in changed if r.left_no is not None),
        "identical": not changed,
    }


PTXAS_KEYS = ("registers", "spills", "shared_bytes")


def _finding_lines(findings: list) -> str:
    lines = []
    for f in findings:
        if isinstance(f, dict):
            where = f" (line {f['line']})" if f.get("line") else ""
            lines.append(
                f"[{f.get('rule', '?')}] {f.get('message') or f.get('reason') or ''}{where}"
            )
        else:
            lines.append(str(f))
    return "\n".join(lines)


def evidence_panels(evidence: dict | None) -> list[dict]:
    """A gate's evidence as collapsible panels: findings, warnings, logs, each IR kind, ptxas,
    the rest. Findings failed the gate; warnings did not, and their panel says so."""
    evidence = dict(evidence or {})
    panels = []
    findings = evidence.pop("findings", None)
    if findings:
        panels.append(
            {
                "title": f"Static findings ({len(findings)})",
                "text": _finding_lines(findings),
                "open": True,
            }
        )
    warnings = evidence.pop("warnings", None)
    if warnings:
        panels.append(
            {
                "title": f"Static warnings ({len(warnings)}): not failures, the runtime checks "
                "decide",
                "text": _finding_lines(warnings),
                "open": True,
            }
        )
    for key, title in (
        ("log", "Compile log"),
        ("traceback", "Traceback"),
        ("ptxas_log", "ptxas report"),
    ):
        if evidence.get(key):
            panels.append({"title": title, "text": str(evidence.pop(key)), "open": key != "log"})
    artifacts = [dict(a) for a in evidence.pop("artifacts", None) or [] if isinstance(a, dict)]
    # Several specialisations of one kernel: each label says which (constexprs, options, dtypes).
    for artifact, name in zip(artifacts, specialisation_labels(artifacts), strict=True):
        where = ""
        if evidence.get("mode") == "aot":
            # Off a GPU (interpret), Triton compiles for a named target only to keep IR and
            # register use: nothing of it ran.
            where = f" · compiled ahead of time for {gpu_target(artifact.get('target'))}, not run"
        for kind, text in (artifact.pop("ir", None) or {}).items():
            stage = IR_STAGES.get(kind, kind)
            panels.append({"title": f"{stage} · {name}{where}", "text": str(text), "open": False})
        artifact.pop("cubin_b64", None)
        ptxas = {k: v for k, v in artifact.items() if k.startswith("ptxas") or k in PTXAS_KEYS}
        if ptxas:
            log = ptxas.pop("ptxas_log", "")
            head = "\n".join(f"{k}: {v}" for k, v in ptxas.items())
            panels.append(
                {
                    "title": f"ptxas · {name}{where}",
                    "text": f"{head}\n\n{log}".strip(),
                    "open": False,
                }
            )
        evidence.setdefault("kernels", []).append(
            {k: v for k, v in artifact.items() if k not in ptxas and k != "ptxas_log"}
        )
    for key in list(evidence):
        if key.startswith("ptxas") and not isinstance(evidence[key], dict | list):
            panels.append(
                {"title": key.replace("_", " "), "text": str(evidence.pop(key)), "open": False}
            )
    if evidence:
        panels.append(
            {
                "title": "Details",
                "text": json.dumps(evidence, indent=2, default=str)[:200_000],
                "open": False,
            }
        )  # noqa: E501
    return panels
