import re
import uuid
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from backwave_django.core.planner import (
    MAX_TICKS_PER_POLL,
    MISSED_TICK_THRESHOLD,
    MintDecision,
    PlanInput,
    instance_id,
    plan,
    plan_all,
    resolve,
)
from backwave_django.core.states import CatchUp

T0 = datetime(2026, 1, 1, tzinfo=UTC)
MINUTE = timedelta(minutes=1)


def raises_exactly(message: str):
    """Expect a ValueError whose message is exactly ``message``."""
    return pytest.raises(ValueError, match=f"^{re.escape(message)}$")


def snapshot(cron: str = "* * * * *", cursor: datetime = T0, **kwargs: object) -> PlanInput:
    defaults: dict[str, object] = {"schedule_id": "every-minute", "time_zone": None}
    return PlanInput(cron=cron, cursor=cursor, **{**defaults, **kwargs})  # type: ignore[arg-type]


def minutes(first: int, last: int) -> tuple[datetime, ...]:
    """The whole-minute instants T0+first … T0+last."""
    return tuple(T0 + n * MINUTE for n in range(first, last + 1))


def assert_partition(decision: MintDecision) -> None:
    resolved = sorted([*decision.ticks, *decision.skipped_ticks])
    assert len(set(resolved)) == len(resolved)
    assert list(decision.ticks) == sorted(decision.ticks)
    assert list(decision.skipped_ticks) == sorted(decision.skipped_ticks)
    assert decision.new_cursor == resolved[-1]


# --- what is due ----------------------------------------------------------------------------


def test_nothing_due_gives_no_decision():
    assert plan(snapshot(), T0 + timedelta(seconds=59)) is None
    assert plan(snapshot("0 2 * * *"), T0 + timedelta(hours=1)) is None


def test_a_due_tick_is_minted_and_the_cursor_moves_to_it():
    decision = plan(snapshot(), T0 + MINUTE)
    assert decision == MintDecision(
        schedule_id="every-minute",
        expected_cursor=T0,
        new_cursor=T0 + MINUTE,
        ticks=(T0 + MINUTE,),
        skipped_ticks=(),
    )


def test_the_cursor_moves_to_the_last_tick_not_to_now():
    now = T0 + timedelta(minutes=1, seconds=30)
    decision = plan(snapshot(), now)
    assert decision is not None
    assert decision.new_cursor == T0 + MINUTE


def test_ticks_are_strictly_after_the_cursor():
    decision = plan(snapshot(cursor=T0 + MINUTE), T0 + 2 * MINUTE)
    assert decision is not None
    assert decision.ticks == (T0 + 2 * MINUTE,)


def test_several_fresh_ticks_are_all_minted():
    decision = plan(snapshot("*/20 * * * * *"), T0 + MINUTE)
    assert decision is not None
    assert decision.ticks == (
        T0 + timedelta(seconds=20),
        T0 + timedelta(seconds=40),
        T0 + MINUTE,
    )
    assert decision.skipped_ticks == ()


def test_at_most_32_ticks_per_pass_and_the_cursor_stops_at_the_last_one():
    # Every second: 40 ticks are due and all are fresh, but only 32 are resolved in one pass.
    now = T0 + timedelta(seconds=40)
    decision = plan(snapshot("* * * * * *"), now)
    assert decision is not None
    assert MAX_TICKS_PER_POLL == 32
    assert len(decision.ticks) == 32
    assert decision.new_cursor == T0 + timedelta(seconds=32)
    # The next pass picks up where this one stopped.
    following = plan(snapshot("* * * * * *", cursor=decision.new_cursor), now)
    assert following is not None
    assert following.ticks[0] == T0 + timedelta(seconds=33)
    assert following.new_cursor == now


def test_zoned_ticks_are_planned_in_utc():
    decision = plan(snapshot("0 2 * * *", time_zone="Europe/Berlin"), T0 + timedelta(hours=1, seconds=30))
    assert decision is not None
    assert decision.ticks == (T0 + timedelta(hours=1),)  # 02:00 CET


# --- catch-up -------------------------------------------------------------------------------


