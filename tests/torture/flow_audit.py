"""The flow-control oracles (docs/flow-control.md): no bucket ever exceeded its concurrency or its
rate, held jobs spent no attempt, every job was stored with the buckets its arguments give, and no
concurrency slot outlived its lease. Pure functions of the end state and the journals, like
``audit.py``; pinned on hand-built logs by ``test_flow_audit.py``.

**What a lease is, exactly.** An attempt holds its concurrency slot from its claim entry
(``Scheduled → Leased``, written by the claiming worker) to the job's next log entry, whatever that
is: an outcome or a graceful release by the worker, a cooperative cancel, or the sweep's
``lease-expiry`` entry. A worker killed or stopped mid-attempt writes nothing, so its attempt stays
Leased (and keeps its slot) until the sweep's entry ends it; a lease renewed by heartbeats writes no
entry at all. The store deletes the slot rows (``LimitLease``) in the same transaction that writes
that next entry, so the log's intervals are the slots' lifetimes.

**Why log ids order the intervals soundly.** Claims of one bucket take turns on the bucket's lock,
count the bucket's slots after taking it and write their claim entries after counting, all in one
transaction. Log ids come from one sequence, so for a claim entry B of a bucket (id ``Y``): a lease
A of the same bucket with ``claim id < Y`` was committed before B took the lock, and one whose end
entry has an id above ``Y`` had not ended when B counted (its end was numbered after B's count).
Every lease the sweep below counts live at ``Y`` was therefore in B's count: a breach here is a
breach in the store, never an artefact of the order. (A lease that ended before B counted but whose
end entry was numbered after ``Y`` cannot exist: numbering happens before commit.)

**Rates.** A claim at ``now`` counts the bucket's starts with ``started_at > now - period`` (no
upper bound), after taking the bucket's lock. Take any window ``(t - period, t]`` and, of the claims
recorded in it, the one whose transaction took the lock last: every other claim in the window was
committed before it counted and was recorded after ``t - period`` ≥ its own ``now - period``, so it
counted them all, and admitted itself only with fewer than ``rate`` of them. So no window of the
log's ``recorded_at`` (the claim's ``now``, the same instant its start row is stamped with) holds
more than ``rate`` claims of one bucket: checked here in whole microseconds, as the database
compares them.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .audit import LEASED, REQUEUE_EDGES, SCHEDULED, JobRow, Snapshot, Transition, Violation, _edges

Bucket = tuple[str, str]


@dataclass(frozen=True, slots=True)
class FlowLimit:
    """A limit's bounds as the torture declares them (never overridden during a run)."""

    concurrency: int | None = None
    rate: int | None = None
    period: float = 1.0


def _micros(seconds: float) -> int:
    return round(seconds * 1_000_000)


def _buckets(row: JobRow) -> tuple[Bucket, ...]:
    return tuple((str(name), str(bucket)) for name, bucket in row.limit_keys)


def lease_intervals(log: Sequence[Transition]) -> list[tuple[int, int | None]]:
    """Each attempt's slot as (claim entry id, id of the entry that ended it or None while it is
    still Leased). A claim whose next entry aged out of the log (an ordinal gap) is left out: when
    it ended is unknown, and guessing could only invent or hide an overlap."""
    intervals: list[tuple[int, int | None]] = []
    for index, entry in enumerate(log):
        if entry.state != LEASED:
            continue
        if index + 1 == len(log):
            intervals.append((entry.id, None))
        elif log[index + 1].ordinal == entry.ordinal + 1:
            intervals.append((entry.id, log[index + 1].id))
    return intervals


