"""The counts behind the metrics' gauges: jobs per queue and state, workers, observer positions.

:func:`read_counts` reads them all in a handful of queries, cheap on a table of millions of
retained rows (``metrics.counts.CountCache`` reads it at most once per
``BACKWAVE["METRICS_COUNT_INTERVAL"]`` per process):

- the live states (Scheduled, Awaiting Parent, Leased) are counted exactly, one ``GROUP BY
  queue`` per state, each through that state's partial index (``backwave_job_claim``,
  ``backwave_job_awaiting``, ``backwave_job_leased``): an index-only scan whose cost follows the
  backlog, never the retained history;
- the ended states are not counted in full on PostgreSQL: the planner's row estimate for
  ``state = X`` (``EXPLAIN``, nothing executed) comes from the table statistics autovacuum keeps.
  That estimate never reads below one row, so a state estimated below ``EXACT_BELOW`` rows is
  counted instead, reading at most ``EXACT_BELOW`` index entries: no jobs reads 0, and an alert
  on ``quarantined > 0`` means one. Elsewhere they are counted exactly (a scan of the terminal
  rows; see docs/operations.md, "Metrics");
- the oldest due job per queue is the dashboard's read (:func:`.dashboard.queue_latency`), over
  the Scheduled partial index;
- workers and observers are small tables; each observer's lag is one lookup through the
  transition log's position index;
- the flow-control limits: :func:`.limits.limits_overview` with no buckets listed (the limits
  table, one ``GROUP BY`` over leases, one over the starts in each window, and the due jobs
  counted per lane through the claim index ``backwave_job_claim``);
- the horizon (PostgreSQL): one statement over the catalogs for the oldest transaction or
  snapshot holding back vacuum of the job tables (:func:`.horizon.read_horizon`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

from django.db import connections
from django.db.models import Count, IntegerField, Value

from ..core.states import JobState
from ..database import jobs_database
from ..models import JobRecord, JobTransition, LogSequencer, Observer, WorkerNode
from .dashboard import queue_latency, worker_stale_after
from .horizon import Horizon, read_horizon
from .limits import limits_overview

#: The job table, as the statements below name it.
JOBS = JobRecord._meta.db_table

#: The states counted exactly, per queue (each has a partial index).
LIVE_STATES = (JobState.SCHEDULED, JobState.AWAITING_PARENT, JobState.LEASED)
#: The states estimated on PostgreSQL (their rows are the retained history).
ENDED_STATES = (JobState.SUCCEEDED, JobState.CANCELLED, JobState.DEAD_LETTERED, JobState.QUARANTINED)

#: The planner's estimate of the rows in one state (PostgreSQL; nothing is executed).
ESTIMATE_STATE_ROWS = f"EXPLAIN (FORMAT JSON) SELECT 1 FROM {JOBS} WHERE state = %(state)s"
#: The rows in one state, counted up to ``limit`` (through the terminal partial index).
COUNT_STATE_ROWS_UP_TO = (
    f"SELECT count(*) FROM (SELECT 1 FROM {JOBS} WHERE state = %(state)s LIMIT %(limit)s) AS up_to"
)
#: An ended state the planner estimates below this many rows is counted (up to this many) instead.
EXACT_BELOW = 1_000


@dataclass(frozen=True, slots=True)
class ObserverPosition:
    observer_id: str
    behind: int
    lag_seconds: float


@dataclass(frozen=True, slots=True)
class LimitCount:
    """One flow-control limit's gauges (per limit only: buckets are never labels)."""

    name: str
    leased: int
    held_back: int
    started_per_second: float


@dataclass(frozen=True, slots=True)
class Counts:
    """One reading of the counts, at ``read_at``."""

    read_at: datetime
    #: (queue, state, jobs) for the live states, exact; pairs without jobs are left out.
    live: tuple[tuple[str, JobState, int], ...]
    #: (state, jobs) for every ended state.
    ended: tuple[tuple[JobState, int], ...]
    #: (queue, seconds) for every queue with a due Scheduled job.
    oldest_due: tuple[tuple[str, float], ...]
    live_workers: int
    observers: tuple[ObserverPosition, ...]
    #: What holds back the jobs database's vacuum horizon; None off PostgreSQL.
    horizon: Horizon | None = None
    #: Every flow-control limit, by name.
    limits: tuple[LimitCount, ...] = ()


