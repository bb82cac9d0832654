"""The worker's claim floors as a rule (``core.claim_floors``): where the next claim of a queue
starts, and how a committed claim moves it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from backwave_django.core.claim_floors import HEARD_LAG, LAG, RESCAN, ClaimFloors, FloorBounds

T0 = datetime(2026, 1, 1, tzinfo=UTC)
FULL = FloorBounds([], [])


def test_the_first_claim_of_a_queue_reads_from_the_heads() -> None:
    assert ClaimFloors().bounds("q", T0).full


def test_a_level_s_floor_is_its_latest_claimed_due_time_less_the_lag() -> None:
    floors = ClaimFloors()
    floors.claimed("q", FULL, T0, [(0, T0 - timedelta(seconds=3)), (5, T0), (0, T0 - timedelta(seconds=1))])
    bounds = floors.bounds("q", T0 + timedelta(seconds=1))
    assert bounds == FloorBounds([0, 5], [T0 - timedelta(seconds=1) - LAG, T0 - LAG])
    assert floors.bounds("other", T0).full


def test_floors_only_move_forward() -> None:
    floors = ClaimFloors()
    floors.claimed("q", FULL, T0, [(0, T0)])
    floors.claimed("q", floors.bounds("q", T0), T0, [(0, T0 - timedelta(seconds=1))])  # a late commit
    assert floors.bounds("q", T0).floors == [T0 - LAG]


def test_the_heads_are_read_again_every_rescan_and_when_the_clock_goes_back() -> None:
    floors = ClaimFloors()
    floors.claimed("q", FULL, T0, [(0, T0)])
    assert not floors.bounds("q", T0 + RESCAN - timedelta(microseconds=1)).full
    assert floors.bounds("q", T0 + RESCAN).full
    assert floors.bounds("q", T0 - timedelta(seconds=1)).full


def test_a_full_scan_that_leased_nothing_does_not_count_as_one() -> None:
    floors = ClaimFloors()
    floors.claimed("q", FULL, T0, [(0, T0)])
    later = T0 + RESCAN
    floors.claimed("q", floors.bounds("q", later), later, [])  # paused, or gated: maybe never read
    assert floors.bounds("q", later + timedelta(seconds=1)).full


def test_a_claim_from_the_floors_does_not_put_off_the_next_full_scan() -> None:
    floors = ClaimFloors()
    floors.claimed("q", FULL, T0, [(0, T0)])
    middle = T0 + RESCAN / 2
    floors.claimed("q", floors.bounds("q", middle), middle, [(0, middle)])
    assert floors.bounds("q", T0 + RESCAN).full


def test_a_hint_lowers_every_level_of_its_queue_to_its_due_time() -> None:
    floors = ClaimFloors()
    floors.claimed("q", FULL, T0, [(0, T0), (5, T0 - timedelta(seconds=30))])
    floors.claimed("other", FULL, T0, [(0, T0)])
    late = T0 - timedelta(seconds=10)
    floors.lower("q", late)
    assert floors.bounds("q", T0).floors == [late, T0 - timedelta(seconds=30) - LAG]
    assert floors.bounds("other", T0).floors == [T0 - LAG]
    # The claim that reads from there raises them again.
    floors.claimed("q", floors.bounds("q", T0), T0, [(0, T0 + timedelta(seconds=1))])
    assert floors.bounds("q", T0).floors[0] == T0 + timedelta(seconds=1) - LAG


def test_while_hints_are_heard_floors_trail_less_and_hearing_again_rescans() -> None:
    floors = ClaimFloors()
    floors.hearing(True)
    floors.claimed("q", floors.bounds("q", T0), T0, [(0, T0)])  # a full scan: the first
    assert floors.bounds("q", T0).floors == [T0 - HEARD_LAG]
    floors.hearing(False)
    floors.claimed("q", floors.bounds("q", T0), T0, [(0, T0 + timedelta(seconds=5))])
    assert floors.bounds("q", T0).floors == [T0 + timedelta(seconds=5) - LAG]
    floors.hearing(True)  # hints sent while deaf were lost
    assert floors.bounds("q", T0).full