def test_skip_after_an_outage_skips_missed_ticks_and_mints_fresh_ones():
    now = T0 + 10 * MINUTE
    decision = plan(snapshot(catch_up=CatchUp.SKIP), now)
    assert decision is not None
    assert decision.ticks == minutes(9, 10)  # 9 is exactly one minute old: still fresh
    assert decision.skipped_ticks == minutes(1, 8)
    assert decision.new_cursor == now
    assert_partition(decision)


def test_a_tick_exactly_one_minute_old_is_fresh_and_older_is_missed():
    assert MISSED_TICK_THRESHOLD == MINUTE
    fresh = plan(snapshot(), T0 + 2 * MINUTE)
    assert fresh is not None
    assert fresh.ticks == minutes(1, 2)
    assert fresh.skipped_ticks == ()
    late = plan(snapshot(), T0 + 2 * MINUTE + timedelta(microseconds=1))
    assert late is not None
    assert late.ticks == minutes(2, 2)
    assert late.skipped_ticks == minutes(1, 1)


def test_coalesce_mints_one_make_up_run_for_the_missed_ticks():
    decision = plan(snapshot("0 * * * *", catch_up=CatchUp.COALESCE), T0 + timedelta(hours=5, seconds=10))
    assert decision is not None
    hours = [T0 + timedelta(hours=h) for h in range(1, 6)]
    assert decision.ticks == (hours[3], hours[4])  # the make-up (last missed) and the fresh one
    assert decision.skipped_ticks == tuple(hours[:3])
    assert_partition(decision)


def test_coalesce_with_nothing_missed_is_like_skip():
    now = T0 + 2 * MINUTE
    assert plan(snapshot(catch_up=CatchUp.COALESCE), now) == plan(snapshot(catch_up=CatchUp.SKIP), now)


def test_coalesce_gives_one_make_up_per_32_tick_batch():
    # Kept on purpose (docs/schedules.md, "Minting, catch-up and overlap"): a 100-minute outage is
    # worked off in batches of 32 resolved ticks, and every batch brings its own make-up run.
    now = T0 + 100 * MINUTE
    first = plan(snapshot(catch_up=CatchUp.COALESCE), now)
    assert first is not None
    assert first.ticks == minutes(32, 32)
    assert first.skipped_ticks == minutes(1, 31)
    second = plan(snapshot(catch_up=CatchUp.COALESCE, cursor=first.new_cursor), now)
    assert second is not None
    assert second.ticks == minutes(64, 64)


# --- no-overlap -----------------------------------------------------------------------------


def test_no_overlap_with_a_live_instance_mints_nothing_and_skips_every_tick():
    now = T0 + 3 * MINUTE
    decision = plan(snapshot(no_overlap=True, has_live_instance=True), now)
    assert decision is not None
    assert decision.ticks == ()
    assert decision.skipped_ticks == minutes(1, 3)  # fresh ticks included
    assert decision.new_cursor == now


def test_a_live_instance_without_no_overlap_changes_nothing():
    now = T0 + 2 * MINUTE
    assert plan(snapshot(has_live_instance=True), now) == plan(snapshot(), now)


def test_no_overlap_without_a_live_instance_mints_only_the_first_tick():
    decision = plan(snapshot("*/20 * * * * *", no_overlap=True), T0 + MINUTE)
    assert decision is not None
    assert decision.ticks == (T0 + timedelta(seconds=20),)
    assert decision.skipped_ticks == (T0 + timedelta(seconds=40), T0 + MINUTE)


def test_no_overlap_with_coalesce_mints_the_make_up_tick():
    now = T0 + 10 * MINUTE
    decision = plan(snapshot(catch_up=CatchUp.COALESCE, no_overlap=True), now)
    assert decision is not None
    assert decision.ticks == minutes(8, 8)  # the last missed tick
    assert decision.skipped_ticks == (*minutes(1, 7), *minutes(9, 10))
    assert_partition(decision)