def check_flow_concurrency(snapshot: Snapshot, limits: Mapping[str, FlowLimit]) -> list[Violation]:
    """FlowConcurrency: per bucket of a limit with a concurrency, a sweep over log ids (+1 at each
    claim entry, -1 at the entry that ended it) never finds more than ``concurrency`` live at a
    claim (see the module's docstring for why the order is sound)."""
    marks: dict[Bucket, list[tuple[int, int, str]]] = defaultdict(list)
    for job, row in snapshot.jobs.items():
        bounded = [b for b in _buckets(row) if b[0] in limits and limits[b[0]].concurrency is not None]
        if not bounded:
            continue
        for start, end in lease_intervals(snapshot.transitions.get(job, [])):
            for bucket in bounded:
                marks[bucket].append((start, 1, job))
                if end is not None:
                    marks[bucket].append((end, -1, job))
    found: list[Violation] = []
    for bucket, steps in sorted(marks.items()):
        allowed = limits[bucket[0]].concurrency
        assert allowed is not None
        live = 0
        for entry_id, step, job in sorted(steps):
            live += step
            if step > 0 and live > allowed:
                found.append(
                    Violation(
                        "FlowConcurrency",
                        f"claim entry {entry_id} made {live} leases live in limit {bucket[0]!r}, bucket "
                        f"{bucket[1]!r} (concurrency {allowed})",
                        job,
                    )
                )
    return found


def check_flow_rate(snapshot: Snapshot, limits: Mapping[str, FlowLimit]) -> list[Violation]:
    """FlowRate: per bucket of a limit with a rate, no window ``(t - period, t]`` of the claim
    entries' ``recorded_at`` holds more than ``rate`` claims."""
    starts: dict[Bucket, list[tuple[int, str]]] = defaultdict(list)
    for job, row in snapshot.jobs.items():
        rated = [b for b in _buckets(row) if b[0] in limits and limits[b[0]].rate is not None]
        if not rated:
            continue
        for previous, entry in _edges(snapshot.transitions.get(job, [])):
            if previous is not None and (previous.state, entry.state) == (SCHEDULED, LEASED):
                for bucket in rated:
                    starts[bucket].append((_micros(entry.recorded_at), job))
    found: list[Violation] = []
    for bucket, claims in sorted(starts.items()):
        limit = limits[bucket[0]]
        assert limit.rate is not None
        period = _micros(limit.period)
        claims.sort()
        times = [t for t, _ in claims]
        reported_until = -1
        for t, _job in claims:
            last = bisect.bisect_right(times, t) - 1  # equal stamps are all in the window ending at t
            first = bisect.bisect_right(times, t - period)
            count = last - first + 1
            if count > limit.rate and last > reported_until:
                reported_until = last
                found.append(
                    Violation(
                        "FlowRate",
                        f"{count} claims in limit {bucket[0]!r}, bucket {bucket[1]!r} within "
                        f"{limit.period:g} s up to {t / 1e6:.6f} (rate {limit.rate})",
                        claims[last][1],
                    )
                )
    return found


def check_flow_attempts(snapshot: Snapshot) -> list[Violation]:
    """FlowAttempts: a flow-controlled job's attempt count is its number of claims since it was
    last requeued, so a job held back by a limit spent no attempt (a hold writes no entry and must
    not move the count)."""
    found: list[Violation] = []
    for job, row in snapshot.jobs.items():
        if not row.limit_keys and row.partition is None:
            continue
        log = snapshot.transitions.get(job, [])
        if not log or log[0].ordinal != 0:
            continue  # entries aged out: the claims cannot all be counted
        claims = 0
        for previous, entry in _edges(log):
            if previous is None:
                continue
            if (previous.state, entry.state) in REQUEUE_EDGES:
                claims = 0
            elif (previous.state, entry.state) == (SCHEDULED, LEASED):
                claims += 1
        if claims != row.attempt:
            found.append(
                Violation("FlowAttempts", f"attempt {row.attempt} after {claims} claim(s) in its current life", job)
            )
    return found


def check_flow_keys(snapshot: Snapshot, events: Iterable[dict[str, Any]]) -> list[Violation]:
    """FlowKeysStored: a job a client enqueued with an expected partition and buckets (journaled
    with the accepted enqueue) is stored with exactly those."""
    found: list[Violation] = []
    for event in events:
        if event.get("op") != "enqueue" or event.get("result") != "Ok" or "limit_keys" not in event:
            continue
        row = snapshot.jobs.get(str(event.get("job")))
        if row is None:
            continue  # EnqueueDurability reports it
        expected = tuple((str(n), str(b)) for n, b in event["limit_keys"])
        if _buckets(row) != expected or row.partition != event.get("partition"):
            found.append(
                Violation(
                    "FlowKeysStored",
                    f"stored partition {row.partition!r}, buckets {list(_buckets(row))}; the enqueue gave "
                    f"{event.get('partition')!r}, {[list(b) for b in expected]}",
                    row.job_id,
                )
            )
    return found


