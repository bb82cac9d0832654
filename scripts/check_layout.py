#!/usr/bin/env python
"""Check the package's layout: the rules that hold its rooms (docs/architecture.md, "The rules").

    python scripts/check_layout.py

It reads every module of backwave_django (migrations aside, being generated) and reports, each as
``path:line: what is wrong``:

- **cycles**: an import cycle among the package's modules, printed as the chain that closes it.
  Every ``import`` / ``from … import`` of a package module counts, wherever it is written (a
  function-level import is still a dependency), except those under ``if TYPE_CHECKING:``;
- **private modules**: a module whose name starts with ``_`` is private to its package, and the
  modules of a sealed room (:data:`SEALED_ROOMS`) are private to it: outside, import the room
  itself (its ``__init__`` is its interface);
- **room dependencies**: a room in :data:`ALLOWED_DEPENDENCIES` imports only the rooms listed
  for it, and a room in :data:`FORBIDDEN_DEPENDENCIES` never the rooms listed for it;
- **Django's connection internals**: the raw connection, its transaction flags, cursor factories
  and the driver's cursors are touched in :data:`CONNECTION_MODULE` only;
- **the clock**: the current instant is read as ``clock.now()``, never ``timezone.now()``,
  ``datetime.now()`` and the like (:data:`CLOCK_MODULE` aside); the rooms in
  :data:`CLOCKLESS_ROOMS` read no clock at all (they take ``now``); ``time.time()`` (float
  seconds) is read only in :data:`WALL_SECONDS_ROOMS`, for measurements that are never stored;
- **size**: no module over :data:`MAX_LINES` lines, no function over :data:`MAX_FUNCTION_LINES`.

Exits 0 when the layout is clean, 1 otherwise. Needs nothing but the standard library; the
checks are plain functions of a module's name and source, so tests feed them small sources.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "backwave_django"
MAX_LINES = 600
MAX_FUNCTION_LINES = 80
#: Generated code, not written by hand.
SKIPPED = ("migrations",)

#: The one module that touches Django's connection internals and creates the driver's cursors.
CONNECTION_MODULE = "backwave_django.store.postgres.connection"
#: Attributes of a Django connection (or of the driver's connection under it) that are internals.
CONNECTION_INTERNALS = frozenset(
    {
        "pgconn",
        "set_autocommit",
        "get_autocommit",
        "needs_rollback",
        "in_atomic_block",
        "_cursor",
        "execute_wrappers",
        "queries_logged",
        "make_cursor",
        "make_debug_cursor",
    }
)
#: Attributes that are internals only on a connection (elsewhere the names are common words).
CONNECTION_ONLY_INTERNALS = frozenset({"pipeline", "connection"})
#: The names a connection goes by: ``connection``, ``connections[alias]``, the driver's ``raw``.
CONNECTION_NAMES = frozenset({"connection", "connections", "raw", "raw_connection", "conn"})
#: The driver's cursor classes: creating one by hand skips Django's cursor wrapper.
RAW_CURSORS = frozenset({"Cursor", "ClientCursor", "ServerCursor", "RawCursor", "AsyncCursor"})
#: ``django.db.transaction``'s public functions share names with the connection's internals.
PUBLIC_TRANSACTION_MODULE = "transaction"

#: The module that reads the current instant for everyone else (``clock.now``).
CLOCK_MODULE = "backwave_django.clock"
#: Rooms that never read a clock: each of their operations takes ``now``.
CLOCKLESS_ROOMS = ("backwave_django.core", "backwave_django.store", "backwave_django.monitor")
#: Modules of a clockless room allowed one named clock read, and why.
CLOCK_EXCEPTIONS = {"backwave_django.core.ids": "uuid7 orders new ids by the time (time.time_ns)"}
#: Rooms that may read ``time.time()``: float seconds for metrics and health, never stored.
WALL_SECONDS_ROOMS = ("backwave_django.worker", "backwave_django.metrics")
#: ``module.attribute`` reads of the current instant other than through ``clock.now``.
INSTANT_READS = frozenset(
    {
        ("timezone", "now"),
        ("timezone", "localdate"),
        ("datetime", "now"),
        ("datetime", "utcnow"),
        ("datetime", "today"),
        ("date", "today"),
    }
)
#: Every reading of a clock in the ``time`` module.
TIME_READS = frozenset(
    {"time", "time_ns", "monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns", "localtime", "gmtime"}
)

#: Rooms whose modules are private to them: from outside, import the room's package only.
SEALED_ROOMS = ("backwave_django.store",)
#: The rooms these rooms may import, besides their own (any other import is a problem).
ALLOWED_DEPENDENCIES = {
    "backwave_django.core": (),
    "backwave_django.store": (
        "backwave_django.conf",
        "backwave_django.core",
        "backwave_django.database",
        "backwave_django.exceptions",
        "backwave_django.models",
    ),
    "backwave_django.monitor": (
        "backwave_django.conf",
        "backwave_django.core",
        "backwave_django.database",
        "backwave_django.models",
        "backwave_django.registry",
    ),
}
#: The rooms these rooms never import: the admin and the CLI act through ``operator`` and read
#: through ``monitor``.
FORBIDDEN_DEPENDENCIES = {
    "backwave_django.admin": ("backwave_django.store",),
    "backwave_django.cli": ("backwave_django.store",),
}


@dataclass(frozen=True)
class Problem:
    """One broken rule, at a line of a file."""

    path: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


@dataclass(frozen=True)
class Import:
    """A dependency of a module on a package module, at a line; ``typing`` when type-only."""

    target: str
    line: int
    typing: bool = False


@dataclass
class Module:
    """A parsed module: its dotted name, its path as printed, its source and syntax tree."""

    name: str
    path: str
    source: str
    is_package: bool = False
    tree: ast.Module = field(init=False)

    def __post_init__(self) -> None:
        self.tree = ast.parse(self.source, filename=self.path)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def inside(name: str, room: str) -> bool:
    """Whether module ``name`` is the package ``room`` or one of its modules."""
    return name == room or name.startswith(room + ".")


def _under_type_checking(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.If):
            test = node.test
            name = (
                test.id
                if isinstance(test, ast.Name)
                else test.attr
                if isinstance(test, ast.Attribute)
                else ""
            )
            if name == "TYPE_CHECKING":
                return True
    return False


def _targets(module: Module, node: ast.Import | ast.ImportFrom, modules: set[str]) -> list[str]:
    """The dotted names an import statement reaches (relative imports resolved)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    package = module.name if module.is_package else module.name.rpartition(".")[0]
    if node.level:
        base = package.split(".")
        base = base[: len(base) - (node.level - 1)]
        stem = ".".join([*base, node.module] if node.module else base)
    else:
        stem = node.module or ""
    # ``from pkg import name``: name may be a submodule; otherwise the dependency is pkg.
    return [f"{stem}.{alias.name}" if f"{stem}.{alias.name}" in modules else stem for alias in node.names]


