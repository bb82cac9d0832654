"""Wake-up hints and cancel requests: PostgreSQL ``LISTEN`` on a dedicated connection.

The connection is made with the settings of ``BACKWAVE["LISTEN_DATABASE"]`` (the jobs' alias by
default): ``LISTEN`` needs a session of its own, which a pooler in transaction mode cannot give.

Hints are an optimisation only: they may be lost, duplicated or late, and correctness comes
from polling (wake-ups) and from the heartbeats (cancel requests, which also carry the flag).
On other databases there is nothing to listen to and the worker simply polls.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection

from django.db import connections

from .. import store
from ..core.claim_floors import ClaimFloors
from ..poolers import announces_other_process
from ..store import own_connection_params

logger = logging.getLogger("backwave_django.worker")

RECONNECT_DELAY_SECONDS = 5.0


class HintListener:
    """Calls ``wake()`` whenever a hint names one of ``queues`` and ``cancel(job_id)`` for each
    cancel request; reconnects after any error. A hint's due time lowers the queue's ``floors``
    (``core/claim_floors.py``), which are also told whether hints are heard."""

    def __init__(
        self,
        *,
        using: str,
        queues: Collection[str],
        wake: Callable[[], None],
        cancel: Callable[[str], None] | None = None,
        floors: ClaimFloors | None = None,
    ) -> None:
        self.using = using
        self.queues = frozenset(queues)
        self.wake = wake
        self.cancel = cancel
        self.floors = floors
        self.stopping = threading.Event()
        self._hearing = False
        self.thread = threading.Thread(target=self._run, name="backwave-hints", daemon=True)

    @staticmethod
    def available(using: str) -> bool:
        """PostgreSQL through psycopg 3 (the listener's own connection is a psycopg 3 one)."""
        if connections[using].vendor != "postgresql":
            return False
        from django.db.backends.postgresql.psycopg_any import is_psycopg3

        return is_psycopg3

    @property
    def hearing(self) -> bool:
        """Whether hints arrive now: listening on a direct connection (not through a pooler, where
        none arrives). While it is false the worker claims again after each outcome batch, as it
        would without hints, and its claims' floors trail further (``core/claim_floors.py``)."""
        return self._hearing

    @hearing.setter
    def hearing(self, heard: bool) -> None:
        self._hearing = heard
        if self.floors is not None:
            self.floors.hearing(heard)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stopping.set()

    def heard(self, payload: str) -> None:
        """Act on a wake-up hint's payload."""
        queue, due = store.read_hint(payload)
        if queue in self.queues:
            if due is not None and self.floors is not None:
                self.floors.lower(queue, due)
            self.wake()

    def _run(self) -> None:
        import psycopg

        params = own_connection_params(self.using)
        warned = False
        while not self.stopping.is_set():
            try:
                with psycopg.connect(**params, autocommit=True) as connection:
                    pooled = announces_other_process(connection)
                    if not warned and pooled:
                        warned = True
                        logger.warning(
                            "Listening for wake-up hints through a connection pooler (database %r); "
                            "in transaction mode no notification arrives, so this worker polls and "
                            "hears cancel requests only with its heartbeats. Name a direct alias in "
                            "BACKWAVE['LISTEN_DATABASE'] (docs/operations.md, \"PgBouncer\").",
                            self.using,
                        )
                    connection.execute(f"LISTEN {store.HINT_CHANNEL}")
                    if self.cancel is not None:
                        connection.execute(f"LISTEN {store.CANCEL_CHANNEL}")
                    logger.debug("Listening for wake-up hints on %s", store.HINT_CHANNEL)
                    self.hearing = not pooled
                    self.wake()  # anything enqueued while we were not listening
                    while not self.stopping.is_set():
                        for notice in connection.notifies(timeout=1.0):
                            if notice.channel == store.CANCEL_CHANNEL:
                                if self.cancel is not None:
                                    self.cancel(notice.payload)
                            else:
                                self.heard(notice.payload)
            except Exception as exc:
                self.hearing = False
                if self.stopping.is_set():
                    break
                logger.warning(
                    "Wake-up hint channel down (%s); reconnecting in %.0f s", exc, RECONNECT_DELAY_SECONDS
                )
                self.stopping.wait(RECONNECT_DELAY_SECONDS)
        self.hearing = False
