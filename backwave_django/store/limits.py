"""Flow control's bookkeeping (docs/store.md, "The flow claim"): the bounds workers declare and
the bounds in force, what a bucket has used, the slots and starts a claim records, and freeing a
job's slots when its lease ends.

Usage is never stored as a number: a bucket's Leased count is its :class:`LimitLease` rows and its
starts in the window are its :class:`LimitStart` rows, read by the claim after it has locked the
bucket (``store/flow.py``), so the counts are exact under any number of claimers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from functools import reduce
from operator import or_
from typing import cast

from django.db.models import Count, Max, Q

from ..core.fairness import Bucket, room_of
from ..core.limits import CLOCK_MARGIN_SECONDS, LimitKeys, LimitValues, in_force
from ..core.validation import require_aware, validate_queue_name
from ..database import jobs_database
from ..models import LimitLease, LimitSettings, LimitStart
from ._tx import atomic_retrying, notify

#: The bounds in force of each limit a claim looks at; None: neither declared nor overridden (held).
Bounds = dict[str, LimitValues | None]


def declare_limits(values: Mapping[str, LimitValues], *, now: datetime) -> None:
    """Store the bounds the loaded job definitions declare (``registry.declared_limits``), one row
    per limit name; an operator's override, stored beside them, is never touched. A worker calls
    it at start; the next claim obeys the new declaration (an override still wins while set)."""
    require_aware("now", now)
    if not isinstance(values, Mapping):
        raise TypeError(
            f"values must be a mapping of limit names to LimitValues, got {type(values).__name__}"
        )
    declared: list[tuple[str, LimitValues]] = []
    for name, value in values.items():
        validate_queue_name(name, "limit name")
        if not isinstance(value, LimitValues):
            raise TypeError(f"values[{name!r}] must be a LimitValues, got {type(value).__name__}")
        declared.append((name, value))
    if not declared:
        return
    using = jobs_database()

    def body() -> None:
        for name, value in sorted(declared, key=lambda entry: entry[0]):
            LimitSettings.objects.using(using).update_or_create(
                name=name,
                defaults={
                    "declared_concurrency": value.concurrency,
                    "declared_rate": value.rate,
                    "declared_period": value.period,
                    "declared_at": now,
                },
            )

    atomic_retrying(using, body)


#: The window of a rate whose period is not stored (seconds).
DEFAULT_PERIOD = 1.0

#: A bucket's use as a claim reads it: its Leased count and its starts in the window in force.
Usage = dict[Bucket, tuple[int, int]]

#: A :class:`LimitSettings` row as the claim reads it: declared concurrency, rate and period,
#: overridden, override concurrency, rate and period.
SettingsRow = tuple[int | None, int | None, float | None, bool, int | None, int | None, float | None]

_SETTINGS_COLUMNS = (
    "declared_concurrency",
    "declared_rate",
    "declared_period",
    "overridden",
    "override_concurrency",
    "override_rate",
    "override_period",
)


def _values(concurrency: int | None, rate: int | None, period: float | None) -> LimitValues | None:
    if concurrency is None and rate is None:
        return None
    return LimitValues(concurrency, rate, period if period is not None and period > 0 else DEFAULT_PERIOD)


def settings_in_force(row: SettingsRow) -> tuple[LimitValues | None, bool]:
    """A limit's bounds in force from its settings row (``core.limits.in_force``: an override wins
    over the declaration; None when it has neither: its jobs are held), and whether they are the
    override's (whose period counts its starts)."""
    d_conc, d_rate, d_period, overridden, o_conc, o_rate, o_period = row
    declared = _values(d_conc, d_rate, d_period)
    override = _values(o_conc, o_rate, d_period if o_period is None else o_period) if overridden else None
    return in_force(declared, override), override is not None


def bounds_in_force(using: str, names: Iterable[str]) -> Bounds:
    """The bounds each named limit is held to now (:func:`settings_in_force`)."""
    wanted = sorted(set(names))
    bounds: Bounds = dict.fromkeys(wanted)
    if not wanted:
        return bounds
    rows = LimitSettings.objects.using(using).filter(name__in=wanted).values_list("name", *_SETTINGS_COLUMNS)
    for name, *row in rows:
        bounds[name] = settings_in_force(cast(SettingsRow, tuple(row)))[0]
    return bounds


def _any_bucket(buckets: Iterable[Bucket]) -> Q:
    return reduce(or_, (Q(name=name, bucket=bucket) for name, bucket in buckets))


def bucket_usage(using: str, buckets: Sequence[Bucket], bounds: Bounds, now: datetime) -> Usage:
    """Each bucket's use (:data:`Usage`): its :class:`LimitLease` rows (counted for a limit with a
    concurrency bound) and its :class:`LimitStart` rows with ``started_at > now - period`` (for a
    limit with a rate bound). Exact only when the buckets are locked (``store/flow.py``)."""
    leased: dict[Bucket, int] = {}
    started: dict[Bucket, int] = {}
    concurrent = [b for b in buckets if (v := bounds.get(b[0])) is not None and v.concurrency is not None]
    if concurrent:
        for name, bucket, n in (
            LimitLease.objects.using(using)
            .filter(_any_bucket(concurrent))
            .values("name", "bucket")
            .annotate(n=Count("id"))
            .values_list("name", "bucket", "n")
        ):
            leased[(name, bucket)] = n
    rated = [(b, v.period) for b in buckets if (v := bounds.get(b[0])) is not None and v.rate is not None]
    if rated:
        window = reduce(
            or_,
            (
                Q(name=name, bucket=bucket, started_at__gt=now - timedelta(seconds=period))
                for (name, bucket), period in rated
            ),
        )
        for name, bucket, n in (
            LimitStart.objects.using(using)
            .filter(window)
            .values("name", "bucket")
            .annotate(n=Count("id"))
            .values_list("name", "bucket", "n")
        ):
            started[(name, bucket)] = n
    return {b: (leased.get(b, 0), started.get(b, 0)) for b in buckets}