def module_imports(module: Module, modules: set[str]) -> list[Import]:
    """The package modules ``module`` imports, each with its line and whether it is type-only."""
    parents = {child: node for node in ast.walk(module.tree) for child in ast.iter_child_nodes(node)}
    found: list[Import] = []
    for node in ast.walk(module.tree):
        if not isinstance(node, ast.Import | ast.ImportFrom):
            continue
        typing = _under_type_checking(node, parents)
        for target in _targets(module, node, modules):
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != module.name:
                found.append(Import(target, node.lineno, typing))
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


# --- Private modules and room dependencies -----------------------------------------------------


def private_owner(target: str) -> str | None:
    """The package a module is private to: the parent of its first ``_name`` part, or its sealed
    room; None when it is public."""
    parts = target.split(".")
    for position, part in enumerate(parts):
        if part.startswith("_") and not part.startswith("__"):
            return ".".join(parts[:position])
    for room in SEALED_ROOMS:
        if target.startswith(room + "."):
            return room
    return None


def private_import_problems(module: Module, imports: Iterable[Import]) -> list[Problem]:
    """Imports of a module private to a package the importer is not in."""
    problems = []
    for found in imports:
        owner = private_owner(found.target)
        if owner is not None and not inside(module.name, owner):
            problems.append(
                Problem(
                    module.path,
                    found.line,
                    f"imports {found.target}, private to {owner}: use what {owner} exports "
                    "(or move the shared piece to a public module)",
                )
            )
    return problems


