"""The flow claim: how a claim takes jobs from a queue holding jobs under limits or partitions
(docs/store.md, "The flow claim").

A queue is on this path while it has a Scheduled job whose lane is above 0
(``core.limits.lane_of``); plain-only queues never come here. In the claim's own transaction,
:func:`pick` surveys the queue (:class:`Survey`): finds its lanes (one probe per lane of the
claim index, past lane 0), locks their buckets in sorted order, reads the bounds in force, counts
each bucket's use and reads the first due plain jobs (lane 0); then it reads the first due jobs of
each lane whose every bucket has room (a held lane is never read) and chooses among them
(``core.fairness.choose``). The caller leases the chosen jobs on its own path and records what
they use (``limits.record_claims``; PostgreSQL's lease statement does both). Each backend supplies
the reads (:class:`FlowReads`): the portable one here, PostgreSQL's in ``store/postgres/flow.py``,
which sends its survey in one round trip.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar

from ..core.fairness import Candidate, admits, choose
from ..core.limits import PLAIN_LANE, LimitKeys, stored_limit_keys
from ..core.states import JobState
from ..core.validation import require_aware, require_queues
from ..database import jobs_database
from ..models import JobRecord, LimitBucket
from ._rows import lock_rows
from .limits import Bounds, Usage, bounds_in_force, bucket_room, bucket_usage, next_opening

_T = TypeVar("_T")


@dataclass
class Survey(Generic[_T]):
    """What a claim reads of a flow queue before it chooses: the lanes above 0 whose buckets it has
    locked (each with its buckets), the bounds in force of their limits, each bucket's use, and the
    first due jobs of the plain lane (0) and of any lane the backend read ahead (each in claim
    order, up to the claim's batch; a lane read ahead is only taken up to its room)."""

    lanes: list[tuple[int, LimitKeys]]
    bounds: Bounds
    usage: Usage
    fetched: dict[int, list[tuple[Candidate, _T]]]


class FlowReads(Protocol[_T]):
    """What a backend reads for :func:`pick`; ``_T`` is what it keeps of each fetched job."""

    def survey(self, using: str, queue: str, take: int, now: datetime) -> Survey[_T]:
        """Lock the buckets of the queue's lanes (sorted, until the transaction ends), then read the
        :class:`Survey` (the counts after the locks), with up to ``take`` jobs of the plain lane."""
        ...

    def fetch(
        self, using: str, queue: str, takes: Mapping[int, int], now: datetime
    ) -> dict[int, list[tuple[Candidate, _T]]]:
        """Up to ``takes[lane]`` due jobs of each lane in claim order, locked (skipping locked ones)."""
        ...


@dataclass
class Picked(Generic[_T]):
    """What :func:`pick` chose: the jobs in the order taken, with their buckets, the bounds, and
    the lanes above 0 it admitted (a backend may read them ahead at the next claim)."""

    jobs: list[tuple[Candidate, _T, LimitKeys]] = field(default_factory=list)
    bounds: Bounds = field(default_factory=dict)
    admitted: list[int] = field(default_factory=list)


def pick(reads: FlowReads[_T], using: str, queue: str, take: int, now: datetime) -> Picked[_T]:
    """Choose up to ``take`` jobs of a flow queue (see the module's docstring)."""
    survey = reads.survey(using, queue, take, now)
    buckets = sorted({bucket for _, keys in survey.lanes for bucket in keys})
    room = bucket_room(buckets, survey.bounds, survey.usage)
    keys: dict[int, LimitKeys] = {PLAIN_LANE: ()}
    takes: dict[int, int] = {}
    for lane, lane_keys in survey.lanes:
        if not admits(room, lane_keys):
            continue  # held: its jobs are never read
        room_left = [units for b in lane_keys if (units := room.get(b)) is not None]
        takes[lane], keys[lane] = min([take, *room_left]), lane_keys
    ahead = survey.fetched
    fetched = {lane: ahead[lane][:units] for lane, units in takes.items() if lane in ahead}
    fetched[PLAIN_LANE] = ahead.get(PLAIN_LANE, [])
    missing = {lane: units for lane, units in takes.items() if lane not in ahead}
    if missing:
        fetched.update(reads.fetch(using, queue, missing, now))
    kept = {c.sequence: kept for jobs in fetched.values() for c, kept in jobs}
    chosen = choose({lane: [c for c, _ in jobs] for lane, jobs in fetched.items()}, keys, room, take)
    return Picked([(c, kept[c.sequence], keys[c.lane]) for c in chosen], survey.bounds, list(takes))


def has_flow_jobs(using: str, queue: str) -> bool:
    """Whether the queue has a Scheduled job of a lane above 0 (a probe of the claim index past lane 0)."""
    return (
        JobRecord.objects.using(using)
        .filter(queue=queue, state=JobState.SCHEDULED)
        .filter(lane__gt=PLAIN_LANE)
        .exists()
    )


def held_until(*, queues: Sequence[str], now: datetime) -> datetime | None:
    """The earliest instant after ``now`` at which a rate-held bucket of the ``queues``' Scheduled
    jobs admits a claim again, or None (a worker whose claim found nothing sleeps until then at
    most). One probe of the claim index when the queues hold no job under flow control."""
    served = require_queues(queues)
    require_aware("now", now)
    using = jobs_database()
    scheduled = JobRecord.objects.using(using).filter(queue__in=served, state=JobState.SCHEDULED)
    if not scheduled.filter(lane__gt=PLAIN_LANE).exists():
        return None
    buckets = sorted({b for queue in served for _, keys in lanes_of(using, queue) for b in keys})
    if not buckets:
        return None
    bounds = bounds_in_force(using, {name for name, _ in buckets})
    return next_opening(using, buckets, bounds, now)


#: The columns the portable claim reads of each job besides ``_rows.ROW_FIELDS``.
CLAIM_EXTRA = ("wire_name", "payload", "backoff", "timeout", "trace_context")


def lanes_of(using: str, queue: str) -> list[tuple[int, LimitKeys]]:
    """The queue's lanes above 0 with a Scheduled job, each with its buckets (those of its first
    job: every job of a lane has the same ones)."""
    scheduled = JobRecord.objects.using(using).filter(queue=queue, state=JobState.SCHEDULED)
    lanes = sorted(set(scheduled.filter(lane__gt=PLAIN_LANE).values_list("lane", flat=True).distinct()))
    found: list[tuple[int, LimitKeys]] = []
    for lane in lanes:
        stored = scheduled.filter(lane=lane).values_list("limit_keys", flat=True).first()
        found.append((lane, stored_limit_keys(stored)))
    return found


class PortableFlowReads:
    """:class:`FlowReads` through the ORM (every database); a job is kept as its locked row."""

    def survey(self, using: str, queue: str, take: int, now: datetime) -> Survey[Any]:
        lanes = lanes_of(using, queue)
        buckets = sorted({bucket for _, keys in lanes for bucket in keys})
        if buckets:
            LimitBucket.objects.using(using).bulk_create(
                [LimitBucket(name=name, bucket=bucket) for name, bucket in buckets], ignore_conflicts=True
            )
        for name, bucket in buckets:  # one row at a time, in order: every claimer locks the same way
            list(LimitBucket.objects.using(using).filter(name=name, bucket=bucket).select_for_update())
        bounds = bounds_in_force(using, {name for name, _ in buckets})
        usage = bucket_usage(using, buckets, bounds, now)
        return Survey(lanes, bounds, usage, {PLAIN_LANE: self._lane(using, queue, PLAIN_LANE, take, now)})

    def fetch(
        self, using: str, queue: str, takes: Mapping[int, int], now: datetime
    ) -> dict[int, list[tuple[Candidate, Any]]]:
        return {lane: self._lane(using, queue, lane, take, now) for lane, take in takes.items()}

    def _lane(
        self, using: str, queue: str, lane: int, take: int, now: datetime
    ) -> list[tuple[Candidate, Any]]:
        rows = lock_rows(
            JobRecord.objects.using(using)
            .filter(queue=queue, state=JobState.SCHEDULED, lane=lane, due_time__lte=now)
            .order_by("-priority", "due_time", "sequence")[:take],
            skip_locked=True,
            extra=(*CLAIM_EXTRA, "priority"),
        )
        return [
            (Candidate(row.sequence, extra[-1], row.due_time, lane), (row, extra[:-1])) for row, extra in rows
        ]
