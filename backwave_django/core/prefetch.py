"""The default prefetch for short jobs: how many jobs a worker may lease beyond its busy threads
when the settings leave that to it. See docs/worker.md#prefetch.

A prefetched job waits in the worker for a thread. The default prefetch is small because, for
jobs of seconds, that wait is long, and a job waiting in one worker is a job no idle worker can
take. For jobs of a few milliseconds the wait is short, and a larger prefetch keeps the next
claim under way while jobs are still queued: fewer, fuller claims and outcome writes.
"""

from __future__ import annotations

#: How long the last prefetched job may be expected to wait for a thread (the prefetch times the
#: mean run time, over the threads): the prefetch grows only as far as this allows.
PREFETCH_WAIT_SECONDS = 0.01
#: The weight of each finished job in the running mean of run times (about the last 20 jobs).
RUN_TIME_WEIGHT = 0.05


def grown_prefetch(base: int, concurrency: int, mean_run_seconds: float | None) -> int:
    """The prefetch for jobs that run ``mean_run_seconds`` on average (None: not known yet): as
    many as keep the last one's expected wait, ``prefetch * mean / concurrency``, within
    :data:`PREFETCH_WAIT_SECONDS`, at most twice the concurrency and never below ``base``."""
    ceiling = 2 * concurrency
    if mean_run_seconds is None or base >= ceiling:
        return base
    if mean_run_seconds <= 0:
        return ceiling
    return max(base, min(ceiling, int(PREFETCH_WAIT_SECONDS * concurrency / mean_run_seconds)))


class RunTimes:
    """The running mean of the run times of the jobs a worker finished, each weighted
    :data:`RUN_TIME_WEIGHT` against those before it (the first is the mean)."""

    __slots__ = ("mean",)

    def __init__(self) -> None:
        self.mean: float | None = None

    def add(self, seconds: float) -> None:
        mean = self.mean
        self.mean = seconds if mean is None else mean + RUN_TIME_WEIGHT * (seconds - mean)
