"""The harness runs handlers that decide their own outcome, time out or report progress, in
virtual time: nothing here sleeps."""

from __future__ import annotations

from datetime import timedelta

import pytest

from backwave_django import JobState, current_job
from backwave_django.testing import RunSummary
from tests.jobsapp import jobs

pytestmark = pytest.mark.django_db


def test_a_timed_out_attempt_retries_by_the_jobs_policy_then_dead_letters(backwave):
    job_id = jobs.busy.using(timeout=30).enqueue(1).job_id
    backwave.time_out(jobs.busy, attempts=2)
    assert backwave.run_until_idle() == RunSummary(retried=1, dead_lettered=1)
    job = backwave.job(job_id)
    assert (job.state, job.attempt, job.terminal_cause) == (JobState.DEAD_LETTERED, 2, "timed out after 30s")
    details = [t.failure_detail for t in job.transitions if t.failure_detail]
    assert len(details) == 2
    assert all(d.startswith("backwave_django.JobTimeout: timed out after 30s") for d in details)


def test_only_the_asked_for_attempts_time_out(backwave):
    job_id = jobs.busy.using(timeout=30).enqueue(0).job_id
    backwave.time_out("test.busy")
    assert backwave.run_until_idle() == RunSummary(retried=1, succeeded=1)
    assert backwave.job(job_id).output == "finished"


def test_timing_out_a_job_without_a_timeout_says_what_to_do(backwave):
    jobs.busy.enqueue(0)
    backwave.time_out(jobs.busy)
    with pytest.raises(RuntimeError, match=r"has no timeout: give it one"):
        backwave.run_until_idle()


def test_time_out_refuses_a_bad_count(backwave):
    with pytest.raises(ValueError, match="attempts"):
        backwave.time_out(jobs.busy, attempts=0)


def test_a_snooze_waits_in_virtual_time_and_gives_the_attempt_back(backwave):
    job_id = jobs.snoozer.enqueue(2, 600).job_id
    assert backwave.run_until_idle() == RunSummary(snoozed=1)
    assert backwave.job(job_id).due_time == backwave.now + timedelta(seconds=600)
    assert backwave.advance(timedelta(minutes=10)) == RunSummary(snoozed=1)
    assert backwave.advance(timedelta(minutes=10)) == RunSummary(succeeded=1)
    job = backwave.job(job_id)
    # Declared max_attempts=1; two snoozes gave two attempts back.
    assert (job.state, job.attempt, job.output) == (JobState.SUCCEEDED, 3, 3)


def test_discard_and_discard_on_dead_letter_at_once(backwave):
    discarded = jobs.discarder.enqueue("gone").job_id
    lookup = jobs.picky.enqueue("lookup").job_id
    retried = jobs.picky.enqueue("connection").job_id
    backwave.run_until_idle()
    assert (backwave.job(discarded).state, backwave.job(discarded).terminal_cause) == (
        JobState.DEAD_LETTERED,
        "gone",
    )
    assert (backwave.job(lookup).state, backwave.job(lookup).attempt) == (JobState.DEAD_LETTERED, 1)
    backwave.drain()
    assert (backwave.job(retried).state, backwave.job(retried).attempt) == (JobState.DEAD_LETTERED, 5)


def test_current_job_and_progress_in_the_harness(backwave):
    job_id = jobs.progress.enqueue(3, 0).job_id
    backwave.run_until_idle()
    progress = backwave.job(job_id).progress
    assert progress is not None
    assert (progress["done"], progress["total"], progress["note"]) == (3, 3, "step 3")
    assert current_job() is None


def test_settings_schedules_mint_instances_with_the_jobs_own_policy(backwave, settings):
    settings.BACKWAVE = {
        "SCHEDULES": {"every-minute": {"job": "test.discarder", "cron": "* * * * *", "args": ["x"]}}
    }
    backwave.advance(timedelta(minutes=1))
    [instance] = backwave.jobs(jobs.discarder)
    assert instance.max_attempts == 5  # @job("test.discarder", max_attempts=5), not the settings' 10


def test_harness_schedules_carry_the_jobs_policy(backwave):
    backwave.upsert_schedule("spin", jobs.busy, cron="* * * * *", args=[0])
    backwave.advance(timedelta(minutes=1))
    [instance] = backwave.jobs(jobs.busy)
    assert instance.max_attempts == 2
