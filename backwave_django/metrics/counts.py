"""The periodic count behind the gauges, cached: read at most once per
``BACKWAVE["METRICS_COUNT_INTERVAL"]`` per process (:class:`CountCache`), however many scrapers
ask. The reading itself, and what each count costs, is the monitor's (``monitor/counts.py``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import timedelta

from .. import clock
from ..conf import get_settings
from ..core.states import JobState
from ..monitor.counts import Counts, ObserverPosition, read_counts

__all__ = ["CountCache", "Counts", "ObserverPosition", "read_counts", "state_label"]


def state_label(state: JobState) -> str:
    """A state as a label value: ``dead_lettered``."""
    return state.name.lower()


class CountCache:
    """The latest :class:`Counts`, read again only when older than the interval.

    Thread-safe: concurrent scrapes that find the counts stale wait for one reading instead of
    each running their own. ``interval`` defaults to ``BACKWAVE["METRICS_COUNT_INTERVAL"]``
    (read at each call, so a settings override applies).
    """

    def __init__(
        self,
        *,
        interval: Callable[[], timedelta] | None = None,
        read: Callable[..., Counts] = read_counts,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.interval = interval or (lambda: get_settings().metrics_count_interval)
        self.read = read
        self.monotonic = monotonic
        self.lock = threading.Lock()
        self.counts: Counts | None = None
        self.read_at_monotonic = 0.0

    def get(self) -> Counts:
        with self.lock:
            fresh_for = self.interval().total_seconds()
            if self.counts is None or self.monotonic() - self.read_at_monotonic >= fresh_for:
                self.counts = self.read(now=clock.now())
                self.read_at_monotonic = self.monotonic()
            return self.counts

    def clear(self) -> None:
        with self.lock:
            self.counts = None