def _room_of(name: str, rooms: Iterable[str]) -> str | None:
    return next((room for room in rooms if inside(name, room)), None)


def dependency_problems(module: Module, imports: Iterable[Import]) -> list[Problem]:
    """Imports a room's dependency rule does not allow (type-only imports count too)."""
    allowed_room = _room_of(module.name, ALLOWED_DEPENDENCIES)
    forbidden_room = _room_of(module.name, FORBIDDEN_DEPENDENCIES)
    problems = []
    for found in imports:
        if allowed_room is not None and not inside(found.target, allowed_room):
            allowed = ALLOWED_DEPENDENCIES[allowed_room]
            if not any(inside(found.target, room) for room in allowed):
                listed = ", ".join(room.rpartition(".")[2] for room in allowed) or "nothing outside it"
                problems.append(
                    Problem(
                        module.path,
                        found.line,
                        f"imports {found.target}: {allowed_room} may import only {listed}",
                    )
                )
        if forbidden_room is not None:
            for room in FORBIDDEN_DEPENDENCIES[forbidden_room]:
                if inside(found.target, room):
                    problems.append(
                        Problem(
                            module.path,
                            found.line,
                            f"imports {found.target}: {forbidden_room} never imports {room}",
                        )
                    )
    return problems


# --- Django's connection internals --------------------------------------------------------------


def _on_a_connection(node: ast.Attribute) -> bool:
    """Whether ``node`` is an attribute of a connection (``connection.x``, ``connections[alias].x``,
    ``something.connection.x``, ``raw.x``)."""
    value = node.value
    if isinstance(value, ast.Subscript):
        value = value.value
    name = value.id if isinstance(value, ast.Name) else value.attr if isinstance(value, ast.Attribute) else ""
    return name in CONNECTION_NAMES


def connection_internals(module: Module) -> list[Problem]:
    """Touches of Django's connection internals outside :data:`CONNECTION_MODULE`."""
    if module.name == CONNECTION_MODULE:
        return []
    where = CONNECTION_MODULE
    problems = []
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Attribute):
            owner = node.value.id if isinstance(node.value, ast.Name) else ""
            if node.attr in CONNECTION_INTERNALS and owner != PUBLIC_TRANSACTION_MODULE:
                what = f"touches the connection's {node.attr}"
            elif node.attr in CONNECTION_ONLY_INTERNALS and _on_a_connection(node):
                what = (
                    "takes the driver's connection from Django's (.connection)"
                    if node.attr == "connection"
                    else f"opens the driver's {node.attr}"
                )
            elif node.attr in RAW_CURSORS and owner == "psycopg":
                what = f"creates a raw psycopg.{node.attr}"
            else:
                continue
        elif isinstance(node, ast.ImportFrom) and node.module == "psycopg":
            names = {alias.name for alias in node.names} & RAW_CURSORS
            if not names:
                continue
            what = f"imports psycopg's {', '.join(sorted(names))}"
        else:
            continue
        problems.append(
            Problem(module.path, node.lineno, f"{what}: Django's connection internals belong in {where}")
        )
    return problems


# --- The clock -----------------------------------------------------------------------------------


def _attribute_chain(node: ast.Attribute) -> tuple[str, str]:
    """``(owner, attribute)`` of ``owner.attribute``, the owner being a name or a last attribute."""
    value = node.value
    owner = (
        value.id if isinstance(value, ast.Name) else value.attr if isinstance(value, ast.Attribute) else ""
    )
    return owner, node.attr


