"""Which way imports go (issue 13), checked in ``make test``:

- the compute core (``workers/``) never imports Django, the portal's apps or the site;
- no production code (``apps/``, ``kernelevolve_site/``, ``workers/``) imports ``tests``;
- no import cycle between files, counting imports inside functions (they only hide a cycle):
  the cycles that exist today are listed in ``KNOWN`` below and may only shrink; a new one,
  or a known one that grows, fails with the path that closes it;
- between apps, ``campaigns`` is the base: it imports neither ``knowledge`` nor ``registry``
  (which import it): they hand it what it needs through ``apps.campaigns.hooks``.

    python scripts/check_imports.py          # exit 1 and the reasons when a rule is broken
    python scripts/check_imports.py --list   # every cycle as it stands
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("apps", "kernelevolve_site", "workers")

# Cycles (strongly connected groups of modules) still to break: each may lose members, none may
# gain one, and no new group may appear. Empty since the contract module (queue and task names)
# and services.alarms broke the last three.
KNOWN: list[set[str]] = []

# Between apps, dependencies go one way: ``campaigns`` at the base (issue 13); what the apps
# above hand it goes through ``apps.campaigns.hooks``, and commands that span every app live in
# the site (``kernelevolve_site.management``). Exceptions would be listed here (none).
KNOWN_UPWARD: set[tuple[str, str]] = set()
# The apps above ``campaigns``: they may import it, it may not import them.
UPPER_APPS = ("apps.knowledge", "apps.registry")


def modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            rel = path.relative_to(ROOT).with_suffix("")
            parts = list(rel.parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The module of ours that ``import name`` loads (longest known prefix)."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in known:
            return candidate
        parts.pop()
    return None


def imports(module: str, path: Path, known: dict[str, Path]) -> list[tuple[str, int]]:
    """(imported name, line) for every import in the file, at any depth."""
    tree = ast.parse(path.read_text(), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            found.append((base, node.lineno))
            for alias in node.names:  # `from pkg import module`
                full = f"{base}.{alias.name}" if base else alias.name
                if full in known:
                    found.append((full, node.lineno))
    return found


def graph() -> tuple[dict[str, set[str]], list[str]]:
    known = modules()
    edges: dict[str, set[str]] = {m: set() for m in known}
    problems = []
    for module, path in known.items():
        for name, line in imports(module, path, known):
            top = name.split(".")[0]
            where = f"{path.relative_to(ROOT)}:{line}"
            if top == "tests":
                problems.append(f"{where}: production code imports {name}")
            if module.startswith("workers") and top in ("django", "rest_framework", "channels"):
                problems.append(f"{where}: the compute core imports {name}")
            if module.startswith("workers") and top in ("apps", "kernelevolve_site"):
                problems.append(f"{where}: the compute core imports the portal ({name})")
            upper = next((a for a in UPPER_APPS if name == a or name.startswith(a + ".")), None)
            if module.startswith("apps.campaigns") and upper:
                if (module, upper) not in KNOWN_UPWARD:
                    problems.append(f"{where}: apps.campaigns imports {name} (an app above it)")
            target = _resolve(name, known)
            # A module's own packages are imported before it in any case: not an edge.
            if target and target != module and not module.startswith(target + "."):
                edges[module].add(target)
    return edges, problems


def cycles(edges: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected groups of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[set[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = set()
                while True:
                    top = stack.pop()
                    on.discard(top)
                    group.add(top)
                    if top == node:
                        break
                if len(group) > 1:
                    out.append(group)
    return out


def _path(edges: dict[str, set[str]], group: set[str]) -> str:
    """One cycle through the group, for the message."""
    start = min(group)
    seen, trail = {start}, [start]
    node = start
    while True:
        nxt = sorted(n for n in edges[node] if n in group)
        back = [n for n in nxt if n == start]
        if back and len(trail) > 1:
            return " -> ".join(trail + [start])
        fresh = [n for n in nxt if n not in seen]
        if not fresh:
            return " -> ".join(trail + [nxt[0]]) if nxt else start
        node = fresh[0]
        seen.add(node)
        trail.append(node)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--list", action="store_true", help="print every cycle and exit 0")
    args = ap.parse_args(argv)
    edges, problems = graph()
    groups = cycles(edges)
    if args.list:
        for group in groups:
            print(f"{len(group)} modules: {_path(edges, group)}")
            print("   ", ", ".join(sorted(group)))
        return 0
    for group in groups:
        if not any(group <= known for known in KNOWN):
            problems.append(f"import cycle: {_path(edges, group)} ({len(group)} modules)")
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        return 1
    print(f"imports: {len(edges)} modules, {len(groups)} known cycles, no new one")
    return 0


if __name__ == "__main__":
    sys.exit(main())