def read_counts(*, now: datetime) -> Counts:
    """Read every count once (a handful of queries; see the module docstring for their cost)."""
    using = jobs_database()
    vendor = connections[using].vendor
    ended = _estimate_ended(using) if vendor == "postgresql" else _count_ended(using)
    return Counts(
        read_at=now,
        live=_count_live(using),
        ended=ended,
        oldest_due=tuple((entry.queue, entry.age.total_seconds()) for entry in queue_latency(now=now)),
        live_workers=WorkerNode.objects.using(using)
        .filter(last_seen_at__gte=now - worker_stale_after())
        .count(),
        observers=_observer_positions(using, now),
        horizon=read_horizon(using),
        limits=tuple(
            LimitCount(limit.name, limit.leased, limit.held, limit.started_per_second)
            for limit in limits_overview(now=now, top=0).limits
        ),
    )


def _count_live(using: str) -> tuple[tuple[str, JobState, int], ...]:
    """One statement: a ``GROUP BY queue`` per live state, joined with ``UNION ALL`` (each arm on
    its own state, so each can use that state's partial index)."""
    arms = [
        JobRecord.objects.using(using)
        .filter(state=state)
        .order_by()
        .values_list("queue")
        .annotate(at_state=Value(int(state), output_field=IntegerField()), jobs=Count("*"))
        for state in LIVE_STATES
    ]
    rows = arms[0].union(*arms[1:], all=True)
    return tuple(sorted((queue, JobState(state), jobs) for queue, state, jobs in rows))


def _estimate_ended(using: str) -> tuple[tuple[JobState, int], ...]:
    """Each ended state's rows: the planner's estimate, or a count when it estimates few.

    A count that reaches ``EXACT_BELOW`` means the statistics are stale; it is still the closer
    figure (the table holds at least that many), so it is the one reported.
    """
    readings = []
    with connections[using].cursor() as cursor:
        for state in ENDED_STATES:
            cursor.execute(ESTIMATE_STATE_ROWS, {"state": int(state)})
            (plan,) = cursor.fetchone()
            if isinstance(plan, str):
                plan = json.loads(plan)
            rows = int(plan[0]["Plan"]["Plan Rows"])
            if rows < EXACT_BELOW:
                cursor.execute(COUNT_STATE_ROWS_UP_TO, {"state": int(state), "limit": EXACT_BELOW})
                (rows,) = cursor.fetchone()
            readings.append((state, int(rows)))
    return tuple(readings)


def _count_ended(using: str) -> tuple[tuple[JobState, int], ...]:
    found = dict(
        JobRecord.objects.using(using)
        .filter(state__in=ENDED_STATES)
        .order_by()
        .values_list("state")
        .annotate(jobs=Count("*"))
    )
    return tuple((state, found.get(int(state), 0)) for state in ENDED_STATES)


def _observer_positions(using: str, now: datetime) -> tuple[ObserverPosition, ...]:
    last = LogSequencer.objects.using(using).filter(pk=1).values_list("last_position", flat=True).first()
    last = -1 if last is None else int(last)
    positions = []
    for observer_id, cursor in (
        Observer.objects.using(using).order_by("observer_id").values_list("observer_id", "cursor")
    ):
        behind = max(0, last - cursor)
        lag = 0.0
        if behind:
            oldest = (
                JobTransition.objects.using(using)
                .filter(position__gt=cursor)
                .order_by("position")
                .values_list("recorded_at", flat=True)
                .first()
            )
            lag = max(0.0, (now - oldest).total_seconds()) if oldest is not None else 0.0
        positions.append(ObserverPosition(observer_id, behind, lag))
    return tuple(positions)
