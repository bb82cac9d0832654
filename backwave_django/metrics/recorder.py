"""A worker process's own metrics: outcome counters and the run-time and latency histograms.

The pump hands each written outcome batch to :meth:`WorkerMetrics.outcomes_written` (one call per
batch, on the pump thread, after the write): no database read, no work at all when metrics are
off. The handler's start and end instants come from the executor, which stamps them only when
the worker was given a metrics recorder (``WorkerOptions.metrics``).

Imports prometheus_client: import this module only once
:func:`~backwave_django.metrics.prometheus_available` says it is installed.
"""

from __future__ import annotations

import time
from collections import Counter as Tally
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from prometheus_client import Counter, Gauge, Histogram
from prometheus_client.registry import CollectorRegistry

from ..core.outcomes import outcome_name
from ..core.states import OutcomeResult
from ..registry import get
from . import names

if TYPE_CHECKING:
    from ..worker.execution import Finished

#: Run times: from 5 ms to an hour.
RUN_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900, 3600)
#: Due-to-start latency: from 5 ms to an hour.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900, 3600)
#: The wire-name label of a job no registered definition has (a quarantined job's name, say):
#: wire names in labels are limited to the registered ones, so a stray payload cannot grow the
#: label set.
UNREGISTERED = "unregistered"


def result_label(finished: Finished, result: OutcomeResult) -> str:
    """How an attempt ended, as the ``result`` label."""
    if result is OutcomeResult.STALE_LEASE:
        return "fenced"
    return outcome_name(finished.outcome)


def _metric(spec: names.MetricSpec, registry: CollectorRegistry, **extra: object) -> object:
    kinds = {"counter": Counter, "gauge": Gauge, "histogram": Histogram}
    name = spec.name.removesuffix("_total") if spec.kind == "counter" else spec.name
    return kinds[spec.kind](name, spec.help, list(spec.labels), registry=registry, **extra)


class WorkerMetrics:
    """The metrics of one worker process, in a registry of their own (:attr:`registry`)."""

    def __init__(self, *, registry: CollectorRegistry | None = None, wall: Callable[[], float] = time.time):
        self.registry = registry or CollectorRegistry(auto_describe=True)
        self.wall = wall
        r = self.registry
        self.outcomes: Counter = _metric(names.JOB_OUTCOMES, r)  # type: ignore[assignment]
        self.timeouts: Counter = _metric(names.JOB_TIMEOUTS, r)  # type: ignore[assignment]
        self.run: Histogram = _metric(names.JOB_RUN, r, buckets=RUN_BUCKETS)  # type: ignore[assignment]
        self.latency: Histogram = _metric(  # type: ignore[assignment]
            names.JOB_START_LATENCY, r, buckets=LATENCY_BUCKETS
        )
        self.up: Gauge = _metric(names.WORKER_UP, r)  # type: ignore[assignment]
        self.last_heartbeat: Gauge = _metric(names.WORKER_LAST_HEARTBEAT, r)  # type: ignore[assignment]
        self.running: Gauge = _metric(names.WORKER_RUNNING, r)  # type: ignore[assignment]
        self.slots: Gauge = _metric(names.WORKER_SLOTS, r)  # type: ignore[assignment]
        self.up.set(1)
        self.wire_labels: dict[str, str] = {}

    def watch(
        self, *, running: Callable[[], int], slots: int, last_heartbeat: Callable[[], float | None]
    ) -> None:
        """Read the worker's running jobs and last heartbeat when scraped (nothing per job)."""
        self.running.set_function(running)
        self.slots.set(slots)
        self.last_heartbeat.set_function(lambda: last_heartbeat() or 0.0)

    def wire_label(self, wire_name: str) -> str:
        label = self.wire_labels.get(wire_name)
        if label is None:
            label = wire_name if get(wire_name) is not None else UNREGISTERED
            self.wire_labels[wire_name] = label
        return label

    def outcomes_written(self, batch: Sequence[Finished], results: Sequence[OutcomeResult]) -> None:
        """Count a written batch's outcomes and observe its run times and start latencies."""
        observed_at = self.wall()
        tally: Tally[tuple[str, str, str]] = Tally()
        timeouts: Tally[tuple[str, str]] = Tally()
        for finished, result in zip(batch, results, strict=True):
            running = finished.running
            claimed = running.claimed
            wire = self.wire_label(claimed.wire_name)
            tally[(wire, claimed.queue, result_label(finished, result))] += 1
            if running.timed_out:
                timeouts[(wire, claimed.queue)] += 1
            started = running.handler_started
            if started:  # zero: the handler never started (an unroutable job)
                ended = running.handler_ended or observed_at  # zero: abandoned past its timeout
                self.run.labels(wire).observe(max(0.0, ended - started))
                self.latency.labels(claimed.queue).observe(max(0.0, started - claimed.due_time.timestamp()))
        for outcome_labels, count in tally.items():
            self.outcomes.labels(*outcome_labels).inc(count)
        for timeout_labels, count in timeouts.items():
            self.timeouts.labels(*timeout_labels).inc(count)