def _clock_reads(tree: ast.Module) -> Iterator[tuple[int, str, str]]:
    """Every read of a clock: ``(line, kind, text)``, kind ``instant``, ``time``, or ``clock``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            owner, attribute = _attribute_chain(node)
            if (owner, attribute) in INSTANT_READS:
                yield node.lineno, "instant", f"{owner}.{attribute}"
            elif owner == "time" and attribute in TIME_READS:
                yield node.lineno, "time", f"time.{attribute}"
            elif owner == "clock" and attribute == "now":
                yield node.lineno, "clock", "clock.now"
        elif isinstance(node, ast.ImportFrom):
            names = {alias.name for alias in node.names}
            if node.module in ("django.utils.timezone",) and names & {"now", "localdate"}:
                yield node.lineno, "instant", f"{node.module}.now"
            elif node.module == "time" and names & TIME_READS:
                yield node.lineno, "time", f"time.{sorted(names & TIME_READS)[0]}"


def clock_problems(module: Module) -> list[Problem]:
    """Reads of the clock the clock rule does not allow in ``module``."""
    if module.name == CLOCK_MODULE:
        return []
    clockless = any(inside(module.name, room) for room in CLOCKLESS_ROOMS)
    wall_seconds = any(inside(module.name, room) for room in WALL_SECONDS_ROOMS)
    excepted = module.name in CLOCK_EXCEPTIONS
    problems = []
    for line, kind, text in _clock_reads(module.tree):
        if kind == "instant":
            message = f"reads the clock as {text}: read the current instant as clock.now()"
        elif clockless and not excepted:
            room = next(room for room in CLOCKLESS_ROOMS if inside(module.name, room))
            message = f"reads the clock ({text}): {room} reads no clock; take `now` as an argument"
        elif text == "time.time" and not wall_seconds and not clockless:
            message = (
                "reads the wall clock as time.time(): read the current instant as clock.now() "
                "(time.time() is for worker/ and metrics/ measurements)"
            )
        else:
            continue
        problems.append(Problem(module.path, line, message))
    return problems


# --- Size ----------------------------------------------------------------------------------------


def size_problems(module: Module) -> list[Problem]:
    """The module itself over :data:`MAX_LINES` lines, and each function over :data:`MAX_FUNCTION_LINES`."""
    problems = []
    lines = len(module.source.splitlines())
    if lines > MAX_LINES:
        problems.append(Problem(module.path, 1, f"module has {lines} lines (at most {MAX_LINES}): split it"))
    for node in ast.walk(module.tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > MAX_FUNCTION_LINES:
                problems.append(
                    Problem(
                        module.path,
                        node.lineno,
                        f"function {node.name} has {length} lines (at most {MAX_FUNCTION_LINES}): "
                        "split it into named steps",
                    )
                )
    return problems


# --- The whole package ---------------------------------------------------------------------------


def load_package() -> list[Module]:
    paths = [
        path
        for path in sorted((ROOT / PACKAGE).rglob("*.py"))
        if not any(part in SKIPPED for part in path.relative_to(ROOT).parts)
    ]
    return [
        Module(module_name(path), str(path.relative_to(ROOT)), path.read_text(), path.name == "__init__.py")
        for path in paths
    ]


def check(modules: list[Module]) -> tuple[list[str], int]:
    """Every problem in ``modules``, printed form, and the number of imports between them."""
    names = {module.name for module in modules}
    imports = {module.name: module_imports(module, names) for module in modules}
    graph = {
        name: {found.target for found in found_imports if not found.typing}
        for name, found_imports in imports.items()
    }
    printed = ["import cycle: " + " -> ".join(cycle) for cycle in cycles(graph)]
    for module in modules:
        problems = [
            *private_import_problems(module, imports[module.name]),
            *dependency_problems(module, imports[module.name]),
            *connection_internals(module),
            *clock_problems(module),
            *size_problems(module),
        ]
        seen: set[int] = set()
        for problem in sorted(problems, key=lambda problem: problem.line):
            if problem.line not in seen:  # one problem a line: a private import may break two rules
                seen.add(problem.line)
                printed.append(str(problem))
    return printed, sum(len(targets) for targets in graph.values())


def main() -> int:
    sys.setrecursionlimit(10_000)
    modules = load_package()
    problems, edges = check(modules)
    for problem in problems:
        print(problem)
    if problems:
        print(
            f"{len(problems)} layout problem(s) in {len(modules)} modules (the rules: docs/architecture.md)"
        )
        return 1
    print(
        f"Layout clean: {len(modules)} modules, {edges} imports between them, no cycles, no private or "
        f"forbidden imports, connection internals and clock reads where they belong, no module over "
        f"{MAX_LINES} lines, no function over {MAX_FUNCTION_LINES}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
