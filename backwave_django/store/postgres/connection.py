"""Every touch of Django's connection internals in the package: the cursors the PostgreSQL
statements run on, and the pipelined transactions the hot paths begin and end themselves.

Django's public API runs one statement per round trip through a cursor wrapper that quotes every
parameter into the SQL text. The hot paths (claim, enqueue, report) need three things it does not
offer: parameters bound on the server (so a statement is planned once per connection), psycopg's
pipeline mode (several statements in one round trip), and a transaction sent as ``BEGIN`` ...
``COMMIT`` inside that pipeline. What each function below reaches into, and why that is safe, is
written beside it; nothing else in ``backwave_django`` reaches into a connection. The attributes
used are Django's: ``connection`` (the raw
psycopg connection), ``ensure_connection()``, ``get_autocommit()``, ``in_atomic_block``,
``validate_no_broken_transaction()``, ``wrap_database_errors``, ``execute_wrappers``,
``queries_logged``, ``make_cursor()``, ``make_debug_cursor()`` and ``get_connection_params()``;
and psycopg's ``pipeline()``, ``pgconn.transaction_status`` and ``Cursor``. The last section
serves the rest of the package (the worker, the pooler check, the test harness), which needs
the same few internals for its own reasons.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any, TypeVar

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper

_T = TypeVar("_T")


def uses_postgres_statements(using: str) -> bool:
    """Whether the store's PostgreSQL statements apply: Django's PostgreSQL backend on psycopg 3,
    binding parameters on the client (Django's default). Otherwise (psycopg2, or the
    ``server_side_binding`` option) the portable ORM path does the same work.

    Reads the alias's settings and Django's own ``psycopg_any.is_psycopg3`` flag (the module
    Django's backend uses to pick its driver), nothing of an open connection."""
    connection = connections[using]
    if connection.vendor != "postgresql" or connection.settings_dict.get("OPTIONS", {}).get(
        "server_side_binding"
    ):
        return False
    from django.db.backends.postgresql.psycopg_any import is_psycopg3

    return is_psycopg3


def own_transaction(using: str) -> bool:
    """Whether a store call here would be a transaction of its own: the connection is in autocommit
    mode (Django's default) and not inside the caller's ``atomic()`` block.

    ``in_atomic_block`` is the flag ``transaction.atomic`` itself sets and reads; it is only read
    here, to decide whether the hot path may begin and end a transaction of its own."""
    connection = connections[using]
    return connection.get_autocommit() and not connection.in_atomic_block


def fetch_bound(using: str, sql: str, params: dict[str, Any], *, jobs: int) -> list[tuple[Any, ...]]:
    """Run one of the PostgreSQL statements with its parameters bound on the server; fetch its rows.
    ``jobs`` is how many jobs the statement is about (see :func:`keeps_cursors`).

    When nothing watches the connection's statements (no execute wrapper, no query log: not
    ``DEBUG``, not ``assertNumQueries``) it runs on the connection's :func:`reused_cursor`, with
    the same broken-transaction check and error translation as Django's cursors
    (``validate_no_broken_transaction``, ``wrap_database_errors``: what Django's own
    ``CursorWrapper.execute`` calls), instead of a new wrapped cursor per call (about 30 µs less
    client CPU per statement). Otherwise on :func:`server_bound`, so that whatever watches sees it.
    """
    connection = connections[using]
    rows: list[tuple[Any, ...]]
    if watched(connection):
        with server_bound(using) as cursor:
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
    log (``DEBUG``, ``assertNumQueries``). Only then do the hot paths pay for Django's wrappers.
    (``execute_wrappers`` and ``queries_logged`` are what Django's cursor wrappers consult.)"""
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
    fetches before the next).

    The cursors hang on the Django connection object under a name of the package's own
    (``_backwave_cursors``) together with the raw connection they were made on, so a reconnect
    (a new ``connection.connection``) or ``close()`` never leaves one pointing at a dead socket."""
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
def server_bound(using: str) -> Iterator[Any]:
    """A cursor on the same connection (so in the same transaction) that binds on the server.

    Django's cursors bind parameters on the client, which for the hot-path statements means
    quoting every value into SQL text on each call and planning the query afresh on the server.
    A plain psycopg cursor sends the parameters separately; psycopg then prepares the statement
    after ``prepare_threshold`` executions (Django's default, None, never prepares; 5 is psycopg's
    own default; leave it None behind PgBouncer in transaction mode), so the server plans it once
    per connection. It is wrapped like Django's own cursors (:func:`wrapped_cursor`): execute
    wrappers, ``connection.queries`` under DEBUG, ``assertNumQueries`` and Django's database
    exceptions all see it.
    """
    import psycopg  # only PostgreSQL projects have it

    connection = connections[using]
    connection.ensure_connection()
    with wrapped_cursor(connection, psycopg.Cursor(connection.connection)) as cursor:
        yield cursor


def wrapped_cursor(connection: Any, raw: Any) -> Any:
    """A psycopg cursor wrapped like Django's own (execute wrappers, DEBUG's query log, error
    translation), by the factories Django's ``connection.cursor()`` itself calls. (django-stubs
    type the wrappers for Django's own cursors only.)"""
    return connection.make_debug_cursor(raw) if connection.queries_logged else connection.make_cursor(raw)


