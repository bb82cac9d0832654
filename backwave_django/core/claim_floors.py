"""Where a worker's claim of a plain queue starts reading: its floors (docs/performance.md, "Claims
under a held transaction").

A claim reads a queue's due jobs in claim order: priority (highest first), then due time, then
sequence. While any transaction holds back PostgreSQL's horizon, every job leased since leaves an
entry in the claim index that the claim must step over (its row version stays, for that
transaction), so a claim that starts at the head of a priority walks past every job finished
since the hold began. A worker instead remembers, per queue and priority level, how far its own
claims have got, and starts the next claim there:

* A level's floor is the due time of the latest job the worker claimed at that level, less a
  lag. Jobs still to come at a level come after the ones claimed in claim order, except a job
  that becomes visible after a later one was claimed: enqueued by a transaction that committed
  late (its due time is its enqueue's clock reading, before the commit), from a clock behind or
  with a due time in the past; a schedule's instance minted late; a job skipped by ``SKIP LOCKED``
  under a claimer that then rolled back.
* The hint of an enqueue or of a schedule's instances carries the earliest due time it made
  claimable (``store/postgres/notifications.py``): a worker that hears it lowers the queue's
  floors to that time (:meth:`ClaimFloors.lower`), so such a job is claimed by the next claim, in
  its order. While the worker hears hints the lag is :data:`HEARD_LAG`; while it does not (no
  ``LISTEN``, or through a pooler) it is :data:`LAG`, which covers a commit up to that late.
* Every :data:`RESCAN`, and when the worker starts hearing hints again (those sent meanwhile are
  lost), a queue's claim reads from the head of every level (a full scan, as a claim without
  floors does), so any job behind a floor waits at most that long.
* Levels the worker knows (it has claimed at them) are taken without a probe; the gaps between
  them are probed, so a job at a new level is found by the next claim, in priority order.

Floors move forward only from what a committed claim leased, and back only to a hint's due time:
a claim's order rules are unchanged, only where it starts reading.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

#: How far behind the latest due time claimed at a level the next claim starts reading, while the
#: worker hears no hints.
LAG = timedelta(seconds=2)
#: The same while it hears them: a late job's hint lowers the floors itself.
HEARD_LAG = timedelta(milliseconds=100)
#: How often a queue's claim reads every level from its head, for the jobs behind a floor.
RESCAN = timedelta(seconds=10)


@dataclass(frozen=True, slots=True)
class FloorBounds:
    """A claim's floors for one queue: ``levels`` (ascending) with their ``floors``; both empty for
    a full scan."""

    levels: list[int]
    floors: list[datetime]

    @property
    def full(self) -> bool:
        return not self.levels


@dataclass(slots=True)
class ClaimFloors:
    """One worker's floors, per queue and priority level (see the module's docstring).

    The claiming thread calls :meth:`bounds` and :meth:`claimed`; the hint listener's thread
    calls :meth:`lower` and :meth:`hearing`, which only append to a queue that :meth:`bounds`
    applies (a ``deque``'s appends and pops are atomic).
    """

    lag: timedelta = LAG
    heard_lag: timedelta = HEARD_LAG
    rescan: timedelta = RESCAN
    _heard: bool = False
    _levels: dict[str, dict[int, datetime]] = field(default_factory=dict)
    _scanned: dict[str, datetime] = field(default_factory=dict)
    #: Floors to lower, from other threads: ``(queue, due time)``; ``(None, None)``: rescan all.
    _lowered: deque[tuple[str | None, datetime | None]] = field(default_factory=deque)

    def bounds(self, queue: str, now: datetime) -> FloorBounds:
        """Where the claim of ``queue`` at ``now`` starts: a full scan at first, every
        :attr:`rescan` (and when the clock went back), else from the known levels' floors."""
        while self._lowered:
            self._apply(*self._lowered.popleft())
        scanned = self._scanned.get(queue)
        levels = self._levels.get(queue)
        if scanned is None or not levels or not scanned <= now < scanned + self.rescan:
            return FloorBounds([], [])
        known = sorted(levels)
        return FloorBounds(known, [levels[level] for level in known])

    def claimed(
        self, queue: str, bounds: FloorBounds, now: datetime, jobs: Iterable[tuple[int, datetime]]
    ) -> None:
        """Record a committed claim of ``queue`` made with ``bounds`` at ``now``: the
        ``(priority, due time)`` of each job it leased. A full scan counts once it has leased a job
        (one that took nothing, paused or gated, may not have read the queue)."""
        lag = self.heard_lag if self._heard else self.lag
        levels = self._levels.setdefault(queue, {})
        leased = False
        for priority, due_time in jobs:
            leased = True
            floor = due_time - lag
            if priority not in levels or levels[priority] < floor:
                levels[priority] = floor
        if leased and bounds.full:
            self._scanned[queue] = now

    def lower(self, queue: str, due: datetime) -> None:
        """A hint says jobs of ``queue`` due from ``due`` became claimable: the next claim of the
        queue reads every level from there, if its floor is later."""
        self._lowered.append((queue, due))

    def hearing(self, heard: bool) -> None:
        """Whether the worker hears hints from now on. Starting to hear them makes the next claim
        of every queue a full scan: what was sent before was not heard."""
        if heard and not self._heard:
            self._lowered.append((None, None))
        self._heard = heard

    def _apply(self, queue: str | None, due: datetime | None) -> None:
        if queue is None or due is None:
            self._scanned.clear()
            return
        levels = self._levels.get(queue, {})
        for level, floor in levels.items():
            if due < floor:
                levels[level] = due
