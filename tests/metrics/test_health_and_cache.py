"""The /healthz rule and the count cache's interval (no database: the reads are stand-ins)."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

from backwave_django.metrics.counts import CountCache, Counts
from backwave_django.metrics.health import HEALTHY_HEARTBEATS, WorkerHealth

T = 1_000_000.0


def _health(last: float | None) -> WorkerHealth:
    return WorkerHealth(heartbeat_interval=10.0, last_heartbeat=lambda: last, started_at=T)


def test_a_worker_is_healthy_while_its_heartbeats_are_recent():
    assert _health(T).check(T + 5).healthy
    assert _health(T).check(T + HEALTHY_HEARTBEATS * 10).healthy
    verdict = _health(T).check(T + HEALTHY_HEARTBEATS * 10 + 1)
    assert not verdict.healthy
    assert "last heartbeat 31.0 s ago (limit 30.0 s)" in verdict.detail


def test_a_starting_worker_has_the_same_allowance_before_its_first_heartbeat():
    assert _health(None).check(T + 29).healthy
    verdict = _health(None).check(T + 31)
    assert not verdict.healthy
    assert "no heartbeat since the start" in verdict.detail


def _counts() -> Counts:
    return Counts(
        read_at=datetime(2026, 1, 1, tzinfo=UTC),
        live=(),
        ended=(),
        oldest_due=(),
        live_workers=0,
        observers=(),
    )


class _Reads:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, *, now: datetime) -> Counts:
        self.calls += 1
        return _counts()


def test_the_counts_are_read_at_most_once_per_interval():
    clock = [0.0]
    reads = _Reads()
    cache = CountCache(interval=lambda: timedelta(seconds=15), read=reads, monotonic=lambda: clock[0])

    cache.get()
    clock[0] = 14.9
    cache.get()
    assert reads.calls == 1
    clock[0] = 15.0
    cache.get()
    assert reads.calls == 2


def test_concurrent_scrapes_share_one_reading():
    reads = _Reads()
    release = threading.Event()

    def slow_read(*, now: datetime) -> Counts:
        release.wait(5)
        return reads(now=now)

    cache = CountCache(interval=lambda: timedelta(seconds=15), read=slow_read)
    threads = [threading.Thread(target=cache.get) for _ in range(8)]
    for thread in threads:
        thread.start()
    release.set()
    for thread in threads:
        thread.join(5)
    assert reads.calls == 1
