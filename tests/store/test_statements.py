"""The PostgreSQL statements' SQL files (store/postgres/sql/) and their loader (statements.py)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path, PurePosixPath

import pytest

from backwave_django.store._schema import VOCABULARY
from backwave_django.store.postgres import statements
from backwave_django.store.postgres.statements import StatementError, parse, statement

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "backwave_django"
SQL = PACKAGE / "store" / "postgres" / "sql"

pytestmark = pytest.mark.fast_path


def _all() -> dict[str, str]:
    return {name: sql for named in statements.FILES.values() for name, sql in named.items()}


def test_every_sql_file_loads_with_its_statements_named_and_filled_in() -> None:
    files = sorted(p.stem for p in SQL.glob("*.sql"))
    assert sorted(statements.FILES) == files
    for stem, named in statements.FILES.items():
        assert named, f"sql/{stem}.sql names no statement"
        for name, sql in named.items():
            assert sql, name
            assert sql.strip() == sql, name
            assert not re.search(r"\{\w+\}", sql), f"{name} keeps a name in braces: {sql}"
            assert not sql.startswith("--"), f"{name}: its description was sent as SQL"
            assert statement(name) == sql


def test_a_statement_named_in_braces_is_included_whole() -> None:
    assert "{FLOW_LANES}" in (SQL / "flow.sql").read_text()
    assert f"({statement('FLOW_LANES')})" in statement("FLOW_LOCK")
    assert statements.included({"A": "SELECT 1", "B": "SELECT * FROM ({A}) AS a, {jobs}"}) == {
        "A": "SELECT 1",
        "B": "SELECT * FROM (SELECT 1) AS a, {jobs}",
    }


def test_the_vocabulary_is_filled_in_from_the_models_and_states() -> None:
    assert VOCABULARY["jobs"] in statement("CLAIM")
    assert f"state = {VOCABULARY['LEASED']}" in statement("CLAIM")
    assert "{jobs}" in (SQL / "claims.sql").read_text()


def test_names_are_unique_across_the_files() -> None:
    names = [name for named in statements.FILES.values() for name in named]
    assert len(names) == len(set(names))
    declared = [
        line.split(":", 1)[1].strip()
        for path in SQL.glob("*.sql")
        for line in path.read_text().splitlines()
        if line.startswith("-- name:")
    ]
    assert sorted(declared) == sorted(names)


def test_a_name_given_twice_or_sql_before_the_first_name_is_refused() -> None:
    with pytest.raises(StatementError, match="named twice"):
        parse("-- name: A\nSELECT 1\n-- name: A\nSELECT 2\n", "twice.sql")
    with pytest.raises(StatementError, match="before the first"):
        parse("SELECT 1\n-- name: A\nSELECT 2\n", "loose.sql")
    with pytest.raises(StatementError, match="empty"):
        parse("-- name: A\n-- only a description\n", "empty.sql")
    with pytest.raises(StatementError, match="no PostgreSQL statement"):
        statement("NO_SUCH_STATEMENT")


def test_the_description_is_left_out_and_comments_inside_a_statement_stay() -> None:
    parsed = parse(
        "-- a file comment\n\n-- name: A\n-- what A does\nSELECT 1\n-- inside\nFROM {jobs}\n", "a.sql"
    )
    assert parsed == {"A": f"SELECT 1\n-- inside\nFROM {VOCABULARY['jobs']}"}


def test_every_statement_is_used_by_the_package() -> None:
    """Asked for by a module, or included whole in a statement that is (``{NAME}`` in its text)."""
    sources = "\n".join(path.read_text() for path in (PACKAGE / "store").rglob("*.py"))
    included = "\n".join(path.read_text() for path in SQL.glob("*.sql"))
    unused = [
        name
        for name in _all()
        if f'"{name}"' not in sources and f"'{name}'" not in sources and f"{{{name}}}" not in included
    ]
    assert not unused, f"statements no module asks for: {unused}"


def test_the_sql_files_ship_in_the_wheel() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    globs = config["tool"]["setuptools"]["package-data"]["backwave_django"]
    for path in SQL.glob("*.sql"):
        relative = PurePosixPath(path.relative_to(PACKAGE).as_posix())
        assert any(relative.match(glob) for glob in globs), f"{relative} is not in package-data"
