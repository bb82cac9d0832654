from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from backwave_django import CatchUp, JobState, ScheduleSpec, TriggerScheduleResult, store
from backwave_django.conf import get_settings
from backwave_django.core.planner import instance_id
from backwave_django.models import JobRecord, OperatorAudit, RecurringSchedule
from backwave_django.store import schedules as store_schedules
from backwave_django.store._tx import atomic_retrying
from backwave_django.store.schedules import _apply_mint

from ..conftest import T0, history, lease, report

pytestmark = pytest.mark.django_db


def _spec(**kw):
    fields: dict[str, Any] = {
        "schedule_id": "nightly",
        "cron": "0 2 * * *",
        "wire_name": "nightly-report",
        "payload": {"args": [], "kwargs": {"day": "yesterday"}},
    }
    fields.update(kw)
    return ScheduleSpec(**fields)


def _instances(schedule_id="nightly"):
    return list(
        JobRecord.objects.filter(schedule_id=schedule_id)
        .order_by("due_time")
        .values_list("due_time", flat=True)
    )


def test_upsert_stores_the_canonical_cron_with_the_cursor_at_now():
    store.upsert_schedule(_spec(time_zone="Europe/Berlin"), now=T0)
    row = RecurringSchedule.objects.get()
    assert (row.cron, row.cursor, row.time_zone, row.skipped_ticks) == (
        "0 0 2 * * *",
        T0,
        "Europe/Berlin",
        [],
    )


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"cron": "61 * * * *"}, "Invalid cron expression '61 \\* \\* \\* \\*'"),
        ({"time_zone": "Mars/Olympus"}, "Unresolvable time-zone id 'Mars/Olympus'"),
        ({"cron": "0 0 30 2 *"}, "^'0 0 30 2 \\*' never fires: February has no 30th$"),
        ({"cron": "0 0 0 31 4 *", "time_zone": "Europe/Berlin"}, "never fires: April has no 31st"),
    ],
)
def test_upsert_refuses_a_bad_cron_or_zone_and_stores_nothing(kw, message):
    with pytest.raises(ValueError, match=message):
        store.upsert_schedule(_spec(**kw), now=T0)
    assert not RecurringSchedule.objects.exists()


def test_a_re_upsert_redefines_in_place_and_keeps_cursor_and_skipped_ticks():
    store.upsert_schedule(_spec(), now=T0)
    RecurringSchedule.objects.update(skipped_ticks=["2026-01-01T00:00:00+00:00"])
    store.upsert_schedule(_spec(cron="0 3 * * *", queue="reports"), now=T0 + timedelta(days=9))
    row = RecurringSchedule.objects.get()
    assert (row.cron, row.queue, row.cursor) == ("0 0 3 * * *", "reports", T0)
    assert row.skipped_ticks == ["2026-01-01T00:00:00+00:00"]


def test_mint_due_mints_each_tick_once_at_the_tick():
    store.upsert_schedule(_spec(), now=T0)
    assert store.mint_due(now=T0 + timedelta(hours=1)) == 0
    tick = datetime(2026, 1, 1, 2, tzinfo=UTC)
    assert store.mint_due(now=tick) == 1
    assert store.mint_due(now=tick + timedelta(seconds=30)) == 0
    [job] = JobRecord.objects.filter(schedule_id="nightly")
    assert (job.job_id, job.due_time, job.state, job.wire_name) == (
        instance_id("nightly", tick),
        tick,
        JobState.SCHEDULED,
        "nightly-report",
    )
    assert job.payload == {"args": [], "kwargs": {"day": "yesterday"}}
    assert history(job.job_id) == [(0, "SCHEDULED", 0, "schedule:nightly")]
    assert RecurringSchedule.objects.get().cursor == tick


def test_skip_drops_ticks_missed_during_an_outage_and_records_them():
    store.upsert_schedule(_spec(cron="0 * * * *"), now=T0)
    back = T0 + timedelta(hours=5, seconds=30)  # 05:00 is 30 s old: fresh
    assert store.mint_due(now=back) == 1
    assert _instances() == [T0 + timedelta(hours=5)]
    assert RecurringSchedule.objects.get().skipped_ticks == [
        (T0 + timedelta(hours=h)).isoformat() for h in range(1, 5)
    ]


def test_coalesce_mints_one_make_up_run():
    store.upsert_schedule(_spec(cron="0 * * * *", catch_up=CatchUp.COALESCE), now=T0)
    assert store.mint_due(now=T0 + timedelta(hours=5, minutes=30)) == 1
    assert _instances() == [T0 + timedelta(hours=5)]


def test_no_overlap_mints_nothing_while_an_instance_is_live():
    store.upsert_schedule(_spec(cron="0 * * * *", no_overlap=True), now=T0)
    assert store.mint_due(now=T0 + timedelta(hours=1)) == 1
    assert store.mint_due(now=T0 + timedelta(hours=2)) == 0  # the 01:00 instance is still Scheduled
    assert RecurringSchedule.objects.get().skipped_ticks == [(T0 + timedelta(hours=2)).isoformat()]
    [claimed] = lease(now=T0 + timedelta(hours=2))
    report(claimed.job_id, now=T0 + timedelta(hours=2))
    assert store.mint_due(now=T0 + timedelta(hours=3)) == 1


