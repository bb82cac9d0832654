"""PostgreSQL's path of ``store.batches.enqueue_batches`` (``backends.BatchWriter``): batches
overlapped on the connection's pipeline.

A batch of jobs without parents or unique keys goes out on the pipeline and is not waited for:
the next batch is built and judged while the database writes it. A batch of ids that
``prepare()`` made goes without ``ON CONFLICT`` in a transaction of its own, and is sent again
with it if it meets a job stored before (``inserts.ENQUEUE_NEW``). Other batches take
``store.enqueueing.enqueue_batch``. See docs/store.md.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ....conf import get_settings
from ....core.outcomes import NewJob
from ....core.states import EnqueueResult
from ...enqueueing import enqueue_batch, judge_bounds
from ...job_inserts import Enqueued, enqueued_entries
from ..connection import Pipelined, integrity_errors, own_transaction, pipelined_transaction
from .inserts import insert_statement, stored_ids, with_on_conflict


class PostgresBatchWriter:
    """PostgreSQL's path of ``backends.BatchWriter``."""

    def write(
        self,
        using: str,
        batches: Iterable[tuple[Sequence[NewJob], datetime]],
        stored: list[list[Enqueued]],
        raise_refusals: bool,
    ) -> None:
        with ExitStack() as exits:
            writer = _OverlappedWriter(using, exits, raise_refusals, stored)
            for new_jobs, now in writer.guarded(iter(batches)):
                writer.write(list(new_jobs), now)
            writer.collect()


@dataclass(slots=True)
class _Sent:
    """A batch on the pipeline: its jobs, their judgements, the position of each id sent
    (``insert_statement``'s ``first``), and its statement."""

    jobs: list[NewJob]
    results: list[EnqueueResult | None]
    first: dict[uuid.UUID, int]
    statement: str
    params: dict[str, Any]


class _OverlappedWriter:
    """:func:`enqueue_batches` on PostgreSQL: the batch in flight on the connection's pipeline
    (opened at the first batch sent, closed before a batch that takes another path), and the
    entries of the batches stored so far."""

    def __init__(self, using: str, exits: ExitStack, raise_refusals: bool, stored: list[list[Enqueued]]):
        self.using, self.exits, self.raise_refusals, self.stored = using, exits, raise_refusals, stored
        self.settings = get_settings()
        self.own = own_transaction(using)
        self.tx: Pipelined | None = None
        self.inserting: Any = None
        self.in_flight: _Sent | None = None

    def guarded(
        self, batches: Iterator[tuple[Sequence[NewJob], datetime]]
    ) -> Iterator[tuple[Sequence[NewJob], datetime]]:
        """``batches``, except that the batch in flight is collected before an error in building
        the next one comes out (so it is reported as stored)."""
        while True:
            try:
                batch = next(batches)
            except StopIteration:
                return
            except BaseException:
                self.collect()
                raise
            yield batch

    def write(self, jobs: list[NewJob], now: datetime) -> None:
        if any(j.parents or j.unique is not None for j in jobs):
            self.collect()
            self.exits.close()  # the other paths run their own statements, outside the pipeline
            self.tx = None
            self.stored.append(enqueue_batch(jobs, now=now, raise_refusals=self.raise_refusals))
            return
        try:  # the client's work on this batch, while the database writes the one in flight
            results = judge_bounds(jobs, now, self.settings, self.raise_refusals)
            statement, params, first = insert_statement(
                jobs, results, now, self.settings, new_ids_allowed=self.own
            )
        except BaseException:
            self.collect()
            raise
        if not first:
            self.collect()
            self.stored.append(enqueued_entries(jobs, results, first, []))
            return
        if self.tx is None:
            self._open(len(jobs))
        # The batch before is committed (or failed) before this one is sent; its rows are turned
        # into entries only after, while the database writes this one.
        previous, self.in_flight = self.in_flight, None
        if previous is not None:
            previous, rows = self._rows(previous)
        try:
            self.in_flight = self._send(_Sent(jobs, results, first, statement, params))
        finally:  # kept even when this batch fails at once (psycopg may read its error early)
            if previous is not None:
                self.stored.append(self._entries(previous, rows))

    def collect(self) -> None:
        """Wait for the batch in flight and keep its entries."""
        if self.in_flight is not None and self.tx is not None:
            sent, self.in_flight = self.in_flight, None
            self.stored.append(self._entries(*self._rows(sent)))

    def _send(self, sent: _Sent) -> _Sent:
        """Put ``sent`` on the pipeline, in a transaction of its own unless in the caller's."""
        assert self.tx is not None
        try:
            if self.own:
                self.tx.begin()
            self.inserting.execute(sent.statement, sent.params)
            if self.own:
                self.tx.commit()
        except integrity_errors() as error:  # psycopg's, or Django's on a watched cursor
            return self._send_again(sent, error)
        return sent

    def _rows(self, sent: _Sent) -> tuple[_Sent, list[tuple[Any, ...]]]:
        """Wait for ``sent``'s rows (for a batch sent again, the second sending's)."""
        assert self.tx is not None
        try:
            return sent, self.inserting.fetchall()
        except integrity_errors() as error:
            return self._rows(self._send_again(sent, error))

    def _send_again(self, sent: _Sent, error: Exception) -> _Sent:
        """A batch of new ids met one that was stored before (the same prepared job sent twice):
        its transaction failed and wrote nothing. End the pipeline's failed stretch, roll that
        transaction back, and send the batch again with ``ON CONFLICT``, which finds the
        duplicates. ``error`` is raised if the batch was sent with it already."""
        checked = with_on_conflict(sent.statement)
        if checked is None:
            raise error
        assert self.tx is not None
        self.tx.sync()
        self.tx.rollback()
        return self._send(_Sent(sent.jobs, sent.results, sent.first, checked, sent.params))

    @staticmethod
    def _entries(sent: _Sent, rows: list[tuple[Any, ...]]) -> list[Enqueued]:
        stored = stored_ids(sent.statement, sent.first, rows)
        return enqueued_entries(sent.jobs, sent.results, sent.first, stored)

    def _open(self, jobs: int) -> None:
        self.tx = self.exits.enter_context(
            pipelined_transaction(self.using, jobs=jobs, in_callers_transaction=not self.own)
        )
        self.inserting = self.tx.cursor()
        self.exits.enter_context(self.tx.round_trip())
