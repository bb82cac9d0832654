#!/usr/bin/env python
"""Check the package's layout: no import cycles among backwave_django's modules, none too long.

    python scripts/check_layout.py

Every ``import`` / ``from … import`` of a backwave_django module counts, wherever it is written
(a function-level import is still a dependency), except those under ``if TYPE_CHECKING:``, which
never run. A cycle is printed as the chain of modules that closes it. A module over
``MAX_LINES`` lines is listed too: a room that big should be split (see docs/architecture.md).
Exits 0 when the layout is clean, 1 otherwise. Needs nothing but the standard library.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "backwave_django"
MAX_LINES = 600
#: Generated code, not written by hand.
SKIPPED = ("migrations",)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _under_type_checking(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.If):
            test = node.test
            name = test.id if isinstance(test, ast.Name) else test.attr if isinstance(test, ast.Attribute) else ""
            if name == "TYPE_CHECKING":
                return True
    return False


def imports_of(path: Path, modules: set[str]) -> set[str]:
    """The package modules ``path`` imports (resolving relative imports and ``from . import x``)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(), filename=str(path))
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found: set[str] = set()
    for node in ast.walk(tree):
        if _under_type_checking(node, parents):
            continue
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                stem = ".".join([*base, node.module] if node.module else base)
            else:
                stem = node.module or ""
            # ``from pkg import name``: name may be a submodule; otherwise the dependency is pkg.
            targets = [f"{stem}.{alias.name}" if f"{stem}.{alias.name}" in modules else stem for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected component with more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(_a_cycle_through(sorted(component), graph))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _a_cycle_through(component: list[str], graph: dict[str, set[str]]) -> list[str]:
    """A shortest path from the component's first module back to itself, inside the component."""
    start = component[0]
    members = set(component)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for target in sorted(graph[node] & members):
                if target == start:
                    return [*paths[node], start]
                if target not in paths:
                    paths[target] = [*paths[node], target]
                    following.append(target)
        frontier = following
    return component


def main() -> int:
    sys.setrecursionlimit(10_000)
    files = [
        path
        for path in sorted((ROOT / PACKAGE).rglob("*.py"))
        if not any(part in SKIPPED for part in path.relative_to(ROOT).parts)
    ]
    modules = {module_name(path) for path in files}
    graph = {module_name(path): imports_of(path, modules) for path in files}
    problems = 0
    for cycle in cycles(graph):
        problems += 1
        print("import cycle: " + " -> ".join(cycle))
    for path in files:
        lines = len(path.read_text().splitlines())
        if lines > MAX_LINES:
            problems += 1
            print(f"too long: {path.relative_to(ROOT)} has {lines} lines (at most {MAX_LINES})")
    edges = sum(len(targets) for targets in graph.values())
    if problems:
        print(f"{problems} layout problem(s) in {len(files)} modules")
        return 1
    print(f"Layout clean: {len(files)} modules, {edges} imports between them, no cycles, none over {MAX_LINES} lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
