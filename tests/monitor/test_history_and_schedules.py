"""The monitor's reads of a job's history and edges, and of the recurring schedules."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from backwave_django import Failure, JobState, TerminalStateClass, monitor, store
from backwave_django.core import planner
from backwave_django.core.states import CatchUp
from backwave_django.models import RecurringSchedule
from backwave_django.testing.snapshots import read_schedules

from ..conftest import T0, enqueue, lease_one, report

pytestmark = pytest.mark.django_db


# --- job_history ---------------------------------------------------------------------------------


def test_the_history_is_the_log_oldest_first():
    job = enqueue()
    lease_one(job)
    report(
        job, Failure(next_due_time=T0 + timedelta(seconds=5), error="boom"), failure_detail="ValueError: boom"
    )
    lease_one(job, now=T0 + timedelta(seconds=5))
    report(job, attempt=2, now=T0 + timedelta(seconds=6))

    history = monitor.job_history(job)

    assert [(e.ordinal, e.state, e.attempt) for e in history] == [
        (0, JobState.SCHEDULED, 0),
        (1, JobState.LEASED, 1),
        (2, JobState.SCHEDULED, 1),
        (3, JobState.LEASED, 2),
        (4, JobState.SUCCEEDED, 2),
    ]
    assert [e.actor for e in history][:2] == ["enqueue", "worker-a"]
    assert [e.failure_detail for e in history] == [None, None, "ValueError: boom", None, None]
    assert history[4].recorded_at == T0 + timedelta(seconds=6)


def test_an_unknown_or_purged_job_has_an_empty_history():
    assert monitor.job_history(uuid.uuid4()) == []
    job = enqueue()
    lease_one(job)
    report(job)
    assert len(monitor.job_history(job)) == 3
    assert store.purge_terminal(TerminalStateClass.SUCCEEDED_OR_CANCELLED, terminal_before=T0) == 1
    assert monitor.job_history(job) == []
    assert monitor.get_job(job) is None


def test_with_history_off_the_history_is_empty(backwave_settings):
    recorded = enqueue()
    backwave_settings(HISTORY="OFF")
    unrecorded = enqueue()
    assert monitor.job_history(unrecorded) == []
    assert monitor.job_history(recorded) == []  # an earlier setting's partial log is not shown
    backwave_settings(HISTORY="TRANSITIONS")
    assert [e.state for e in monitor.job_history(recorded)] == [JobState.SCHEDULED]


def test_the_history_refuses_a_non_uuid():
    with pytest.raises(TypeError, match=r"job_id must be a uuid\.UUID"):
        monitor.job_history("not-an-id")  # type: ignore[arg-type]


# --- dependency_edges ----------------------------------------------------------------------------


def test_edges_are_the_surviving_gating_edges_sorted_by_uuid():
    parents = [
        enqueue(job_id=uuid.UUID(f"{n:08x}-0000-7000-8000-000000000000"), queue=f"p{n}") for n in (3, 1, 2)
    ]
    child = enqueue(parents=tuple(parents))
    other_child = enqueue(parents=(parents[1],))

    assert monitor.dependency_edges(child) == (sorted(parents), [])
    assert monitor.dependency_edges(parents[1]) == ([], sorted([child, other_child]))

    first = parents[1]  # the smallest id: its edges go as it succeeds
    lease_one(first)
    report(first)

    assert monitor.dependency_edges(child) == (sorted([parents[0], parents[2]]), [])
    assert monitor.dependency_edges(first) == ([], [])
    assert monitor.dependency_edges(other_child) == ([], [])


def test_an_unknown_job_has_no_edges():
    enqueue(parents=(enqueue(),))
    assert monitor.dependency_edges(uuid.uuid4()) == ([], [])


def test_a_failing_parent_resolves_its_edges_and_cancels_the_child():
    parent = enqueue(queue="p")
    child = enqueue(parents=(parent,))
    lease_one(parent)
    report(parent, Failure(next_due_time=None, error="boom"))
    assert monitor.get_job(child).state is JobState.CANCELLED  # type: ignore[union-attr]
    assert monitor.dependency_edges(child) == ([], [])


# --- list_schedules ------------------------------------------------------------------------------


def _schedule(schedule_id, *, cron="0 0 2 * * *", time_zone=None, **fields):
    return RecurringSchedule.objects.create(
        schedule_id=schedule_id,
        cron=cron,
        time_zone=time_zone,
        wire_name="send-invoice",
        payload={"args": [1], "kwargs": {}},
        cursor=T0,
        **fields,
    )


def test_schedules_carry_their_next_tick_and_a_broken_one_its_error():
    _schedule("nightly-berlin", time_zone="Europe/Berlin", catch_up=CatchUp.COALESCE, max_attempts=3)
    _schedule("lost-zone", time_zone="Mars/Olympus", skipped_ticks=["2025-12-31T02:00:00Z"])
    _schedule("bad-cron", cron="99 * * * *")
    _schedule("a-utc")

    rows = monitor.list_schedules()

    assert [row.schedule_id for row in rows] == ["a-utc", "bad-cron", "lost-zone", "nightly-berlin"]
    by_id = {row.schedule_id: row for row in rows}
    assert by_id["a-utc"].next_due == datetime(2026, 1, 1, 2, tzinfo=UTC)
    assert by_id["a-utc"].error is None
    # 02:00 in Berlin is 01:00 UTC in winter.
    assert by_id["nightly-berlin"].next_due == datetime(2026, 1, 1, 1, tzinfo=UTC)
    assert by_id["nightly-berlin"].catch_up is CatchUp.COALESCE
    assert by_id["nightly-berlin"].max_attempts == 3
    lost = by_id["lost-zone"]
    assert lost.next_due is None
    assert lost.error is not None
    assert lost.error.startswith("Unresolvable time-zone id 'Mars/Olympus'")
    assert lost.skipped_ticks == (datetime(2025, 12, 31, 2, tzinfo=UTC),)
    assert (lost.wire_name, lost.payload, lost.queue, lost.cursor) == (
        "send-invoice",
        {"args": [1], "kwargs": {}},
        "default",
        T0,
    )
    bad = by_id["bad-cron"]
    assert bad.next_due is None
    assert bad.error is not None
    assert bad.error.startswith("Invalid cron expression '99 * * * *'")


def test_the_monitor_the_snapshots_and_the_planner_agree_on_every_schedule():
    _schedule("nightly-berlin", time_zone="Europe/Berlin")
    _schedule("lost-zone", time_zone="Mars/Olympus")
    _schedule("every-minute", cron="0 * * * * *")
    snapshots = {s.schedule_id: s.next_tick for s in read_schedules()}
    for row in monitor.list_schedules():
        assert row.next_due == snapshots[row.schedule_id]
        assert (row.next_due, row.error) == planner.next_due(row.cron, row.time_zone, row.cursor)
        assert row.error == planner.schedule_error(row.cron, row.time_zone)


def test_no_schedules_is_an_empty_list():
    assert monitor.list_schedules() == []