def test_no_overlap_with_skip_mints_the_first_fresh_tick():
    decision = plan(snapshot(catch_up=CatchUp.SKIP, no_overlap=True), T0 + 10 * MINUTE)
    assert decision is not None
    assert decision.ticks == minutes(9, 9)
    assert decision.skipped_ticks == (*minutes(1, 8), *minutes(10, 10))


# --- validation and the group pass ----------------------------------------------------------


def test_resolve_reports_a_bad_cron_and_a_bad_zone_with_the_monitor_messages():
    with raises_exactly(
        "Invalid cron expression '0 0 32 * *': Cron day-of-month field part '32' is out of range 1-31."
    ):
        resolve("0 0 32 * *", None)
    with pytest.raises(ValueError, match=r"^Unresolvable time-zone id 'Nowhere/Land': "):
        resolve("* * * * *", "Nowhere/Land")


def test_plan_refuses_naive_instants():
    with pytest.raises(ValueError, match="now must be timezone-aware"):
        plan(snapshot(), datetime(2026, 1, 1, 0, 1))
    with pytest.raises(ValueError, match="cursor must be timezone-aware"):
        plan(snapshot(cursor=datetime(2026, 1, 1)), T0 + MINUTE)


def test_plan_all_skips_poisoned_rows_silently_and_keeps_going():
    now = T0 + MINUTE
    snapshots = [
        snapshot(schedule_id="bad-cron", cron="0 0 30 2 * * *"),
        snapshot(schedule_id="bad-zone", time_zone="Nowhere/Land"),
        snapshot(schedule_id="good"),
        snapshot(schedule_id="not-due", cursor=now),
        snapshot(schedule_id="also-good"),
    ]
    decisions = plan_all(snapshots, now)
    assert [d.schedule_id for d in decisions] == ["good", "also-good"]
    assert all(d.ticks == (now,) for d in decisions)


def test_a_never_firing_cron_gives_no_decision():
    assert plan(snapshot("0 0 30 2 *"), T0 + timedelta(days=3000)) is None


# --- instance ids ---------------------------------------------------------------------------


def test_instance_ids_are_deterministic():
    tick = datetime(2026, 1, 2, 3, tzinfo=UTC)
    assert instance_id("nightly", tick) == instance_id("nightly", tick)
    assert isinstance(instance_id("nightly", tick), uuid.UUID)
    assert instance_id("nightly", tick).version == 5


def test_instance_ids_do_not_depend_on_the_tick_offset():
    tick = datetime(2026, 1, 2, 3, tzinfo=UTC)
    assert instance_id("nightly", tick) == instance_id("nightly", tick.astimezone(ZoneInfo("Asia/Tokyo")))


def test_instance_ids_differ_per_tick_and_per_schedule():
    decision = plan(snapshot("* * * * * *"), T0 + timedelta(seconds=20))
    assert decision is not None
    ids = {instance_id("a", tick) for tick in decision.ticks}
    assert len(ids) == len(decision.ticks) == 20
    assert instance_id("a", T0) != instance_id("b", T0)
    assert instance_id("a", T0) != instance_id("a", T0 + timedelta(microseconds=1))


def test_trigger_now_at_a_ticks_instant_gets_the_minted_instance_id():
    decision = plan(snapshot(schedule_id="nightly"), T0 + MINUTE)
    assert decision is not None
    (tick,) = decision.ticks
    trigger_now = datetime(2026, 1, 1, 0, 1, tzinfo=UTC)
    assert instance_id("nightly", trigger_now) == instance_id(decision.schedule_id, tick)


def test_instance_id_refuses_a_naive_tick():
    with pytest.raises(ValueError, match="tick must be timezone-aware"):
        instance_id("nightly", datetime(2026, 1, 1))


def test_schedule_error_explains_a_row_that_does_not_resolve():
    from backwave_django.core.planner import schedule_error

    assert schedule_error("0 2 * * *", "Europe/Berlin") is None
    assert str(schedule_error("0 2 * * *", "Atlantis/Capital")).startswith(
        "Unresolvable time-zone id 'Atlantis/Capital'"
    )
    assert str(schedule_error("0 99 * * *", None)).startswith("Invalid cron expression '0 99 * * *'")
