"""``core.fairness.choose``: priority first, round-robin across lanes, no bucket over its room.

The property test holds ``choose`` to a plain model of the rule, written round by round; the
examples pin the rule's cases one at a time."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings, strategies as st

from backwave_django.core.fairness import Bucket, Candidate, choose
from backwave_django.core.limits import LimitKeys

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def model(
    lanes: Mapping[int, Sequence[Candidate]],
    keys: Mapping[int, LimitKeys],
    room: Mapping[Bucket, int | None],
    take: int,
) -> list[Candidate]:
    """The rule, one round at a time: the lanes whose next job has the top priority, oldest next
    job first, one job each while its buckets have room."""
    left = dict(room)
    waiting = {lane: list(jobs) for lane, jobs in lanes.items() if jobs}
    chosen: list[Candidate] = []

    def fits(lane: int) -> bool:
        return all(left.get(b, 0) is None or left.get(b, 0) > 0 for b in keys.get(lane, ()))  # type: ignore[operator]

    while waiting and len(chosen) < take:
        top = max(jobs[0].priority for jobs in waiting.values())
        turn = [lane for lane, jobs in waiting.items() if jobs[0].priority == top]
        turn.sort(key=lambda lane: (waiting[lane][0].due_time, waiting[lane][0].sequence))
        for lane in turn:
            if len(chosen) < take and fits(lane):
                chosen.append(waiting[lane].pop(0))
                left.update({b: n - 1 for b in keys.get(lane, ()) if (n := left.get(b, 0)) is not None})
            elif len(chosen) < take:
                waiting[lane] = []  # held: it takes no more turns
            if not waiting[lane]:
                del waiting[lane]
    return chosen


BUCKETS: list[Bucket] = [("a", ""), ("b", "x"), ("b", "y")]


@st.composite
def claims(draw: st.DrawFn) -> tuple[dict[int, list[Candidate]], dict[int, LimitKeys], dict[Bucket, int | None], int]:
    lane_ids = draw(st.lists(st.integers(0, 5), unique=True, max_size=4))
    lanes: dict[int, list[Candidate]] = {}
    keys: dict[int, LimitKeys] = {}
    sequence = 0
    for lane in lane_ids:
        jobs = []
        for _ in range(draw(st.integers(0, 6))):
            sequence += 1
            priority = draw(st.integers(0, 2))
            due = T0 + timedelta(seconds=draw(st.integers(0, 5)))
            jobs.append(Candidate(sequence, priority, due, lane))
        jobs.sort(key=lambda c: (-c.priority, c.due_time, c.sequence))  # claim order within a lane
        lanes[lane] = jobs
        keys[lane] = () if lane == 0 else tuple(draw(st.lists(st.sampled_from(BUCKETS), unique=True, max_size=2)))
    room = {b: draw(st.one_of(st.none(), st.integers(-1, 6))) for b in BUCKETS if draw(st.booleans())}
    return lanes, keys, room, draw(st.integers(0, 12))


@settings(max_examples=2000, deadline=None)
@given(claims())
def test_choose_follows_the_rule_round_by_round(case: tuple) -> None:
    lanes, keys, room, take = case
    assert choose(lanes, keys, room, take) == model(lanes, keys, room, take)


def _lane(lane: int, count: int, *, first: int, priority: int = 0) -> list[Candidate]:
    return [Candidate(first + i, priority, T0 + timedelta(seconds=first + i), lane) for i in range(count)]


def test_one_lane_is_taken_up_to_its_room_and_the_room_is_shared_with_no_other() -> None:
    lanes = {3: _lane(3, 10, first=1)}
    assert [c.sequence for c in choose(lanes, {3: (("a", ""),)}, {("a", ""): 4}, 32)] == [1, 2, 3, 4]
    assert choose(lanes, {3: (("a", ""),)}, {}, 32) == []  # a bucket without room is held
    assert len(choose(lanes, {3: (("a", ""),)}, {("a", ""): None}, 7)) == 7  # unbounded: the take


def test_lanes_alternate_oldest_head_first_and_priority_goes_before_turns() -> None:
    lanes = {0: _lane(0, 3, first=10), 1: _lane(1, 3, first=1), 2: _lane(2, 1, first=20, priority=5)}
    chosen = [c.sequence for c in choose(lanes, {}, {}, 6)]
    assert chosen == [20, 1, 10, 2, 11, 3]


def test_a_held_lane_gives_up_its_turn_to_the_next_lane_of_the_round() -> None:
    at = T0
    lanes = {
        1: [Candidate(2, 2, at, 1), Candidate(7, 2, at, 1)],
        2: [Candidate(8, 2, at, 2)],  # held: its bucket has no room
        0: [Candidate(10, 2, at, 0)],
    }
    chosen = choose(lanes, {2: (("a", ""),)}, {}, 2)
    assert [c.sequence for c in chosen] == [2, 10]
