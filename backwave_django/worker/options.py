"""A worker process's options (from ``backwave_worker``'s flags), its id, and its prefetch."""

from __future__ import annotations

import os
import secrets
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from ..conf import BackWaveSettings
from ..core.dispatch import Dispatch
from ..core.prefetch import RunTimes, grown_prefetch
from ..core.states import OutcomeResult

if TYPE_CHECKING:
    from .execution import Finished, Running


class OutcomeMetrics(Protocol):
    """Told of every written outcome batch (``backwave_django.metrics.recorder.WorkerMetrics``)."""

    def outcomes_written(self, batch: Sequence[Finished], results: Sequence[OutcomeResult]) -> None: ...


@dataclass(frozen=True, kw_only=True)
class WorkerOptions:
    dispatch: Dispatch
    concurrency: int
    name: str | None = None
    burst: bool = False
    max_jobs: int | None = None
    shutdown_timeout: float = 30.0
    #: ``--give-up-after``: how long database faults may last before the worker exits (None: 60 s
    #: under ``burst``, else never; see ``faults``).
    give_up_after: float | None = None
    #: ``--metrics-port``: None (the default) costs nothing per job.
    metrics: OutcomeMetrics | None = None
    #: Leases held ready beyond the busy slots (None: ``BACKWAVE["PREFETCH"]``).
    prefetch: int | None = None


def make_worker_id(name: str | None) -> str:
    """``{name or host}:{pid}:{random}``."""
    return f"{name or socket.gethostname()}:{os.getpid()}:{secrets.token_hex(6)}"


def starting_prefetch(concurrency: int, settings: BackWaveSettings) -> int:
    """The default prefetch before it grows: enough to fill a claim batch (``MAX_CLAIM_BATCH``)
    beside the slots, but at least the concurrency and at most twice it (a prefetched job never
    waits for more than two jobs ahead of it per thread), and never more than a claim batch.
    See docs/worker.md#prefetch."""
    batch = settings.max_claim_batch
    return min(max(concurrency, batch - concurrency), 2 * concurrency, batch)


class Prefetch:
    """How many jobs a worker leases beyond its busy slots, as ``limit``: the one set by
    ``options.prefetch``, else by ``BACKWAVE["PREFETCH"]``, fixed; else :func:`starting_prefetch`,
    which ``grows`` (up to twice the concurrency) while the jobs are short (``core.prefetch``),
    from the run times the pump passes to :meth:`observe` and :meth:`update` as jobs finish."""

    def __init__(self, options: WorkerOptions, settings: BackWaveSettings) -> None:
        chosen = settings.prefetch if options.prefetch is None else options.prefetch
        self.concurrency = options.concurrency
        self.base = self.limit = starting_prefetch(self.concurrency, settings) if chosen is None else chosen
        #: Whether the limit follows the run times (then the job threads stamp them).
        self.grows = chosen is None and self.base < 2 * self.concurrency
        self.run_times = RunTimes()

    def observe(self, running: Running) -> None:
        """Count a finished job's run time: one whose handler started (a handler abandoned past
        its time limit has not returned: it has run until now, at least)."""
        if self.grows and running.handler_started:
            ended = running.handler_ended or time.time()
            self.run_times.add(max(0.0, ended - running.handler_started))

    def update(self) -> None:
        """Set the limit from the run times counted so far."""
        if self.grows:
            self.limit = grown_prefetch(self.base, self.concurrency, self.run_times.mean)
