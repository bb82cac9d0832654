"""The example test of docs/testing.md, verbatim but for imports and the settings it assumes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from backwave_django import JobState
from backwave_django.testing import RunSummary
from tests.jobsapp.harness_jobs import (
    charge_card_example as charge_card,
    daily_report,
    gateway,
    send_receipt,
)


@pytest.fixture(autouse=True)
def _berlin_report_schedule(settings):
    settings.BACKWAVE = {
        "SCHEDULES": {
            "berlin-report": {
                "job": "billing.daily-report",
                "cron": "0 8 * * *",
                "time_zone": "Europe/Berlin",
                "args": ["eu"],
            },
        }
    }


# --- From here on, as in docs/testing.md ------------------------------------------------------


@pytest.fixture
def backwave_start():
    # For every test in this module: two days before Europe's clocks go forward.
    return datetime(2026, 3, 27, tzinfo=UTC)


def test_a_flaky_gateway_is_retried_at_the_backoff_instants(backwave, monkeypatch):
    start, calls = backwave.now, []

    def charge(order_id):
        calls.append(backwave.now)
        if len(calls) < 3:
            raise TimeoutError("gateway timed out")
        return "r-1"

    monkeypatch.setattr(gateway, "charge", charge)
    job_id = charge_card.enqueue("o-1").job_id

    assert backwave.run_until_idle() == RunSummary(retried=1)
    assert backwave.job(job_id).due_time == start + timedelta(seconds=10)

    assert backwave.advance(timedelta(minutes=5)) == RunSummary(retried=1, succeeded=2)  # + the receipt
    job = backwave.job(job_id)
    assert (job.state, job.attempt, job.output) == (JobState.SUCCEEDED, 3, {"receipt": "r-1"})
    assert calls == [start + timedelta(seconds=s) for s in (0, 10, 70)]
    assert job.last_failure.startswith("builtins.TimeoutError: gateway timed out")
    backwave.assert_enqueued(send_receipt, args=["o-1"], count=1, state=JobState.SUCCEEDED)


def test_a_card_that_never_charges_dead_letters_and_sends_no_receipt(backwave, monkeypatch):
    def charge(order_id):
        raise TimeoutError("gateway is down")

    monkeypatch.setattr(gateway, "charge", charge)
    job_id = charge_card.enqueue("o-2").job_id
    assert backwave.drain() == RunSummary(retried=3, dead_lettered=1)
    assert backwave.job(job_id).terminal_cause == "gateway is down"
    backwave.assert_no_jobs(send_receipt)


def test_the_berlin_report_runs_at_eight_local_time(backwave):
    backwave.advance(timedelta(days=3))
    runs = backwave.jobs(daily_report, state=JobState.SUCCEEDED)
    assert [j.due_time for j in runs] == [
        datetime(2026, 3, 27, 7, tzinfo=UTC),  # 08:00 CET
        datetime(2026, 3, 28, 7, tzinfo=UTC),
        datetime(2026, 3, 29, 6, tzinfo=UTC),  # 08:00 CEST
    ]
