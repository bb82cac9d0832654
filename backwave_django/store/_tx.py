"""Transactions and what rides on them: deadlock retries, wake-up hints, audit rows, queue locks,
and the cursors the PostgreSQL statements run on.

Every store operation is one transaction. :func:`atomic_retrying` runs it in
``transaction.atomic()`` (joining the caller's transaction when there is one) and runs it again
when the database picked it as a deadlock victim, so callers never see one.
"""

from __future__ import annotations

import itertools
import logging
import zlib
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any, TypeVar

from django.db import OperationalError, connections, transaction

from ..core.states import OperatorAction
from ..models import OperatorAudit

_T = TypeVar("_T")

logger = logging.getLogger("backwave_django.store")

#: How many times an operation chosen as a deadlock victim is run again before the error surfaces.
DEADLOCK_RETRIES = 5
_DEADLOCK_SQLSTATES = frozenset({"40P01", "40001"})  # deadlock_detected, serialization_failure
_MYSQL_DEADLOCK_CODES = frozenset({1213, 1205})  # ER_LOCK_DEADLOCK, ER_LOCK_WAIT_TIMEOUT

#: PostgreSQL channel that carries wake-up hints; the payload is the queue name.
HINT_CHANNEL = "backwave_hints"
#: PostgreSQL channel that carries cancel requests to the workers; the payload is the job id.
CANCEL_CHANNEL = "backwave_cancels"
#: Advisory-lock class id that namespaces the per-queue locks (the second key is the queue's CRC32).
QUEUE_LOCK_CLASS = 0x0BAC_3A7E & 0x7FFF_FFFF


# --- Transactions -----------------------------------------------------------------------------


def is_deadlock(error: OperationalError) -> bool:
    cause = error.__cause__
    if getattr(cause, "sqlstate", None) in _DEADLOCK_SQLSTATES:
        return True
    return bool(error.args) and error.args[0] in _MYSQL_DEADLOCK_CODES


def own_transaction(using: str) -> bool:
    """Whether a store call here would be a transaction of its own: the connection is in autocommit
    mode (Django's default) and not inside the caller's ``atomic()`` block."""
    connection = connections[using]
    return connection.get_autocommit() and not connection.in_atomic_block


def retrying(body: Callable[[], _T]) -> _T:
    """Run ``body`` (a transaction of its own) again if the database picked it as a deadlock victim."""
    for attempt in range(1, DEADLOCK_RETRIES + 1):
        try:
            return body()
        except OperationalError as error:
            if attempt == DEADLOCK_RETRIES or not is_deadlock(error):
                raise
            logger.info("Store operation was a deadlock victim; retrying (try %d).", attempt + 1)
    raise AssertionError("unreachable")


def atomic_retrying(using: str, body: Callable[[], _T]) -> _T:
    """Run ``body`` in ``transaction.atomic`` and run it again if the database picked it as a
    deadlock victim. The failed try is rolled back whole (to its savepoint inside a caller's
    transaction, where PostgreSQL also releases the locks it took), so a retry starts clean."""

    def attempt() -> _T:
        with transaction.atomic(using=using):
            return body()

    return retrying(attempt)


# --- What rides on a transaction ----------------------------------------------------------------


def notify(using: str, queue: str, *, channel: str = HINT_CHANNEL) -> None:
    """Send a wake-up hint naming ``queue`` (or, on ``CANCEL_CHANNEL``, a job id): PostgreSQL only;
    inside a transaction it is delivered on commit."""
    connection = connections[using]
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, %s)", [channel, queue])


def audit(using: str, actor: str, action: OperatorAction, target: str, now: datetime) -> None:
    """Append the one ``OperatorAudit`` row of an operator action, in the action's transaction."""
    OperatorAudit.objects.using(using).create(actor=actor, action=action, target=target, recorded_at=now)


#: Take the advisory locks of the queues whose keys (:func:`queue_keys`) are given, in key order:
#: shared for claims, exclusive for operator changes to a queue's settings.
LOCK_QUEUES_SHARED = f"""SELECT count(pg_advisory_xact_lock_shared({QUEUE_LOCK_CLASS}, key))
FROM unnest(%(queue_keys)s::int[]) AS key"""
LOCK_QUEUES_EXCLUSIVE = f"""SELECT count(pg_advisory_xact_lock({QUEUE_LOCK_CLASS}, key))
FROM unnest(%(queue_keys)s::int[]) AS key"""


