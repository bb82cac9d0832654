"""Transactions and what rides on them: deadlock retries, wake-up hints, audit rows, queue locks.

Every store operation is one transaction. :func:`atomic_retrying` runs it in
``transaction.atomic()`` (joining the caller's transaction when there is one) and runs it again
when the database picked it as a deadlock victim, so callers never see one. The PostgreSQL
statements' cursors and pipelined transactions are in ``store/postgres/connection.py``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import TypeVar

from django.db import OperationalError, connections, transaction

from ..core.states import OperatorAction
from ..models import OperatorAudit
from .postgres import notifications, queues
from .postgres.notifications import HINT_CHANNEL

_T = TypeVar("_T")

logger = logging.getLogger("backwave_django.store")

#: How many times an operation chosen as a deadlock victim is run again before the error surfaces.
DEADLOCK_RETRIES = 5
_DEADLOCK_SQLSTATES = frozenset({"40P01", "40001"})  # deadlock_detected, serialization_failure
_MYSQL_DEADLOCK_CODES = frozenset({1213, 1205})  # ER_LOCK_DEADLOCK, ER_LOCK_WAIT_TIMEOUT


# --- Transactions -----------------------------------------------------------------------------


def is_deadlock(error: OperationalError) -> bool:
    cause = error.__cause__
    if getattr(cause, "sqlstate", None) in _DEADLOCK_SQLSTATES:
        return True
    return bool(error.args) and error.args[0] in _MYSQL_DEADLOCK_CODES


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


def hints_sent(using: str) -> bool:
    """Whether :func:`notify` sends anything on ``using`` (PostgreSQL only)."""
    return connections[using].vendor == "postgresql"


def notify(using: str, queue: str, *, channel: str = HINT_CHANNEL, due: datetime | None = None) -> None:
    """Send a wake-up hint naming ``queue`` (or, on ``CANCEL_CHANNEL``, a job id): PostgreSQL only;
    inside a transaction it is delivered on commit. ``due``: the earliest due time of the jobs it
    made claimable, when they may be due before what workers have claimed (an enqueue, a
    schedule's instances, an attempt given back or a dependent released by an outcome; see
    ``notifications.HINT_CHANNEL``)."""
    if hints_sent(using):
        notifications.notify(using, notifications.hint_payload(queue, due), channel=channel)


def audit(using: str, actor: str, action: OperatorAction, target: str, now: datetime) -> None:
    """Append the one ``OperatorAudit`` row of an operator action, in the action's transaction."""
    OperatorAudit.objects.using(using).create(actor=actor, action=action, target=target, recorded_at=now)


def lock_queues(using: str, queues_: Iterable[str], *, exclusive: bool) -> None:
    """Serialize against operator changes to these queues' settings.

    Claims take the locks shared, so they do not block each other; pause, resume and limit
    changes take theirs exclusively, so a new limit waits for claims already in flight to commit
    and every later claim sees both the limit and those claims' leases. On PostgreSQL these are
    advisory locks (``store/postgres/queues.py``). Elsewhere this is a no-op: SQLite serializes
    writers, and a limited queue is serialized through its settings row (see ``claims.queue_gates``).
    """
    if connections[using].vendor == "postgresql":
        queues.lock_queues(using, queues_, exclusive=exclusive)
