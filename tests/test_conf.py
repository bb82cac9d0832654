import re
from datetime import timedelta

import pytest
from django.core.exceptions import ImproperlyConfigured

from backwave_django import HistoryPolicy, checks, conf
from backwave_django.conf import get_settings
from backwave_django.database import jobs_database


def test_defaults_match_the_documented_values():
    s = get_settings()
    assert (s.max_payload_bytes, s.max_wire_name_length, s.max_parents_per_job) == (65_536, 128, 16)
    assert (s.max_output_bytes, s.max_failure_detail_bytes, s.max_transitions_per_job) == (65_536, 8_192, 64)
    assert (s.max_claim_batch, s.max_purge_batch, s.max_recorded_skipped_ticks) == (32, 500, 32)
    assert s.lease_duration == timedelta(seconds=60)
    assert s.heartbeat_interval == timedelta(seconds=20)
    assert s.poll_interval == timedelta(seconds=1)
    assert s.maintenance_interval == timedelta(seconds=5)
    assert s.concurrency == 20
    assert s.batch_window == timedelta(0)
    assert s.retry.max_attempts == 10
    assert s.retention_succeeded_or_cancelled == timedelta(hours=24)
    assert s.retention_dead_lettered_or_quarantined == timedelta(days=14)
    assert s.history is HistoryPolicy.TRANSITIONS_AND_FAILURE_DETAIL
    assert s.console_bulk_limit == 10_000


def test_settings_accept_seconds_and_reload_on_change(backwave_settings):
    backwave_settings(LEASE_DURATION=30, HISTORY="transitions", RETENTION={"SUCCEEDED_OR_CANCELLED": None})
    s = get_settings()
    assert s.lease_duration == timedelta(seconds=30)
    assert s.heartbeat_interval == timedelta(seconds=10)
    assert s.history is HistoryPolicy.TRANSITIONS
    assert s.retention_succeeded_or_cancelled is None
    assert s.retention_dead_lettered_or_quarantined == timedelta(days=14)


def test_batch_window_takes_zero_up_to_one_second(backwave_settings):
    backwave_settings(BATCH_WINDOW=0.02)
    assert get_settings().batch_window == timedelta(milliseconds=20)
    backwave_settings(BATCH_WINDOW=timedelta(seconds=1))
    assert get_settings().batch_window == timedelta(seconds=1)
    backwave_settings(BATCH_WINDOW=0)
    assert get_settings().batch_window == timedelta(0)


def test_environment_switch_downgrades_failure_detail(monkeypatch):
    monkeypatch.setenv("BACKWAVE_DISABLE_FAILURE_DETAIL", " Yes ")
    conf.reset()
    assert get_settings().history is HistoryPolicy.TRANSITIONS


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"NOPE": 1}, "unknown key 'NOPE'"),
        ({"MAX_CLAIM_BATCH": 0}, "MAX_CLAIM_BATCH must be a positive int"),
        ({"LEASE_DURATION": "60"}, "LEASE_DURATION must be a timedelta"),
        ({"HEARTBEAT_INTERVAL": 90}, "must be shorter than LEASE_DURATION"),
        ({"HISTORY": "everything"}, "HISTORY must be a HistoryPolicy"),
        ({"RETRY": {"MAX_ATTEMPTS": 0}}, "at least one attempt"),
        ({"RETRY": {"TRIES": 3}}, "RETRY has an unknown key 'TRIES'"),
        ({"QUEUES": {"billing": {"concurrency_limit": -1}}}, "concurrency_limit'] must be None or an int"),
        ({"MAX_WIRE_NAME_LENGTH": 300}, "at most 255"),
        ({"PRUNE_SCHEDULES": "yes"}, "PRUNE_SCHEDULES must be True or False"),
        ({"CONSOLE_BULK_LIMIT": 0}, "CONSOLE_BULK_LIMIT must be a positive int"),
        ({"BATCH_WINDOW": 1.5}, "BATCH_WINDOW must be at most one second, got 1.5"),
        ({"BATCH_WINDOW": -0.01}, "BATCH_WINDOW must be zero or more, got -0.01"),
        ({"BATCH_WINDOW": "20ms"}, "BATCH_WINDOW must be a timedelta or a number of seconds"),
        (
            {"BATCH_WINDOW": 0.5, "LEASE_DURATION": 1.2, "HEARTBEAT_INTERVAL": 0.8},
            "BATCH_WINDOW (0:00:00.500000) must be shorter than LEASE_DURATION less HEARTBEAT_INTERVAL",
        ),
    ],
)
def test_invalid_settings_are_system_check_errors(backwave_settings, values, message):
    backwave_settings(**values)
    errors = checks.check_settings()
    assert {m.id for m in errors} == {"backwave.E001"}
    assert any(message in m.msg for m in errors), [m.msg for m in errors]
    with pytest.raises(ImproperlyConfigured, match=r"Invalid settings\.BACKWAVE"):
        get_settings()


def test_valid_settings_pass_the_checks():
    assert checks.check_settings() == []
    assert checks.check_use_tz() == []


@pytest.mark.django_db
def test_database_check_accepts_the_test_database():
    assert checks.check_database(databases=[jobs_database()]) == []


@pytest.mark.django_db
def test_sqlite_without_immediate_transactions_is_warned_about(settings, vendor):
    from django.db import connection

    if vendor != "sqlite":
        pytest.skip("SQLite only")
    options = connection.settings_dict["OPTIONS"]
    saved = options.pop("transaction_mode")
    try:
        assert [m.id for m in checks.check_database(databases=[jobs_database()])] == ["backwave.W001"]
    finally:
        options["transaction_mode"] = saved


def test_use_tz_false_is_an_error(settings):
    settings.USE_TZ = False
    assert [m.id for m in checks.check_use_tz()] == ["backwave.E002"]


@pytest.mark.parametrize(
    ("schedule", "message"),
    [
        ({"cron": "0 2 * * *"}, "needs 'job'"),
        ({"job": "test.echo", "cron": "0 25 * * *"}, "Invalid cron expression '0 25 \\* \\* \\*'"),
        ({"job": "test.echo", "cron": "0 2 * * *", "time_zone": "Nowhere/City"}, "Unresolvable time-zone id"),
        ({"job": "test.echo", "cron": "0 2 * * *", "catch_up": "all"}, "must be 'skip' or 'coalesce'"),
        ({"job": "test.echo", "cron": "0 2 * * *", "every": 1}, "unknown key 'every'"),
    ],
)
def test_invalid_settings_schedules_are_check_errors(backwave_settings, schedule, message):
    backwave_settings(SCHEDULES={"nightly": schedule})
    assert any(re.search(message, m.msg) for m in checks.check_settings()), [
        m.msg for m in checks.check_settings()
    ]


def test_a_schedule_for_an_undeclared_job_is_a_check_error(backwave_settings):
    backwave_settings(SCHEDULES={"nightly": {"job": "not.declared", "cron": "0 2 * * *"}})
    assert [m.id for m in checks.check_schedule_jobs()] == ["backwave.E004"]
    backwave_settings(
        SCHEDULES={"nightly": {"job": "test.echo", "cron": "0 2 * * *", "time_zone": "Europe/Berlin"}}
    )
    assert checks.check_schedule_jobs() == []