def queue_key(queue: str) -> int:
    """A queue's advisory-lock key: its CRC32, shifted to fit PostgreSQL's int4."""
    return zlib.crc32(queue.encode()) - 0x8000_0000


def queue_keys(queues: Iterable[str]) -> list[int]:
    """The lock keys of these queues, sorted: every transaction takes them in the same order."""
    return sorted({queue_key(q) for q in queues})


def lock_queues(using: str, queues: Iterable[str], *, exclusive: bool) -> None:
    """Serialize against operator changes to these queues' settings (PostgreSQL advisory locks).

    Claims take the locks shared, so they do not block each other; pause, resume and limit
    changes take theirs exclusively, so a new limit waits for claims already in flight to commit
    and every later claim sees both the limit and those claims' leases. The locks are taken in
    one statement, in key order. Elsewhere this is a no-op: SQLite serializes writers, and a
    limited queue is serialized through its settings row (see ``claim.queue_gates``).
    """
    connection = connections[using]
    keys = queue_keys(queues)
    if connection.vendor != "postgresql" or not keys:
        return
    with connection.cursor() as cursor:
        cursor.execute(LOCK_QUEUES_EXCLUSIVE if exclusive else LOCK_QUEUES_SHARED, {"queue_keys": keys})


# --- The PostgreSQL statements' cursors -----------------------------------------------------------


def uses_postgres_statements(using: str) -> bool:
    """Whether the store's PostgreSQL statements apply: Django's PostgreSQL backend on psycopg 3,
    binding parameters on the client (Django's default). Otherwise (psycopg2, or the
    ``server_side_binding`` option) the portable ORM path does the same work."""
    connection = connections[using]
    if connection.vendor != "postgresql" or connection.settings_dict.get("OPTIONS", {}).get(
        "server_side_binding"
    ):
        return False
    from django.db.backends.postgresql.psycopg_any import is_psycopg3

    return is_psycopg3


def fetch_bound(using: str, sql: str, params: dict[str, Any], *, jobs: int) -> list[tuple[Any, ...]]:
    """Run one of the PostgreSQL statements with its parameters bound on the server; fetch its rows.
    ``jobs`` is how many jobs the statement is about (see :func:`keeps_cursors`).

    When nothing watches the connection's statements (no execute wrapper, no query log: not
    ``DEBUG``, not ``assertNumQueries``) it runs on the connection's :func:`reused_cursor`, with
    the same broken-transaction check and error translation as Django's cursors, instead of a
    new wrapped cursor per call (about 30 µs less client CPU per statement). Otherwise on
    :func:`server_cursor`, so that whatever watches sees it.
    """
    connection = connections[using]
    rows: list[tuple[Any, ...]]
    if watched(connection):
        with server_cursor(using) as cursor:
            cursor.execute(sql, params)
            rows = cursor.fetchall()
            return rows
    cursor = reused_cursor(connection, BOUND_SLOT)
    connection.validate_no_broken_transaction()
    try:
        with connection.wrap_database_errors:
            cursor.execute(sql, params)
            rows = cursor.fetchall()
    finally:
        if not keeps_cursors(jobs):
            let_go(connection, [BOUND_SLOT])
    return rows


def watched(connection: Any) -> bool:
    """Whether something watches this connection's statements: an execute wrapper, or the query
    log (``DEBUG``, ``assertNumQueries``). Only then do the hot paths pay for Django's wrappers."""
    return bool(connection.execute_wrappers) or connection.queries_logged


def keeps_cursors(jobs: int) -> bool:
    """Whether the cursors of a statement or transaction about ``jobs`` jobs are kept for the
    next one. A cursor holds its last statement's parameters and rows until it runs again; kept
    only after one job's, what it holds stays within one job's payload and output, never a
    batch's (up to a thousand payloads for an ``enqueue_many``)."""
    return jobs <= 1


#: The slot of :func:`reused_cursor` that :func:`fetch_bound` runs on; a pipelined transaction's
#: cursors take the slots after it, so a statement run between never overwrites their results.
BOUND_SLOT = 0


