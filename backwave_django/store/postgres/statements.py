"""The PostgreSQL statements, read once from the SQL files beside this module (``sql/*.sql``).

Each file holds the statements of one concern. A statement starts at a ``-- name: CLAIM`` line;
the comment lines right after it say what it does (they are for the reader and are not sent), and
the text up to the next ``-- name:`` line is the statement. ``{jobs}``, ``{LEASED}`` and the other
names of ``store._schema.VOCABULARY`` are filled in here, from the models' tables and the state
numbers. A statement may include another whole statement by its name in braces (``({FLOW_LANES})``
as a subquery), filled in after every file is read; any other brace is left as it is.

``statement("CLAIM")`` is a dictionary look-up: modules take their statements into module-level
constants at import, so the hot paths never read a file or format a string.
"""

from __future__ import annotations

import re
from importlib import resources

from .._schema import VOCABULARY

#: The line that starts a statement.
_NAME = re.compile(r"^--\s*name:\s*([A-Z][A-Z0-9_]*)\s*$")
#: A name of the vocabulary in braces.
_WORD = re.compile(r"\{(\w+)\}")


class StatementError(LookupError):
    """A statement that is not in the SQL files, or SQL files that do not parse."""


def parse(text: str, source: str) -> dict[str, str]:
    """The named statements of one SQL file's ``text`` (``source`` names it in errors)."""
    found: dict[str, str] = {}
    name: str | None = None
    body: list[str] = []
    described = False

    def close() -> None:
        if name is not None:
            sql = "\n".join(body).strip()
            if not sql:
                raise StatementError(f"{source}: statement {name} is empty")
            found[name] = _WORD.sub(lambda m: VOCABULARY.get(m.group(1), m.group(0)), sql)

    for line in text.splitlines():
        match = _NAME.match(line)
        if match:
            close()
            name, body, described = match.group(1), [], False
            if name in found:
                raise StatementError(f"{source}: statement {name} is named twice")
            continue
        if name is None:
            if line.strip() and not line.startswith("--"):
                raise StatementError(f"{source}: SQL before the first '-- name:' line")
            continue
        if not body and not described and line.startswith("--"):
            continue  # the description
        described = True
        body.append(line)
    close()
    return found


def load() -> dict[str, dict[str, str]]:
    """Every SQL file of the package: ``{file stem: {name: statement}}``; a name is unique across files."""
    files: dict[str, dict[str, str]] = {}
    seen: dict[str, str] = {}
    for entry in sorted(resources.files(__package__).joinpath("sql").iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".sql"):
            continue
        statements = parse(entry.read_text(encoding="utf-8"), f"sql/{entry.name}")
        for name in statements:
            if name in seen:
                raise StatementError(f"statement {name} is in sql/{seen[name]} and sql/{entry.name}")
            seen[name] = entry.name
        files[entry.name.removesuffix(".sql")] = statements
    return files


def included(statements: dict[str, str]) -> dict[str, str]:
    """``statements`` with each ``{NAME}`` of another statement's name replaced by its SQL (one
    level: what an included statement itself includes is not filled in)."""

    def fill(name: str, sql: str) -> str:
        def one(match: re.Match[str]) -> str:
            word = match.group(1)
            return statements[word] if word in statements and word != name else match.group(0)

        return _WORD.sub(one, sql)

    return {name: fill(name, sql) for name, sql in statements.items()}


_READ = load()
_ALL = included({name: sql for statements in _READ.values() for name, sql in statements.items()})
#: The statements of each SQL file, read once, with the statements they include filled in.
FILES = {stem: {name: _ALL[name] for name in named} for stem, named in _READ.items()}


def statement(name: str) -> str:
    """The SQL of the statement called ``name``."""
    try:
        return _ALL[name]
    except KeyError:
        raise StatementError(f"no PostgreSQL statement is called {name}") from None
