"""Deterministic database-side faults for the store's transactions, and whole-database snapshots.

A *failpoint* is a temporary trigger (created by the test, dropped after) that raises inside the
database on a chosen row of a chosen table, so an operation fails part-way through: after some of
its statements (or some rows of one statement) already ran. The store itself is not touched, so
the PostgreSQL fast paths (data-modifying CTEs) and the ORM paths (SQLite, MariaDB) are both
exercised exactly as they run in production. The ``when`` conditions are plain SQL that all three
databases accept.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.apps import apps
from django.db import connection

#: Every failpoint's error message starts with this, so a test can tell it fired.
FAILPOINT_MESSAGE = "backwave failpoint"

_names = itertools.count()


def backwave_tables() -> dict[str, Any]:
    """Every model of the app, by table name."""
    return {model._meta.db_table: model for model in apps.get_app_config("backwave_django").get_models()}


def snapshot() -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every backwave table (all columns, in primary-key order)."""
    rows: dict[str, list[tuple[Any, ...]]] = {}
    for table, model in backwave_tables().items():
        columns = [field.attname for field in model._meta.concrete_fields]
        rows[table] = list(model.objects.order_by("pk").values_list(*columns))
    return rows


def row_counts() -> dict[str, int]:
    return {table: model.objects.count() for table, model in backwave_tables().items()}


@contextmanager
def failpoint(model: Any, event: str = "INSERT", *, when: str = "TRUE", nth: int = 1) -> Iterator[None]:
    """Raise inside the database on the ``nth`` row of ``event`` on ``model``'s table matching ``when``.

    ``when`` is an SQL condition over ``NEW`` (``OLD`` for DELETE) that PostgreSQL, SQLite and
    MariaDB accept, e.g. ``"NEW.job_id = 7"``. The trigger fires BEFORE the row is written, so earlier
    rows of the same statement and every earlier statement of the transaction have already run.
    """
    table = model._meta.db_table
    name = f"bw_failpoint_{next(_names)}"
    if connection.vendor == "postgresql":
        setup = [
            f"CREATE SEQUENCE {name}_hits",
            f"""CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN
                    IF nextval('{name}_hits') >= {int(nth)} THEN
                        RAISE EXCEPTION '{FAILPOINT_MESSAGE} on {event} {table}';
                    END IF;
                    IF TG_OP = 'DELETE' THEN
                        RETURN OLD;
                    END IF;
                    RETURN NEW;
                END $$""",
            f"CREATE TRIGGER {name} BEFORE {event} ON {table} FOR EACH ROW WHEN ({when}) "
            f"EXECUTE FUNCTION {name}()",
        ]
        teardown = [
            f"DROP TRIGGER IF EXISTS {name} ON {table}",
            f"DROP FUNCTION IF EXISTS {name}()",
            f"DROP SEQUENCE IF EXISTS {name}_hits",
        ]
    elif connection.vendor == "sqlite":
        # The counter lives in a table: its updates roll back with the aborted statement, which
        # keeps "the nth row" meaning the nth row of each try.
        setup = [
            f"CREATE TABLE {name}_hits (n INTEGER NOT NULL)",
            f"INSERT INTO {name}_hits (n) VALUES (0)",
            f"""CREATE TRIGGER {name} BEFORE {event} ON {table} FOR EACH ROW WHEN ({when})
                BEGIN
                    UPDATE {name}_hits SET n = n + 1;
                    SELECT RAISE(ABORT, '{FAILPOINT_MESSAGE} on {event} {table}')
                    WHERE (SELECT n FROM {name}_hits) >= {int(nth)};
                END""",
        ]
        teardown = [f"DROP TRIGGER IF EXISTS {name}", f"DROP TABLE IF EXISTS {name}_hits"]
    elif connection.vendor == "mysql":
        # A session variable counts (the trigger runs in the session of the statement it guards).
        setup = [
            f"SET @{name} = 0",
            f"""CREATE TRIGGER {name} BEFORE {event} ON {table} FOR EACH ROW
                BEGIN
                    IF ({when}) THEN
                        SET @{name} = @{name} + 1;
                        IF @{name} >= {int(nth)} THEN
                            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '{FAILPOINT_MESSAGE} on {event} {table}';
                        END IF;
                    END IF;
                END""",
        ]
        teardown = [f"DROP TRIGGER IF EXISTS {name}"]
    else:
        pytest.skip(f"failpoints are written for PostgreSQL, SQLite and MariaDB, not {connection.vendor}")
    with connection.cursor() as cursor:
        for statement in setup:
            cursor.execute(statement)
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            for statement in teardown:
                cursor.execute(statement)