def reused_cursor(connection: Any, slot: int) -> Any:
    """The plain psycopg cursor in ``slot`` of the Django connection's (one set per thread, as the
    connection is), made again when the connection was, or when it was let go: a cursor is cheap
    to run again, not to make (its results stay until it runs again, so each user of a slot
    fetches before the next)."""
    import psycopg  # only PostgreSQL projects have it

    connection.ensure_connection()
    raw = connection.connection
    held: tuple[Any, list[Any]] | None = getattr(connection, "_backwave_cursors", None)
    if held is None or held[0] is not raw:
        held = (raw, [])
        connection._backwave_cursors = held
    cursors = held[1]
    while len(cursors) <= slot:
        cursors.append(None)
    cursor = cursors[slot]
    if cursor is None or cursor.closed:
        cursor = cursors[slot] = psycopg.Cursor(raw)
    return cursor


def let_go(connection: Any, slots: Iterable[int]) -> None:
    """Drop the cursors in these slots, and with them what their last statements sent and got."""
    held: tuple[Any, list[Any]] | None = getattr(connection, "_backwave_cursors", None)
    if held is not None:
        for slot in slots:
            held[1][slot] = None


@contextmanager
def server_cursor(using: str) -> Iterator[Any]:
    """A cursor on the same connection (so in the same transaction) that binds on the server.

    Django's cursors bind parameters on the client, which for the hot-path statements means
    quoting every value into SQL text on each call and planning the query afresh on the server.
    A plain psycopg cursor sends the parameters separately; psycopg then prepares the statement
    after ``prepare_threshold`` executions (Django's default, None, never prepares; 5 is psycopg's
    own default; leave it None behind PgBouncer in transaction mode), so the server plans it once
    per connection. It is wrapped like Django's own cursors: execute wrappers, ``connection.queries``
    under DEBUG, ``assertNumQueries`` and Django's database exceptions all see it.
    """
    import psycopg  # only PostgreSQL projects have it

    connection = connections[using]
    connection.ensure_connection()
    with wrapped_cursor(connection, psycopg.Cursor(connection.connection)) as cursor:
        yield cursor


@contextmanager
def pipelined_transaction(
    using: str, *, jobs: int, in_callers_transaction: bool = False
) -> Iterator[tuple[Callable[[], Any], Callable[[], Any]]]:
    """A transaction that a hot-path function begins and ends itself (with SQL, or as the
    statements before one pipeline Sync, which PostgreSQL runs as one transaction), so that several
    statements can go to the server in one round trip: yields psycopg's ``pipeline`` context of
    the connection and a factory of cursors on it, each call a different one: the connection's
    :func:`reused_cursor` slots (kept afterwards only if :func:`keeps_cursors` says so for the
    ``jobs`` the transaction is about), or new Django-wrapped cursors when the connection is
    :func:`watched`.

    For a transaction of its own (Django's connection stays in autocommit mode throughout, and
    nothing here uses savepoints), unless ``in_callers_transaction``: then the statements simply
    run in the caller's ``atomic()`` block, and an error is left for that block to roll back.
    Errors come out as Django's database exceptions; a transaction of its own left open by one is
    rolled back.
    """
    import psycopg  # only PostgreSQL projects have it

    connection = connections[using]
    connection.ensure_connection()
    raw: Any = connection.connection
    handed: list[int] = []
    if watched(connection):
        factory: Callable[[], Any] = lambda: wrapped_cursor(connection, psycopg.Cursor(raw))  # noqa: E731
    else:
        slots = itertools.count(BOUND_SLOT + 1)

        def factory() -> Any:
            handed.append(next(slots))
            return reused_cursor(connection, handed[-1])

    with connection.wrap_database_errors:
        try:
            yield raw.pipeline, factory
        except BaseException:
            if not in_callers_transaction and raw.pgconn.transaction_status in (
                psycopg.pq.TransactionStatus.INTRANS,
                psycopg.pq.TransactionStatus.INERROR,
            ):
                raw.execute("ROLLBACK")
            raise
        finally:
            if not keeps_cursors(jobs):
                let_go(connection, handed)


def wrapped_cursor(connection: Any, raw: Any) -> Any:
    """A psycopg cursor wrapped like Django's own (execute wrappers, DEBUG's query log, error
    translation). (django-stubs type the wrappers for Django's own cursors only.)"""
    return connection.make_debug_cursor(raw) if connection.queries_logged else connection.make_cursor(raw)
