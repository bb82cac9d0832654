"""Schedules on virtual time: every tick minted fresh and run, in named zones and across DST."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from backwave_django import CatchUp, JobState
from backwave_django.testing import RunSummary
from tests.jobsapp import harness_jobs as jobs

#: Three days that include Europe's 2026 spring-forward (Sunday 29 March).
BEFORE_DST = datetime(2026, 3, 27, tzinfo=UTC)
#: Mint, claim, run, report and look ahead: about 32 statements (savepoints included) on SQLite.
QUERIES_PER_DAILY_TICK = 40


@pytest.fixture
def backwave_start():
    return BEFORE_DST


def test_a_schedule_in_a_named_zone_mints_each_local_tick_over_three_days(backwave):
    schedule = backwave.upsert_schedule(
        "digest-berlin", jobs.digest, "0 8 * * *", args=["eu"], time_zone="Europe/Berlin"
    )
    assert schedule.next_tick == datetime(2026, 3, 27, 7, tzinfo=UTC)  # 08:00 CET
    summary = backwave.advance(timedelta(days=3))
    assert summary == RunSummary(succeeded=3, minted=3)
    minted = backwave.jobs(schedule_id="digest-berlin")
    assert [j.due_time for j in minted] == [
        datetime(2026, 3, 27, 7, tzinfo=UTC),
        datetime(2026, 3, 28, 7, tzinfo=UTC),
        datetime(2026, 3, 29, 6, tzinfo=UTC),  # 08:00 CEST, after the clocks went forward
    ]
    assert {(j.state, j.output, j.queue) for j in minted} == {
        (JobState.SUCCEEDED, "digest for eu", "digests")
    }
    first = minted[0].transitions[0]
    assert (first.state, first.actor, first.recorded_at) == (
        JobState.SCHEDULED,
        "schedule:digest-berlin",
        datetime(2026, 3, 27, 7, tzinfo=UTC),
    )
    [after] = backwave.schedules()
    assert (after.cursor, after.next_tick, after.skipped_ticks) == (
        datetime(2026, 3, 29, 6, tzinfo=UTC),
        datetime(2026, 3, 30, 6, tzinfo=UTC),
        (),
    )


def test_settings_declared_schedules_mint_even_when_declared_after_the_harness_started(backwave, settings):
    settings.BACKWAVE = {
        "SCHEDULES": {
            "ny-digest": {
                "job": "harness.digest",
                "cron": "30 1 * * *",
                "time_zone": "America/New_York",
                "kwargs": {"region": "us"},
            }
        }
    }
    summary = backwave.advance(timedelta(days=2))
    assert summary == RunSummary(succeeded=2, minted=2)
    [schedule] = backwave.schedules()
    assert (schedule.schedule_id, schedule.declared_in_settings) == ("ny-digest", True)
    assert [j.due_time for j in backwave.jobs(jobs.digest)] == [
        datetime(2026, 3, 27, 5, 30, tzinfo=UTC),  # 01:30 EDT
        datetime(2026, 3, 28, 5, 30, tzinfo=UTC),
    ]
    settings.BACKWAVE = {}
    backwave.run_until_idle()
    assert backwave.schedules() == []  # no longer declared: pruned, as a restarted worker would


def test_a_schedule_only_mints_ticks_after_it_was_stored(backwave):
    backwave.advance(timedelta(hours=12))
    backwave.upsert_schedule("hourly", jobs.digest, "0 * * * *", args=["eu"])
    assert backwave.jobs(jobs.digest) == []
    assert backwave.advance(timedelta(minutes=59, seconds=59)).minted == 0
    assert backwave.advance(timedelta(seconds=1)) == RunSummary(succeeded=1, minted=1)


def test_no_overlap_skips_ticks_while_an_instance_is_live(backwave):
    from backwave_django import operator

    operator.pause_queue("digests", actor="test")  # instances stay Scheduled: live
    backwave.upsert_schedule("every-minute", jobs.digest, "* * * * *", args=["eu"], no_overlap=True)
    backwave.advance(timedelta(minutes=3))
    assert len(backwave.jobs(jobs.digest, state=JobState.SCHEDULED)) == 1
    [schedule] = backwave.schedules()
    assert schedule.skipped_ticks == (
        BEFORE_DST + timedelta(minutes=2),
        BEFORE_DST + timedelta(minutes=3),
    )
    assert schedule.catch_up is CatchUp.SKIP


def test_a_year_of_daily_ticks_costs_a_bounded_number_of_queries_per_tick(backwave):
    """Wall-clock time depends on the machine; the number of round trips per tick does not."""
    backwave.upsert_schedule("daily", jobs.digest, "0 6 * * *", args=["eu"], time_zone="Europe/Berlin")
    statements = 0

    def count(execute, sql, params, many, context):
        nonlocal statements
        statements += 1
        return execute(sql, params, many, context)

    with connection.execute_wrapper(count):
        summary = backwave.advance(timedelta(days=365))
    assert summary == RunSummary(succeeded=365, minted=365)
    assert statements / 365 <= QUERIES_PER_DAILY_TICK, f"{statements / 365:.1f} statements per tick"


def test_schedule_arguments_are_checked_like_an_enqueue(backwave):
    with pytest.raises(TypeError, match=r"harness\.digest"):
        backwave.upsert_schedule("bad", jobs.digest, "0 8 * * *", kwargs={"zone": "eu"})
    with pytest.raises(ValueError, match="Invalid cron expression"):
        backwave.upsert_schedule("bad", jobs.digest, "0 25 * * *", args=["eu"])
    with pytest.raises(LookupError, match=r"no job is registered with wire name 'harness\.nope'"):
        backwave.upsert_schedule("bad", "harness.nope", "0 8 * * *")
    assert backwave.schedules() == []