def bucket_room(buckets: Sequence[Bucket], bounds: Bounds, usage: Usage) -> dict[Bucket, int | None]:
    """How many more jobs each bucket admits now: its bounds in force less its use (``usage``);
    0 for a bucket of a limit not in force (held), None for one that bounds nothing."""
    room: dict[Bucket, int | None] = {}
    for b in buckets:
        values = bounds.get(b[0])
        if values is None:
            room[b] = 0
        else:
            room[b] = room_of((values.concurrency, values.rate), *usage.get(b, (0, 0)))
    return room


def counted_limits(bounds: Bounds) -> tuple[set[str], set[str]]:
    """Which limits in ``bounds`` a claimed job uses a unit of: a slot of each concurrency-bounded
    one, a start of each rate-bounded one (a limit not in force takes neither)."""
    slots = {name for name, values in bounds.items() if values is not None and values.concurrency is not None}
    starts = {name for name, values in bounds.items() if values is not None and values.rate is not None}
    return slots, starts


def usage_rows(
    claimed: Sequence[tuple[int, LimitKeys]], bounds: Bounds
) -> tuple[list[tuple[str, str, int]], list[tuple[str, str]]]:
    """What the claimed jobs (``(sequence, buckets)``) use (:func:`counted_limits`): a slot
    ``(name, bucket, sequence)`` per concurrency-bounded limit of each job, and a start
    ``(name, bucket)`` per rate-bounded one."""
    slot_limits, start_limits = counted_limits(bounds)
    slots = [
        (name, bucket, sequence) for sequence, keys in claimed for name, bucket in keys if name in slot_limits
    ]
    starts = [(name, bucket) for _, keys in claimed for name, bucket in keys if name in start_limits]
    return slots, starts


def record_claims(
    using: str, claimed: Sequence[tuple[int, LimitKeys]], bounds: Bounds, now: datetime
) -> None:
    """Write what the claimed jobs use (:func:`usage_rows`): a :class:`LimitLease` per slot, a
    :class:`LimitStart` per start; and drop the starts of those buckets that no window can count
    any more: older than the longest period of any limit and ``core.limits.CLOCK_MARGIN_SECONDS``
    (a claimer whose clock is behind still counts them). PostgreSQL's flow claim does the same in
    its lease statement (sql/flow.sql, FLOW_LEASE)."""
    slots, starts = usage_rows(claimed, bounds)
    if slots:
        LimitLease.objects.using(using).bulk_create(
            [
                LimitLease(name=name, bucket=bucket, job=sequence, acquired_at=now)
                for name, bucket, sequence in slots
            ]
        )
    if starts:
        LimitStart.objects.using(using).bulk_create(
            [LimitStart(name=name, bucket=bucket, started_at=now) for name, bucket in starts]
        )
        horizon = now - timedelta(seconds=longest_period(using) + CLOCK_MARGIN_SECONDS)
        LimitStart.objects.using(using).filter(_any_bucket(set(starts)), started_at__lte=horizon).delete()


def longest_period(using: str) -> float:
    """The longest window any limit has, declared or overridden (seconds; 1 when none is stored)."""
    found = LimitSettings.objects.using(using).aggregate(d=Max("declared_period"), o=Max("override_period"))
    periods: list[float] = [float(p) for p in (found["d"], found["o"]) if p is not None]
    return max(periods or [DEFAULT_PERIOD])


def next_opening(using: str, buckets: Sequence[Bucket], bounds: Bounds, now: datetime) -> datetime | None:
    """The earliest instant after ``now`` at which a rate-held bucket among ``buckets`` admits a
    claim again (its window slides past the start that fills it), or None if none is rate-held."""
    earliest: datetime | None = None
    for name, bucket in buckets:
        values = bounds.get(name)
        if values is None or values.rate is None:
            continue
        period = timedelta(seconds=values.period)
        window = list(
            LimitStart.objects.using(using)
            .filter(name=name, bucket=bucket, started_at__gt=now - period)
            .order_by("started_at")
            .values_list("started_at", flat=True)
        )
        if len(window) >= values.rate:
            opens = window[len(window) - values.rate] + period
            earliest = opens if earliest is None else min(earliest, opens)
    return earliest


def free_slots(using: str, jobs: Sequence[tuple[int, str]]) -> None:
    """A lease ended for each of ``jobs`` (``(sequence, queue)``, jobs of a lane other than 0):
    delete their :class:`LimitLease` rows, in the caller's transaction, and hint their queues'
    workers that a slot is free (PostgreSQL; delivered on commit)."""
    if not jobs:
        return
    freed = set(
        LimitLease.objects.using(using).filter(job__in=[s for s, _ in jobs]).values_list("job", flat=True)
    )
    if not freed:
        return
    LimitLease.objects.using(using).filter(job__in=sorted(freed)).delete()
    for queue in sorted({queue for sequence, queue in jobs if sequence in freed}):
        notify(using, queue)
