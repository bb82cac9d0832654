"""Connection poolers in front of PostgreSQL (PgBouncer and the like): telling them apart, and what
breaks behind one in transaction mode.

A pooler that shares server connections between clients cannot hand a client the server
process's own cancel key, so it announces a made-up process id at login. PostgreSQL's
``pg_backend_pid()`` names the real one: when the two differ, something multiplexes the
connection. A plain TCP proxy passes the key through and is not mistaken for a pooler.

Behind transaction pooling a client keeps its server connection only until its transaction
ends, so whatever a session carries beyond one transaction is lost or leaks into another client's
session: ``LISTEN`` (notifications arrive on a connection the client no longer holds), named
prepared statements, cursors ``WITH HOLD`` and ``SET ROLE``. See docs/operations.md, "PgBouncer".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db import Error
from django.db.backends.base.base import BaseDatabaseWrapper

from .store import on_raw_connection

#: The server process this statement runs in.
SERVER_PROCESS = "SELECT pg_backend_pid()"


def announces_other_process(raw_connection: Any) -> bool:
    """Whether a psycopg connection's login named a process other than the one serving it: a
    pooler sits between the client and PostgreSQL."""
    with raw_connection.cursor() as cursor:
        cursor.execute(SERVER_PROCESS)
        (server_pid,) = cursor.fetchone()
    return bool(raw_connection.info.backend_pid != server_pid)


def behind_pooler(connection: BaseDatabaseWrapper) -> bool | None:
    """Whether this Django connection reaches PostgreSQL through a pooler; ``None`` when it cannot
    tell (another database, or no connection right now)."""
    if connection.vendor != "postgresql":
        return None
    try:
        return on_raw_connection(connection, announces_other_process)
    except Error:
        return None


def session_state_options(settings_dict: Mapping[str, Any]) -> list[str]:
    """The settings of a PostgreSQL alias that keep state in the server session beyond one
    transaction, each as a sentence naming the setting, what it does, and the fix."""
    options: Mapping[str, Any] = settings_dict.get("OPTIONS") or {}
    problems = []
    if options.get("prepare_threshold") is not None:
        problems.append(
            f'"prepare_threshold": {options["prepare_threshold"]!r} makes psycopg create named '
            "prepared statements, which live in one server session: another client's transaction "
            "then fails with 'prepared statement \"_pg3_0\" already exists' or 'does not exist'. "
            'Remove it from OPTIONS (Django\'s default, None, never prepares).'
        )
    if not settings_dict.get("DISABLE_SERVER_SIDE_CURSORS"):
        problems.append(
            "server-side cursors are on: QuerySet.iterator() outside a transaction declares a "
            'cursor WITH HOLD, which outlives it. Set "DISABLE_SERVER_SIDE_CURSORS": True.'
        )
    if options.get("assume_role"):
        problems.append(
            f'"assume_role" runs SET ROLE {options["assume_role"]!r} once per connection, in '
            "whichever server session served it. Log in as that role instead."
        )
    return problems
