"""Flow control as operators see it: each limit's bounds, its use and the jobs it holds back
(docs/flow-control.md, "Watching limits").

:func:`limits_overview` reads every limit: its declared bounds, an operator's override (who, when),
the bounds in force, how many of its slots are leased, how many claims its rate windows hold now,
and its busiest buckets with the due Scheduled jobs each holds back. :func:`held_reason` says what
holds one due Scheduled job. Nothing here reads a clock: ``now`` is passed.

Costs, whatever the size of the job table:

- the limits are the small ``LimitSettings`` table; leases are one ``GROUP BY`` over
  ``LimitLease`` (one row per Leased job and limit); starts one ``GROUP BY`` over the rows of
  ``LimitStart`` inside each limit's window (its index ``backwave_limit_start_window``);
- the due jobs are counted per *lane*, never by reading each job's buckets: one ``GROUP BY lane``
  through the claim index ``backwave_job_claim`` (Scheduled jobs, by queue and lane), and then the
  buckets of one job per lane (a lane is one set of buckets, so one job names them all), by
  primary key. At most :data:`MAX_LANES` lanes, the fullest first, are read; past that the
  held counts are lower bounds (``LimitsOverview.complete`` says so).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import reduce
from operator import or_

from django.db.models import Count, Min, Q

from ..core.limits import PLAIN_LANE, LimitValues, describe_bucket
from ..core.states import JobState
from ..database import jobs_database
from ..models import JobRecord, LimitLease, LimitSettings, LimitStart

#: The busiest buckets an overview lists per limit.
TOP_BUCKETS = 10
#: The most lanes (sets of buckets with due jobs) an overview reads, the fullest first.
MAX_LANES = 5_000
#: Job rows read per statement when naming each lane's buckets.
_CHUNK = 500

Bucket = tuple[str, str]


@dataclass(frozen=True, slots=True)
class BucketUse:
    """One bucket of a limit, right now."""

    name: str
    bucket: str
    #: Leased jobs in the bucket (its concurrency slots in use).
    leased: int
    #: Claims inside the limit's current rate window (0 for a limit without a rate).
    started: int
    #: Due Scheduled jobs in the bucket.
    due: int
    #: Whether the bucket admits no claim now (at its concurrency or its rate, or the limit is
    #: neither declared nor overridden).
    full: bool

    @property
    def held(self) -> int:
        """The due Scheduled jobs this bucket holds back (all of them while it is full)."""
        return self.due if self.full else 0

    def describe(self) -> str:
        """``"limit stripe, bucket acme"``."""
        return describe_bucket(self.name, self.bucket)


@dataclass(frozen=True, slots=True)
class LimitOverview:
    """One limit: its bounds, who overrode them, and its use summed over its buckets."""

    name: str
    declared: LimitValues | None
    declared_at: datetime | None
    override: LimitValues | None
    overridden_by: str | None
    overridden_at: datetime | None
    #: What claims obey: the override, else the declaration; None holds every job of the limit.
    in_force: LimitValues | None
    leased: int
    started: int
    due: int
    held: int
    #: Buckets with a lease, a start in the window or a due job.
    buckets_in_use: int
    #: The busiest of them (full ones first, then by use), at most ``TOP_BUCKETS``.
    buckets: tuple[BucketUse, ...]

    @property
    def started_per_second(self) -> float:
        """Claims in the current window over the window's length (0 without a rate)."""
        if self.in_force is None or self.in_force.rate is None:
            return 0.0
        return self.started / self.in_force.period


@dataclass(frozen=True, slots=True)
class LimitsOverview:
    limits: tuple[LimitOverview, ...]
    #: False when more than ``MAX_LANES`` lanes hold due jobs: the held counts are lower bounds.
    complete: bool


@dataclass(frozen=True, slots=True)
class Hold:
    """What holds one due Scheduled job: a full bucket, or a limit nothing declares."""

    name: str
    bucket: str
    declared: bool
    text: str


def _settings(using: str, names: Iterable[str] | None = None) -> dict[str, LimitSettings]:
    rows = LimitSettings.objects.using(using).order_by("name")
    if names is not None:
        rows = rows.filter(name__in=list(names))
    return {row.name: row for row in rows}


def _leased(using: str, buckets: Sequence[Bucket] | None = None) -> dict[Bucket, int]:
    rows = LimitLease.objects.using(using).order_by()
    if buckets is not None:
        rows = rows.filter(_bucket_filter(buckets))
    counted = rows.values_list("name", "bucket").annotate(n=Count("*"))
    return {(name, bucket): n for name, bucket, n in counted}


def _started(
    using: str, windows: dict[str, LimitValues], now: datetime, buckets: Sequence[Bucket] | None = None
) -> dict[Bucket, int]:
    """Starts per bucket inside each rate-bounded limit's window ``(now - period, ...)``."""
    arms = [
        Q(name=name, started_at__gt=now - timedelta(seconds=values.period))
        for name, values in windows.items()
        if values.rate is not None
    ]
    if not arms:
        return {}
    rows = LimitStart.objects.using(using).order_by().filter(reduce(or_, arms))
    if buckets is not None:
        rows = rows.filter(_bucket_filter(buckets))
    counted = rows.values_list("name", "bucket").annotate(n=Count("*"))
    return {(name, bucket): n for name, bucket, n in counted}


