"""The observer pump: a worker's thread that delivers recorded transitions to observers.

One per worker process, started only when observers are registered (docs/observers.md). Each
round it numbers new log entries (``store.sequence_log``), then for each observer claims its
next deliveries and runs the observer on each, in log order, one at a time, each within
``OBSERVER_TIMEOUT`` (30 s; an observer that overruns is left running in the background and
counts as failed). A
failed delivery is retried by ``OBSERVER_RETRY`` (or dead-lettered at its ceiling) and the rest
of the batch waits behind it: their attempts are given back. After a round with work it goes
again at once; otherwise it waits ``POLL_INTERVAL``.
"""

from __future__ import annotations

import asyncio
import logging
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

logger = logging.getLogger("backwave_django.worker")

#: Deliveries claimed per observer per round.
DELIVERY_BATCH = 32
#: The observer's lease: long enough for a batch of deliveries at their timeout is not needed,
#: since a batch stops early (and reports) once half of it has passed.
OBSERVER_LEASE = timedelta(minutes=2)
MAX_FAULT_BACKOFF_SECONDS = 30.0


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
        self.backoff = 0.0
        self.delivered = 0

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
                    self.backoff = min(max(self.backoff * 2, 0.5), MAX_FAULT_BACKOFF_SECONDS)
                    logger.warning(
                        "Observer pump: database fault (%s: %s); retrying in %.1f s",
                        type(exc).__name__,
                        exc,
                        self.backoff,
                    )
                    connections.close_all()
                    self.stopping.wait(self.backoff)
                    continue
                self.backoff = 0.0
                if not worked:
                    self.stopping.wait(self.settings.poll_interval.total_seconds())
        finally:
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
                lease_duration=OBSERVER_LEASE,
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
        budget = OBSERVER_LEASE.total_seconds() / 2
        for index, delivery in enumerate(deliveries):
            if self.stopping.is_set() or time.monotonic() - started > budget:
                give_back_from = index
                break
            error = run_with_timeout(definition, delivery, self.settings.observer_timeout.total_seconds())
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


def run_with_timeout(definition: ObserverDefinition, delivery: Delivery, timeout: float) -> str | None:
    """Run the observer on one delivery in a thread of its own; None when it returned in time,
    else what went wrong (its exception, or the timeout; an overrunning observer keeps running)."""
    result: list[BaseException | None] = []

    def call() -> None:
        close_old_connections()
        try:
            outcome: Any = definition.func(delivery)
            if definition.is_async:
                asyncio.run(outcome)
        except BaseException as exc:
            result.append(exc)
        else:
            result.append(None)
        finally:
            connections.close_all()

    thread = threading.Thread(target=call, name=f"backwave-observer-{definition.observer_id}", daemon=True)
    thread.start()
    thread.join(timeout)
    if not result:
        return f"timed out after {timeout:g}s"
    error = result[0]
    return None if error is None else failure_detail(error).split("\n", 1)[0]
