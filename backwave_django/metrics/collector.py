"""The periodic count (:mod:`.counts`) as Prometheus gauges, read when a scrape asks.

Imports prometheus_client: import this module only once
:func:`~backwave_django.metrics.prometheus_available` says it is installed.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector, CollectorRegistry

from . import names
from .counts import CountCache, Counts, state_label

#: The process's count cache: every registry built here shares it, so the view and a worker
#: endpoint in one process read the counts once per interval between them.
shared_cache = CountCache()


def _family(spec: names.MetricSpec) -> GaugeMetricFamily:
    return GaugeMetricFamily(spec.name, spec.help, labels=list(spec.labels))


class CountCollector(Collector):
    """Yields the gauges of :data:`~.names.COUNT_METRICS` from a :class:`CountCache`."""

    def __init__(self, cache: CountCache | None = None) -> None:
        self.cache = cache or shared_cache

    def describe(self) -> Iterator[GaugeMetricFamily]:
        # Without describe(), registering would call collect() and read the database.
        for spec in names.COUNT_METRICS:
            yield _family(spec)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        yield from families(self.cache.get())


def families(counts: Counts) -> Iterator[GaugeMetricFamily]:
    jobs = _family(names.JOBS)
    for queue, state, count in counts.live:
        jobs.add_metric([queue, state_label(state)], count)
    yield jobs
    ended = _family(names.JOBS_ENDED)
    for state, count in counts.ended:
        ended.add_metric([state_label(state)], count)
    yield ended
    oldest = _family(names.QUEUE_OLDEST_DUE_AGE)
    for queue, seconds in counts.oldest_due:
        oldest.add_metric([queue], seconds)
    yield oldest
    workers = _family(names.WORKERS_LIVE)
    workers.add_metric([], counts.live_workers)
    yield workers
    behind = _family(names.OBSERVER_POSITIONS_BEHIND)
    lag = _family(names.OBSERVER_LAG)
    for position in counts.observers:
        behind.add_metric([position.observer_id], position.behind)
        lag.add_metric([position.observer_id], position.lag_seconds)
    yield behind
    yield lag
    if counts.horizon is not None:  # PostgreSQL only: elsewhere neither family is served
        horizon_age = _family(names.DATABASE_HORIZON_AGE)
        if counts.horizon.age_seconds is not None:
            horizon_age.add_metric([], counts.horizon.age_seconds)
        yield horizon_age
        horizon_transactions = _family(names.DATABASE_HORIZON_AGE_TRANSACTIONS)
        horizon_transactions.add_metric([], counts.horizon.age_transactions)
        yield horizon_transactions
    leased = _family(names.LIMIT_LEASED)
    held = _family(names.LIMIT_HELD_BACK)
    rate = _family(names.LIMIT_STARTED_PER_SECOND)
    for limit in counts.limits:  # one sample per limit: buckets are never labels
        leased.add_metric([limit.name], limit.leased)
        held.add_metric([limit.name], limit.held_back)
        rate.add_metric([limit.name], limit.started_per_second)
    yield leased
    yield held
    yield rate
    read_at = _family(names.COUNTS_READ_AT)
    read_at.add_metric([], counts.read_at.timestamp())
    yield read_at


def count_registry(cache: CountCache | None = None) -> CollectorRegistry:
    """A registry with only the count gauges (what the Django view serves)."""
    registry = CollectorRegistry(auto_describe=True)
    registry.register(CountCollector(cache))
    return registry