class Pipelined:
    """A pipelined transaction (see :func:`pipelined_transaction`): the pipeline, cursors on it,
    and the transaction control statements, sent on a cursor of their own."""

    def __init__(self, raw: Any, factory: Callable[[], Any]) -> None:
        self._raw = raw
        self._factory = factory
        self._control: Any = None
        self._open: Any = None

    def round_trip(self) -> AbstractContextManager[Any]:
        """psycopg's pipeline of the connection: statements executed in the block are sent without
        waiting, and the block's end (a Sync) collects their results. Its ``sync()`` is :meth:`sync`."""
        context = self._raw.pipeline()
        return _Remembered(self, context)

    def cursor(self) -> Any:
        """A cursor on the connection (each call a different one)."""
        return self._factory()

    def begin(self) -> None:
        self._send("BEGIN")

    def commit(self) -> None:
        self._send("COMMIT")

    def rollback(self) -> None:
        self._send("ROLLBACK")

    def sync(self) -> None:
        """End the open pipeline's stretch of statements after one of them failed (the server
        skipped the rest), collecting whatever of it had not come back yet."""
        import psycopg  # only PostgreSQL projects have it

        try:
            self._open.sync()
        except psycopg.errors.PipelineAborted:
            # The failure came back before the stretch's last statement was sent, so the error came
            # out of sending it, and the server skipped it: the Sync reports it skipped. Sync again.
            self._open.sync()

    def _send(self, command: str) -> None:
        if self._control is None:
            self._control = self.cursor()
        self._control.execute(command)


class _Remembered:
    """psycopg's pipeline context, remembered by its :class:`Pipelined` while it is open."""

    def __init__(self, owner: Pipelined, context: Any) -> None:
        self._owner, self._context = owner, context

    def __enter__(self) -> Any:
        self._owner._open = self._context.__enter__()
        return self._owner._open

    def __exit__(self, *exc: Any) -> Any:
        try:
            return self._context.__exit__(*exc)
        finally:
            self._owner._open = None


@contextmanager
def pipelined_transaction(
    using: str, *, jobs: int, in_callers_transaction: bool = False
) -> Iterator[Pipelined]:
    """A transaction that a hot-path function begins and ends itself (with :meth:`Pipelined.begin`
    and :meth:`~Pipelined.commit`, or as the statements before one pipeline Sync, which PostgreSQL
    runs as one transaction), so that several statements can go to the server in one round trip.
    Its cursors are the connection's :func:`reused_cursor` slots (kept afterwards only if
    :func:`keeps_cursors` says so for the ``jobs`` the transaction is about), or new Django-wrapped
    cursors when the connection is :func:`watched`.

    Why it is safe to send ``BEGIN`` and ``COMMIT`` behind Django's back: it is only done for a
    transaction of its own (:func:`own_transaction`: Django's connection is in autocommit mode and
    in no ``atomic()`` block), Django's connection stays in autocommit mode throughout, nothing here
    uses savepoints, and the transaction is over (committed, or rolled back below) before control
    returns to Django, so Django's idea of the connection's state is never wrong. With
    ``in_callers_transaction`` the statements simply run in the caller's ``atomic()`` block (after
    Django's broken-transaction check), and an error is left for that block to roll back. Errors
    come out as Django's database exceptions (``wrap_database_errors``); a transaction of its own
    left open by one is rolled back (read from psycopg's ``pgconn.transaction_status``).
    """
    import psycopg  # only PostgreSQL projects have it

    connection = connections[using]
    if in_callers_transaction:
        connection.validate_no_broken_transaction()
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
            yield Pipelined(raw, factory)
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


def integrity_errors() -> tuple[type[Exception], ...]:
    """The errors a unique violation comes out as: psycopg's on a plain cursor, Django's on a
    watched (wrapped) one."""
    import psycopg  # only PostgreSQL projects have it
    from django.db import IntegrityError

    return (psycopg.errors.IntegrityError, IntegrityError)


# --- For the rest of the package --------------------------------------------------------------


def connect(using: str) -> None:
    """Open this thread's connection to ``using`` now, if it is not open (what Django does before
    a first statement anyway): the worker's writer thread does it ahead of its first write."""
    connections[using].ensure_connection()


def inside_atomic(using: str) -> bool:
    """Whether the code running now is inside an ``atomic()`` block on ``using``: the flag
    ``transaction.atomic`` itself keeps, only read."""
    return connections[using].in_atomic_block


def on_raw_connection(connection: BaseDatabaseWrapper, look: Callable[[Any], _T]) -> _T:
    """``look`` applied to the psycopg connection under this Django connection, with Django's error
    translation; a connection opened only for this is closed again (so nothing else, such as a
    ``LISTEN`` alias, finds it open). Used to ask the server about the connection itself (the
    pooler check of ``poolers.py``), never to run a statement of the application's."""
    was_open = connection.connection is not None
    try:
        connection.ensure_connection()
        with connection.wrap_database_errors:
            return look(connection.connection)
    finally:
        if not was_open:
            connection.close()


def own_connection_params(using: str) -> dict[str, Any]:
    """The arguments of ``psycopg.connect`` for a connection of its own to the database of
    ``using`` (the worker's ``LISTEN`` connection): Django's, from the alias's settings
    (``get_connection_params``), without what only Django's own connection uses."""
    params: dict[str, Any] = connections[using].get_connection_params()
    for key in ("cursor_factory", "context", "server_side_binding", "prepare_threshold"):
        params.pop(key, None)
    return params