def check_flow_slots(snapshot: Snapshot, limits: Mapping[str, FlowLimit]) -> list[Violation]:
    """FlowSlotLeak: every stored slot (``LimitLease`` row) belongs to a Leased job of that bucket,
    and a Leased job holds one slot per concurrency-bounded bucket. After the drain every job has
    ended, so any slot left over is a leak that would hold its bucket's jobs back for ever."""
    found: list[Violation] = []
    held: dict[str, list[Bucket]] = defaultdict(list)
    for name, bucket, job in snapshot.limit_leases:
        held[job].append((name, bucket))
        row = snapshot.jobs.get(job)
        if row is None or row.state != LEASED or (name, bucket) not in _buckets(row):
            state = "missing" if row is None else f"state {row.state}"
            found.append(
                Violation("FlowSlotLeak", f"slot of limit {name!r}, bucket {bucket!r} held by a job ({state}) "
                          "that is not Leased in it", job)
            )
    for job, row in snapshot.jobs.items():
        if row.state != LEASED:
            continue
        wanted = sorted(b for b in _buckets(row) if b[0] in limits and limits[b[0]].concurrency is not None)
        if sorted(held.get(job, [])) != wanted:
            found.append(
                Violation("FlowSlotLeak", f"Leased job holds slots {sorted(held.get(job, []))}, expected {wanted}", job)
            )
    return found


def check_flow(
    snapshot: Snapshot, events: Iterable[dict[str, Any]], limits: Mapping[str, FlowLimit]
) -> list[Violation]:
    """Every flow-control oracle."""
    return (
        check_flow_concurrency(snapshot, limits)
        + check_flow_rate(snapshot, limits)
        + check_flow_attempts(snapshot)
        + check_flow_keys(snapshot, events)
        + check_flow_slots(snapshot, limits)
    )


def flow_figures(snapshot: Snapshot, limits: Mapping[str, FlowLimit]) -> dict[str, dict[str, int]]:
    """Per limit: its jobs, their claims, and the highest count the audit saw in one bucket (live
    leases at a claim for a concurrency, claims in one window for a rate) — how hard the run
    pressed on each bound. Partitioned jobs are counted under ``"(partitioned)"``."""
    figures: dict[str, dict[str, int]] = {
        name: {"jobs": 0, "claims": 0, "peak": 0} for name in [*limits, "(partitioned)"]
    }
    live: dict[Bucket, list[tuple[int, int]]] = defaultdict(list)
    starts: dict[Bucket, list[int]] = defaultdict(list)
    for job, row in snapshot.jobs.items():
        log = snapshot.transitions.get(job, [])
        claims = [entry for entry in log if entry.state == LEASED]
        names = [b[0] for b in _buckets(row) if b[0] in limits] + (["(partitioned)"] if row.partition else [])
        for name in names:
            figures[name]["jobs"] += 1
            figures[name]["claims"] += len(claims)
        for bucket in _buckets(row):
            limit = limits.get(bucket[0])
            if limit is None:
                continue
            if limit.concurrency is not None:
                for start, end in lease_intervals(log):
                    live[bucket].append((start, 1))
                    if end is not None:
                        live[bucket].append((end, -1))
            if limit.rate is not None:
                starts[bucket] += [_micros(entry.recorded_at) for entry in claims]
    for bucket, steps in live.items():
        count = 0
        for _, step in sorted(steps):
            count += step
            figures[bucket[0]]["peak"] = max(figures[bucket[0]]["peak"], count)
    for bucket, times in starts.items():
        times.sort()
        period = _micros(limits[bucket[0]].period)
        for index, t in enumerate(times):
            in_window = index - bisect.bisect_right(times, t - period) + 1
            figures[bucket[0]]["peak"] = max(figures[bucket[0]]["peak"], in_window)
    return figures
