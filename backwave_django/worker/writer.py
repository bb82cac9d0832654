"""The outcome writer: outcome batches written on a thread (and connection) of their own.

So that the pump's next claim overlaps the last outcome write. See :class:`OutcomeWriter`.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass

from django.db import DatabaseError, InterfaceError, connections

from .. import clock, signals, store
from ..core.outcomes import Failure, Snoozed, Success, outcome_effect
from ..core.states import OutcomeResult
from ..store import connect
from .execution import Finished, Running

logger = logging.getLogger("backwave_django.worker")


class OutcomeWriter:
    """Writes outcome batches on a thread of its own, so the next claim overlaps the last write.

    Django gives each thread its own connection, so the write is its own transaction beside the
    pump's claims. One batch at a time: outcomes that finish meanwhile wait in the pump's outbox
    and go together in the next batch. A batch comes back through ``on_done`` with its results, or
    with the exception that stopped it (the pump keeps the outcomes and retries, or re-raises).
    """

    def __init__(self, using: str, worker_id: str, on_done: Callable[[WriteDone], None]) -> None:
        self.using = using
        self.worker_id = worker_id
        self.on_done = on_done
        self.batches: queue.SimpleQueue[list[Finished] | None] = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._serve, name="backwave-outcomes", daemon=True)
        self.thread.start()

    def submit(self, batch: list[Finished]) -> None:
        self.batches.put(batch)

    def stop(self) -> None:
        self.batches.put(None)
        self.thread.join(timeout=30)

    def _serve(self) -> None:
        try:
            self._connect()
            while (batch := self.batches.get()) is not None:
                try:
                    reports = [finished.report(self.worker_id) for finished in batch]
                    results = store.report_outcomes(reports, now=clock.now())
                except BaseException as exc:
                    if isinstance(exc, DatabaseError | InterfaceError):
                        connections[self.using].close()  # this thread's connection: reconnect next time
                    self.on_done(WriteDone(batch, None, exc))
                else:
                    self.on_done(WriteDone(batch, results, None))
        finally:
            connections.close_all()

    def _connect(self) -> None:
        """Open this thread's connection while the pump runs its first maintenance and claim, so
        the first outcome write does not wait for it. Whatever stops it is left to that write,
        which meets it again and reports it to the pump like any failed write."""
        with contextlib.suppress(Exception):
            connect(self.using)


@dataclass(frozen=True, slots=True)
class WriteDone:
    batch: list[Finished]
    results: list[OutcomeResult] | None
    error: BaseException | None


def concurrent_writers(using: str) -> bool:
    """Whether a second connection can write beside the pump's: not on SQLite, which has one writer
    at a time (a second connection would only wait for the lock)."""
    return connections[using].vendor != "sqlite"


def log_outcome(finished: Finished, result: OutcomeResult) -> None:
    """One log line for a written outcome: fenced off (WARNING), dead-lettered (ERROR), retried
    or snoozed (INFO), anything else (DEBUG)."""
    claimed = finished.running.claimed
    outcome = finished.outcome
    if result is OutcomeResult.STALE_LEASE:
        logger.warning(
            "Outcome of %s %s (attempt %d) was fenced off: the lease was lost",
            claimed.wire_name,
            claimed.job_id,
            claimed.attempt,
        )
    elif isinstance(outcome, Failure) and outcome.next_due_time is None:
        logger.error(
            "Job %s %s dead-lettered on attempt %d: %s",
            claimed.wire_name,
            claimed.job_id,
            claimed.attempt,
            outcome.error,
        )
    elif isinstance(outcome, Failure):
        logger.info(
            "Job %s %s failed on attempt %d (%s); retry at %s",
            claimed.wire_name,
            claimed.job_id,
            claimed.attempt,
            outcome.error,
            outcome.next_due_time.isoformat() if outcome.next_due_time else "-",
        )
    elif isinstance(outcome, Snoozed):
        logger.info(
            "Job %s %s snoozed on attempt %d until %s",
            claimed.wire_name,
            claimed.job_id,
            claimed.attempt,
            outcome.next_due_time.isoformat(),
        )
    else:
        logger.debug(
            "Job %s %s attempt %d: %s",
            claimed.wire_name,
            claimed.job_id,
            claimed.attempt,
            "succeeded" if isinstance(outcome, Success) else type(outcome).__name__,
        )


def announce_started(sender: object, running: Running) -> None:
    """As a handler starts (on its job thread): ``job_started`` (when anyone listens), and a DEBUG line."""
    claimed = running.claimed
    signals.send(
        signals.job_started,
        sender,
        job_id=claimed.job_id,
        wire_name=claimed.wire_name,
        queue=claimed.queue,
        attempt=claimed.attempt,
    )
    logger.debug("Running %s %s attempt %d", claimed.wire_name, claimed.job_id, claimed.attempt)


def announce_finished(sender: object, batch: list[Finished], results: list[OutcomeResult]) -> None:
    """Send ``job_finished`` for each written outcome that applied (when anyone listens)."""
    if not signals.job_finished.has_listeners(sender):
        return
    for finished, result in zip(batch, results, strict=True):
        if result is OutcomeResult.APPLIED:
            claimed = finished.running.claimed
            signals.send(
                signals.job_finished,
                sender,
                job_id=claimed.job_id,
                wire_name=claimed.wire_name,
                queue=claimed.queue,
                attempt=claimed.attempt,
                state=outcome_effect(finished.outcome).state,
            )
