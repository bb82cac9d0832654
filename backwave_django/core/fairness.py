"""Which of a flow-control queue's candidate jobs a claim takes (docs/store.md, "The flow claim").

A pure rule, read by both store paths. The claim has read, for each lane it may take from (a lane
whose every bucket has room, ``core.limits.lane_of``), the lane's first due jobs in claim order;
:func:`choose` takes from them priority first, and round-robin across lanes among jobs of equal
priority, admitting each job only while every one of its buckets still has room.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from .limits import LimitKeys

#: A bucket: ``(limit name, bucket)``.
Bucket = tuple[str, str]


@dataclass(frozen=True, slots=True)
class Candidate:
    """A due job a claim may take: its place in claim order and its lane."""

    sequence: int
    priority: int
    due_time: datetime
    lane: int


def room_of(bounds: tuple[int | None, int | None], leased: int, started: int) -> int | None:
    """A bucket's room: how many more jobs it admits now, given its bounds in force ``(concurrency,
    rate)`` and its Leased and in-window started counts; None when it bounds neither."""
    concurrency, rate = bounds
    rooms = [bound - used for bound, used in ((concurrency, leased), (rate, started)) if bound is not None]
    return max(min(rooms), 0) if rooms else None


def choose(
    lanes: Mapping[int, Sequence[Candidate]],
    keys: Mapping[int, LimitKeys],
    room: Mapping[Bucket, int | None],
    take: int,
) -> list[Candidate]:
    """Up to ``take`` of the ``lanes``' candidates (each lane's in claim order), in the order they
    are taken: the highest priority among the lanes' next jobs first; among lanes whose next job has
    that priority, one job per lane per round, the lane whose next job is oldest first. A lane stops
    when one of its buckets (``keys[lane]``) has no room left (``room``: None is unbounded; each job
    taken uses one unit of each of its buckets)."""
    left = dict(room)
    heads = {lane: 0 for lane, jobs in lanes.items() if jobs}
    chosen: list[Candidate] = []
    while heads and len(chosen) < take:
        if len(heads) == 1:  # one lane left: its rounds are its jobs in order, while they fit
            ((lane, at),) = heads.items()
            chosen += _run_of(lanes[lane][at:], keys.get(lane, ()), left, take - len(chosen))
            break
        top = max(lanes[lane][at].priority for lane, at in heads.items())
        turn = sorted(
            (lane for lane, at in heads.items() if lanes[lane][at].priority == top),
            key=lambda lane: (lanes[lane][heads[lane]].due_time, lanes[lane][heads[lane]].sequence),
        )
        for lane in turn:
            if len(chosen) >= take:
                break
            buckets = keys.get(lane, ())
            if not admits(left, buckets):
                del heads[lane]
                continue
            chosen.append(lanes[lane][heads[lane]])
            for bucket in buckets:
                units = left.get(bucket, 0)
                if units is not None:
                    left[bucket] = units - 1
            heads[lane] += 1
            if heads[lane] == len(lanes[lane]):
                del heads[lane]
    return chosen


def _run_of(
    jobs: Sequence[Candidate], buckets: LimitKeys, left: dict[Bucket, int | None], most: int
) -> list[Candidate]:
    """The first of one lane's ``jobs`` that fit: up to ``most``, and no more than its buckets'
    room ``left`` (which it uses up)."""
    fits = most
    for bucket in buckets:
        units = left.get(bucket, 0)
        if units is not None:
            fits = min(fits, max(units, 0))
    run = list(jobs[:fits])
    for bucket in buckets:
        units = left.get(bucket, 0)
        if units is not None:
            left[bucket] = units - len(run)
    return run


def admits(room: Mapping[Bucket, int | None], buckets: LimitKeys) -> bool:
    """Whether every one of ``buckets`` has room (a bucket not in ``room`` has none: it is held)."""
    for bucket in buckets:
        units = room.get(bucket, 0)
        if units is not None and units <= 0:
            return False
    return True
