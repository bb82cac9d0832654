"""The observer pump: a worker's thread that delivers recorded transitions to observers.

One per worker process, started only when observers are registered (docs/observers.md). Each
round it numbers new log entries (``store.sequence_log``), then for each observer claims its
next deliveries and runs the observer on each, in log order, one at a time (on a thread of the
observer's own), each within ``OBSERVER_TIMEOUT`` (30 s; an observer that overruns is left
running in the background and counts as failed). A failed delivery is retried by
``OBSERVER_RETRY`` (or dead-lettered at its ceiling) and the rest of the batch waits behind it:
their attempts are given back. After a round with work it goes again at once; otherwise it
waits ``POLL_INTERVAL``, or less when a failed delivery's retry comes sooner (:func:`idle_wait`):
an observer's retry is due after its backoff, not after the next poll.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from django.db import DatabaseError, InterfaceError, close_old_connections, connections

from .. import clock, store
from ..conf import BackWaveSettings
from ..core.observing import Delivery, ObserverDisposition
from ..observers import ObserverDefinition
from .execution import failure_detail
from .faults import FaultBackoff

logger = logging.getLogger("backwave_django.worker")

#: Deliveries claimed per observer per round: large enough that the claim and the report (two
#: transactions) cost little per delivery; a failure gives the rest of the batch back.
DELIVERY_BATCH = 256


def idle_wait(poll_seconds: float, next_retry: datetime | None, now: datetime) -> float:
    """How long the pump waits after a round that found nothing to deliver: the poll interval, or
    until the earliest retry of a delivery that failed (``next_retry``), whichever is sooner."""
    if next_retry is None:
        return poll_seconds
    return min(poll_seconds, max((next_retry - now).total_seconds(), 0.0))


def observer_lease(settings: BackWaveSettings) -> timedelta:
    """How long a claim holds an observer: the worker's ``LEASE_DURATION`` plus one delivery's
    ``OBSERVER_TIMEOUT``. A batch starts no call after half the lease duration has passed, and a
    call ends within the timeout, so a live pump reports before its lease lapses; a dead one
    holds the observer up no longer than that."""
    return settings.lease_duration + settings.observer_timeout


class ObserverPump:
    """Delivers to ``observers`` on a daemon thread until :meth:`stop`."""

    def __init__(
        self, *, worker_id: str, observers: Sequence[ObserverDefinition], settings: BackWaveSettings
    ) -> None:
        self.worker_id = worker_id
        self.observers = list(observers)
        self.settings = settings
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._serve, name="backwave-observers", daemon=True)
        self.faults = FaultBackoff()
        self.delivered = 0
        self.callers: dict[str, ObserverCaller] = {}
        #: The earliest retry instant of a delivery that failed since the pump last waited.
        self.next_retry: datetime | None = None

    def _caller(self, definition: ObserverDefinition) -> ObserverCaller:
        caller = self.callers.get(definition.observer_id)
        if caller is None:
            caller = self.callers[definition.observer_id] = ObserverCaller(
                f"backwave-observer-{definition.observer_id}"
            )
        return caller

    def start(self) -> None:
        self.thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self.stopping.set()
        self.thread.join(timeout)

    def _serve(self) -> None:
        try:
            while not self.stopping.is_set():
                try:
                    worked = self.run_round()
                except (DatabaseError, InterfaceError) as exc:
                    wait = self.faults.failed(time.monotonic())
                    logger.warning(
                        "Observer pump: database fault (%s: %s); retrying in %.1f s",
                        type(exc).__name__,
                        exc,
                        wait,
                    )
                    connections.close_all()
                    self.stopping.wait(wait)
                    continue
                self.faults.succeeded()
                if not worked:
                    poll = self.settings.poll_interval.total_seconds()
                    wait, self.next_retry = idle_wait(poll, self.next_retry, clock.now()), None
                    self.stopping.wait(wait)
        finally:
            for caller in self.callers.values():
                caller.close()
            connections.close_all()

    def run_round(self) -> bool:
        """Number new entries, then deliver one batch per observer; returns whether anything was done."""
        worked = store.sequence_log() > 0
        for definition in self.observers:
            if self.stopping.is_set():
                break
            claim = store.claim_observer_deliveries(
                definition.observer_id,
                states=definition.states,
                wire_name=definition.wire_name,
                queue=definition.queue,
                worker_id=self.worker_id,
                max_rows=DELIVERY_BATCH,
                lease_duration=observer_lease(self.settings),
                now=clock.now(),
            )
            if claim.deliveries:
                worked = True
                outcomes = self._deliver(definition, claim.deliveries)
                store.report_observer_deliveries(
                    definition.observer_id, worker_id=self.worker_id, outcomes=outcomes, now=clock.now()
                )
        return worked

    def _deliver(
        self, definition: ObserverDefinition, deliveries: Sequence[Delivery]
    ) -> list[tuple[int, ObserverDisposition, datetime | None]]:
        outcomes: list[tuple[int, ObserverDisposition, datetime | None]] = []
        give_back_from: int | None = None
        started = time.monotonic()
        budget = self.settings.lease_duration.total_seconds() / 2
        for index, delivery in enumerate(deliveries):
            if self.stopping.is_set() or time.monotonic() - started > budget:
                give_back_from = index
                break
            error = self._caller(definition).call(
                definition, delivery, self.settings.observer_timeout.total_seconds()
            )
            if error is None:
                outcomes.append((delivery.position, ObserverDisposition.DELIVERED, None))
                self.delivered += 1
                continue
            now = clock.now()
            retry_at = self.settings.observer_retry.next_attempt_at(delivery.delivery_attempt, now)
            if retry_at is None:
                outcomes.append((delivery.position, ObserverDisposition.DEAD_LETTERED, None))
                logger.error(
                    "Observer %s gave up on %s %s #%d (%s) after %d attempt(s): %s",
                    definition.observer_id,
                    delivery.wire_name,
                    delivery.job_id,
                    delivery.ordinal,
                    delivery.state.label,
                    delivery.delivery_attempt,
                    error,
                )
            else:
                outcomes.append((delivery.position, ObserverDisposition.RETRY, retry_at))
                self.next_retry = retry_at if self.next_retry is None else min(self.next_retry, retry_at)
                logger.warning(
                    "Observer %s failed on %s %s #%d (attempt %d); retry at %s: %s",
                    definition.observer_id,
                    delivery.wire_name,
                    delivery.job_id,
                    delivery.ordinal,
                    delivery.delivery_attempt,
                    retry_at.isoformat(),
                    error,
                )
            give_back_from = index + 1  # later entries wait behind it, in log order
            break
        if give_back_from is not None:
            outcomes += [(d.position, ObserverDisposition.RETRY, None) for d in deliveries[give_back_from:]]
        return outcomes


class ObserverCaller:
    """Runs observer calls, one at a time, on a reusable daemon thread (its database connections
    stay open between calls, as a job thread's do).

    A call that overruns its timeout keeps its thread, which leaves once the call returns; the
    next call gets a fresh thread. Daemon threads: a hung observer never holds up the exit.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._work: queue.SimpleQueue[_Call | None] | None = None

    def call(self, definition: ObserverDefinition, delivery: Delivery, timeout: float) -> str | None:
        """None when the observer returned in time, else what went wrong (its exception, or the timeout)."""
        if self._work is None:
            self._work = queue.SimpleQueue()
            threading.Thread(target=_serve_calls, args=(self._work,), name=self.name, daemon=True).start()
        call = _Call(definition, delivery)
        self._work.put(call)
        if not call.done.wait(timeout):
            self.close()  # that thread leaves after the overrunning call
            return f"timed out after {timeout:g}s"
        if call.error is None:
            return None
        return failure_detail(call.error).split("\n", 1)[0]

    def close(self) -> None:
        if self._work is not None:
            self._work.put(None)
            self._work = None


class _Call:
    __slots__ = ("definition", "delivery", "done", "error")

    def __init__(self, definition: ObserverDefinition, delivery: Delivery) -> None:
        self.definition = definition
        self.delivery = delivery
        self.done = threading.Event()
        self.error: BaseException | None = None


def _serve_calls(work: queue.SimpleQueue[_Call | None]) -> None:
    loop = asyncio.new_event_loop()
    try:
        while (call := work.get()) is not None:
            close_old_connections()
            try:
                outcome: Any = call.definition.func(call.delivery)
                if call.definition.is_async:
                    loop.run_until_complete(outcome)
            except BaseException as exc:
                call.error = exc
            call.done.set()
    finally:
        loop.close()
        connections.close_all()