def test_skipped_ticks_keep_the_newest_32():
    store.upsert_schedule(_spec(cron="* * * * *"), now=T0)
    store.mint_due(now=T0 + timedelta(hours=2))  # 32 resolved per pass
    store.mint_due(now=T0 + timedelta(hours=2))
    skipped = RecurringSchedule.objects.get().skipped_ticks
    assert len(skipped) == 32
    assert skipped[-1] == (T0 + timedelta(minutes=64)).isoformat()


def test_a_stale_decision_is_dropped_whole():
    store.upsert_schedule(_spec(cron="0 * * * *"), now=T0)
    from backwave_django.core import planner

    snapshot = planner.PlanInput(schedule_id="nightly", cron="0 0 * * * *", time_zone=None, cursor=T0)
    decision = planner.plan(snapshot, T0 + timedelta(hours=1))
    assert decision is not None
    assert store.mint_due(now=T0 + timedelta(hours=1)) == 1
    settings = get_settings()
    assert atomic_retrying("default", lambda: _apply_mint("default", decision, settings)) == 0
    assert len(_instances()) == 1


def test_a_row_whose_cron_no_longer_resolves_is_skipped_not_fatal():
    store.upsert_schedule(_spec(schedule_id="good", cron="0 * * * *"), now=T0)
    store.upsert_schedule(_spec(schedule_id="bad", cron="0 * * * *"), now=T0)
    RecurringSchedule.objects.filter(schedule_id="bad").update(time_zone="Gone/Away")
    assert store.mint_due(now=T0 + timedelta(hours=1)) == 1
    assert _instances("good") == [T0 + timedelta(hours=1)]


def test_trigger_mints_one_instance_now_per_instant_and_audits():
    store.upsert_schedule(_spec(no_overlap=True), now=T0)
    at = T0 + timedelta(minutes=7)
    assert store.trigger_schedule("nightly", actor="alice", now=at) is TriggerScheduleResult.TRIGGERED
    assert store.trigger_schedule("nightly", actor="alice", now=at) is TriggerScheduleResult.TRIGGERED
    assert store.trigger_schedule("nightly", actor="alice", now=at + timedelta(seconds=1)).name == "TRIGGERED"
    assert _instances() == [at, at + timedelta(seconds=1)]  # no-overlap does not apply to triggers
    assert RecurringSchedule.objects.get().cursor == T0
    assert (
        list(OperatorAudit.objects.values_list("actor", "action", "target"))
        == [("alice", "trigger_schedule", "nightly")] * 3
    )
    job = JobRecord.objects.get(due_time=at)
    assert history(job.job_id) == [(0, "SCHEDULED", 0, "alice")]


def test_a_trigger_at_a_tick_instant_and_that_tick_s_mint_are_one_job():
    store.upsert_schedule(_spec(), now=T0)
    tick = datetime(2026, 1, 1, 2, tzinfo=UTC)
    store.trigger_schedule("nightly", actor="alice", now=tick)
    assert store.mint_due(now=tick) == 0
    assert _instances() == [tick]


def test_trigger_of_an_unknown_schedule_is_not_found_and_not_audited():
    assert store.trigger_schedule("nope", actor="alice", now=T0) is TriggerScheduleResult.SCHEDULE_NOT_FOUND
    assert not OperatorAudit.objects.exists()


def test_removing_a_schedule_leaves_its_instances():
    store.upsert_schedule(_spec(cron="0 * * * *"), now=T0)
    store.mint_due(now=T0 + timedelta(hours=1))
    store.remove_schedule("nightly")
    store.remove_schedule("nightly")  # unknown ids are a no-op
    assert store.mint_due(now=T0 + timedelta(hours=2)) == 0
    assert _instances() == [T0 + timedelta(hours=1)]


def test_pruning_removes_only_settings_declared_schedules_no_longer_declared():
    store.upsert_schedule(_spec(schedule_id="kept"), now=T0, declared_in_settings=True)
    store.upsert_schedule(_spec(schedule_id="dropped"), now=T0, declared_in_settings=True)
    store.upsert_schedule(_spec(schedule_id="made-in-code"), now=T0)
    assert store.prune_settings_schedules(["kept"]) == ["dropped"]
    assert sorted(RecurringSchedule.objects.values_list("schedule_id", flat=True)) == ["kept", "made-in-code"]


def test_a_poisoned_schedule_is_logged_once(caplog, monkeypatch):
    # Once per process: start from a process that has logged none (the suite runs this test twice).
    monkeypatch.setattr(store_schedules, "_reported_schedule_errors", set())
    store.upsert_schedule(_spec(schedule_id="poisoned"), now=T0)
    RecurringSchedule.objects.update(cron="not a cron")
    with caplog.at_level("ERROR", logger="backwave_django.store"):
        store.mint_due(now=T0 + timedelta(days=1))
        store.mint_due(now=T0 + timedelta(days=2))
    messages = [r.getMessage() for r in caplog.records if "poisoned" in r.getMessage()]
    assert len(messages) == 1
    assert "Invalid cron expression 'not a cron'" in messages[0]