def _bucket_filter(buckets: Sequence[Bucket]) -> Q:
    return reduce(or_, (Q(name=name, bucket=bucket) for name, bucket in buckets), Q(pk__in=[]))


def _due_lanes(using: str, now: datetime) -> tuple[dict[Bucket, int], bool]:
    """Due Scheduled jobs per bucket, counted per lane; and whether every lane was read."""
    lanes = list(
        JobRecord.objects.using(using)
        .filter(state=JobState.SCHEDULED, due_time__lte=now)
        .filter(lane__gt=PLAIN_LANE)
        .order_by()
        .values_list("lane")
        .annotate(n=Count("*"), first=Min("sequence"))
        .order_by("-n", "lane")[: MAX_LANES + 1]
    )
    complete = len(lanes) <= MAX_LANES
    lanes = lanes[:MAX_LANES]
    count_of = {first: n for _, n, first in lanes}
    firsts = list(count_of)
    due: dict[Bucket, int] = defaultdict(int)
    for start in range(0, len(firsts), _CHUNK):
        rows = JobRecord.objects.using(using).filter(sequence__in=firsts[start : start + _CHUNK])
        for sequence, keys in rows.values_list("sequence", "limit_keys"):
            for name, bucket in keys or ():
                due[(name, bucket)] += count_of[sequence]
    return dict(due), complete


def _full(values: LimitValues | None, leased: int, started: int) -> bool:
    if values is None:
        return True
    at_concurrency = values.concurrency is not None and leased >= values.concurrency
    at_rate = values.rate is not None and started >= values.rate
    return at_concurrency or at_rate


def _busiest_first(use: BucketUse, values: LimitValues | None) -> tuple[bool, float, int, str]:
    ratios = [0.0]
    if values is not None and values.concurrency is not None:
        ratios.append(use.leased / values.concurrency)
    if values is not None and values.rate is not None:
        ratios.append(use.started / values.rate)
    return (not use.full, -max(ratios), -use.held, use.bucket)


def limits_overview(*, now: datetime, top: int = TOP_BUCKETS) -> LimitsOverview:
    """Every limit (declared, overridden, or named by a job or a lease) with its use now and its
    ``top`` busiest buckets, sorted by name (see the module docstring for the cost)."""
    using = jobs_database()
    settings = _settings(using)
    in_force = {name: row.values_in_force() for name, row in settings.items()}
    leased = _leased(using)
    started = _started(using, {name: v for name, v in in_force.items() if v is not None}, now)
    due, complete = _due_lanes(using, now)
    per_limit: dict[str, list[BucketUse]] = defaultdict(list)
    for name, bucket in set(leased) | set(started) | set(due):
        key = (name, bucket)
        values = in_force.get(name)
        per_limit[name].append(
            BucketUse(
                name,
                bucket,
                leased.get(key, 0),
                started.get(key, 0),
                due.get(key, 0),
                _full(values, leased.get(key, 0), started.get(key, 0)),
            )
        )
    limits = []
    for name in sorted(set(settings) | set(per_limit)):
        row = settings.get(name)
        values = in_force.get(name)
        uses = sorted(per_limit.get(name, []), key=lambda use: _busiest_first(use, values))
        limits.append(
            LimitOverview(
                name=name,
                declared=row.declared_values() if row else None,
                declared_at=row.declared_at if row else None,
                override=row.override_values() if row else None,
                overridden_by=row.overridden_by if row and row.overridden else None,
                overridden_at=row.overridden_at if row and row.overridden else None,
                in_force=values,
                leased=sum(use.leased for use in uses),
                started=sum(use.started for use in uses),
                due=sum(use.due for use in uses),
                held=sum(use.held for use in uses),
                buckets_in_use=len(uses),
                buckets=tuple(uses[:top]),
            )
        )
    return LimitsOverview(tuple(limits), complete)


def held_reason(job: JobRecord, *, now: datetime) -> Hold | None:
    """What holds ``job`` now: the first of its buckets (in name order) that admits no claim, or a
    limit nothing declares. None for a job that is not a due Scheduled job under a limit, or
    whose buckets all admit it (it waits for a worker, not for a limit)."""
    keys: list[Bucket] = [(str(name), str(bucket)) for name, bucket in (job.limit_keys or ())]
    if job.state != JobState.SCHEDULED or job.due_time > now or not keys:
        return None
    using = jobs_database()
    settings = _settings(using, {name for name, _ in keys})
    in_force = {name: row.values_in_force() for name, row in settings.items()}
    leased = _leased(using, keys)
    started = _started(using, {n: v for n, v in in_force.items() if v is not None}, now, keys)
    for name, bucket in keys:
        values = in_force.get(name)
        where = describe_bucket(name, bucket)
        if values is None:
            text = f"held: limit {name} is not declared by any worker (and no operator overrides it)"
            return Hold(name, bucket, False, text)
        used, begun = leased.get((name, bucket), 0), started.get((name, bucket), 0)
        if values.concurrency is not None and used >= values.concurrency:
            return Hold(name, bucket, True, f"held by {where} ({used} / {values.concurrency} leased)")
        if values.rate is not None and begun >= values.rate:
            text = f"held by {where} ({begun} / {values.rate} started in the last {values.period:g} s)"
            return Hold(name, bucket, True, text)
    return None
