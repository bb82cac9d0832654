"""Enqueue in many batches: :func:`enqueue_batches`, what ``backwave_django.enqueue_many`` uses
for a list longer than one batch.

Each batch is a transaction of its own (or all join the caller's). The store backend
(``backends.store_backend``) writes them: here, the portable path (:class:`PortableBatchWriter`,
one :func:`~store.enqueueing.enqueue_batch` after another); on PostgreSQL, the overlapped writer
of ``store/postgres/enqueue/batches.py``. See docs/store.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime

from ..core.outcomes import NewJob
from ..database import jobs_database
from .backends import store_backend
from .enqueueing import enqueue_batch
from .job_inserts import Enqueued


def enqueue_batches(
    batches: Iterable[tuple[Sequence[NewJob], datetime]],
    *,
    written: Callable[[list[Enqueued]], None],
    raise_refusals: bool = False,
) -> None:
    """:func:`enqueue_batch` for each ``(new_jobs, now)`` of ``batches`` in turn, each batch a
    transaction of its own (or, inside the caller's transaction, all of them in it), and
    ``written`` called with each stored batch's entries, in order, once the database work is over
    (also when a later batch fails: those before it are stored).

    On PostgreSQL a batch of jobs without parents and without unique keys is sent without waiting
    for it: the next batch is taken from ``batches`` (which may build it then) and judged while the
    database writes this one, and is sent once this one is committed. The client's work and the
    database's overlap, with one batch in flight at a time, so a failure stops the run at the
    batch where it happened, exactly as one batch after another would. See docs/store.md.
    """
    using = jobs_database()
    stored: list[list[Enqueued]] = []
    try:
        store_backend(using).batches.write(using, batches, stored, raise_refusals)
    finally:
        for entries in stored:
            written(entries)


class PortableBatchWriter:
    """The portable path of ``backends.BatchWriter``: one :func:`enqueue_batch` after another."""

    def write(
        self,
        using: str,
        batches: Iterable[tuple[Sequence[NewJob], datetime]],
        stored: list[list[Enqueued]],
        raise_refusals: bool,
    ) -> None:
        for new_jobs, now in batches:
            stored.append(enqueue_batch(new_jobs, now=now, raise_refusals=raise_refusals))
