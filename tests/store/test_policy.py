"""Per-job policy on the row, snoozes, graceful release, progress, retry-now and cancel hints.

These run on every database leg: on PostgreSQL the store's statements, elsewhere its ORM path;
``test_pipelined.py`` drives the pipelined claim and outcome batch over the same rules.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.db import connections

from backwave_django import (
    EnqueueResult,
    Failure,
    JobState,
    NewJob,
    OutcomeResult,
    RetryNowResult,
    RetryPolicy,
    ScheduleSpec,
    Snoozed,
    store,
)
from backwave_django.models import JobRecord, JobTransition, OperatorAudit

from ..conftest import LEASE, T0, WORKER, enqueue, history, lease, new_job, report, row

pytestmark = pytest.mark.django_db

LATER = T0 + timedelta(seconds=10)


def _policy(job_id: uuid.UUID) -> tuple[object, object, object]:
    record = row(job_id)
    return record.max_attempts, record.backoff, record.timeout


# --- The policy stored at enqueue ------------------------------------------------------------------


def test_enqueue_stores_the_settings_ceiling_and_time_limit_when_the_job_gives_none(backwave_settings):
    backwave_settings(RETRY={"MAX_ATTEMPTS": 4, "BACKOFF": [7]}, JOB_TIMEOUT=30)
    job_id = enqueue()
    # The backoff stays null: the settings' backoff applies at each decision.
    assert _policy(job_id) == (4, None, 30.0)


def test_enqueue_stores_the_jobs_own_policy():
    job_id = enqueue(max_attempts=3, backoff=[1, timedelta(minutes=1)], timeout=timedelta(seconds=90))
    assert _policy(job_id) == (3, [1.0, 60.0], 90.0)
    [claimed] = lease()
    assert (claimed.max_attempts, claimed.backoff, claimed.timeout) == (3, (1.0, 60.0), 90.0)


def test_enqueue_many_stores_each_jobs_policy():
    jobs = [new_job(max_attempts=n, timeout=float(n)) for n in (1, 2, 3)]
    assert store.enqueue_many(jobs, now=T0) == [EnqueueResult.OK] * 3
    assert [_policy(j.job_id) for j in jobs] == [(1, None, 1.0), (2, None, 2.0), (3, None, 3.0)]


def test_minted_instances_carry_their_schedules_policy(backwave_settings):
    spec = ScheduleSpec(
        schedule_id="s",
        cron="* * * * *",
        wire_name="w",
        payload={"args": [], "kwargs": {}},
        max_attempts=2,
        backoff=(5.0,),
        timeout=12.5,
    )
    store.upsert_schedule(spec, now=T0)
    store.mint_due(now=T0 + timedelta(minutes=1))
    [instance] = JobRecord.objects.filter(schedule_id="s")
    assert (instance.max_attempts, instance.backoff, instance.timeout) == (2, [5.0], 12.5)


@pytest.mark.parametrize(
    ("field", "value", "error"),
    [
        ("max_attempts", 0, ValueError),
        ("max_attempts", "3", TypeError),
        ("backoff", [-1], ValueError),
        ("backoff", [], ValueError),
        ("timeout", 0, ValueError),
        ("timeout", -5, ValueError),
        ("timeout", "10", TypeError),
    ],
)
def test_a_bad_policy_is_refused_before_anything_is_written(field, value, error):
    with pytest.raises(error, match=field):
        new_job(**{field: value})
    assert not JobRecord.objects.exists()


# --- Snoozes --------------------------------------------------------------------------------------


def test_a_snooze_reschedules_without_spending_an_attempt():
    job_id = enqueue(max_attempts=1)
    lease()
    due = LATER + timedelta(minutes=10)
    assert (
        report(job_id, Snoozed(next_due_time=due), now=LATER, failure_detail="dropped")
        is OutcomeResult.APPLIED
    )
    record = row(job_id)
    assert (record.state, record.due_time, record.attempt, record.max_attempts) == (
        JobState.SCHEDULED,
        due,
        1,
        2,
    )
    assert (record.lease_owner, record.lease_expiry) == (None, None)
    assert history(job_id)[-1] == (2, "SCHEDULED", 1, WORKER)
    assert JobTransition.objects.get(job__job_id=job_id, ordinal=2).failure_detail is None
    # The snoozed attempt does not count: the job still gets its one real attempt (attempt 2 of 2).
    [claimed] = lease(now=due)
    assert (claimed.attempt, claimed.max_attempts) == (2, 2)


def test_a_snooze_of_a_row_without_a_stored_ceiling_raises_the_settings_one():
    job_id = enqueue()
    JobRecord.objects.filter(job_id=job_id).update(max_attempts=None)
    lease()
    report(job_id, Snoozed(next_due_time=LATER), now=LATER)
    assert row(job_id).max_attempts == RetryPolicy().max_attempts + 1


def test_a_snooze_is_fenced_like_every_outcome():
    job_id = enqueue()
    lease()
    stale = report(job_id, Snoozed(next_due_time=LATER), now=LATER, worker="someone-else")
    assert stale is OutcomeResult.STALE_LEASE
    assert row(job_id).state == JobState.LEASED


# --- Graceful release -----------------------------------------------------------------------------


def test_a_release_gives_the_job_back_due_now_without_spending_its_attempt():
    last = enqueue(max_attempts=1)
    other = enqueue(queue="other")
    lease()
    lease(queue="other", worker="worker-b")
    assert store.release_leases(worker_id=WORKER, job_ids=[last, other], now=LATER) == 1
    record = row(last)
    # On its last attempt, and still not dead-lettered: the ceiling went up by the attempt it lost.
    assert (record.state, record.due_time, record.attempt, record.max_attempts) == (
        JobState.SCHEDULED,
        LATER,
        1,
        2,
    )
    assert history(last)[-1] == (2, "SCHEDULED", 1, WORKER)
    assert row(other).state == JobState.LEASED  # another worker's lease is untouched


def test_an_expired_lease_is_not_released():
    job_id = enqueue()
    lease()
    assert store.release_leases(worker_id=WORKER, job_ids=[job_id], now=T0 + LEASE) == 0
    assert row(job_id).state == JobState.LEASED


# --- Progress --------------------------------------------------------------------------------------

PROGRESS = {"done": 3, "total": 10, "note": "rows", "at": "2026-01-01T00:00:05Z"}


def test_progress_is_stored_only_under_the_live_lease_of_that_attempt():
    job_id = enqueue()
    lease()
    assert store.record_progress(worker_id=WORKER, progress=[(job_id, 1, PROGRESS)], now=LATER) == 1
    assert row(job_id).progress == PROGRESS
    newer = {**PROGRESS, "done": 4}
    assert store.record_progress(worker_id="worker-b", progress=[(job_id, 1, newer)], now=LATER) == 0
    assert store.record_progress(worker_id=WORKER, progress=[(job_id, 2, newer)], now=LATER) == 0
    assert store.record_progress(worker_id=WORKER, progress=[(job_id, 1, newer)], now=T0 + LEASE) == 0
    assert row(job_id).progress == PROGRESS


def test_the_outcome_writes_the_last_progress_and_a_later_outcome_keeps_it():
    job_id = enqueue()
    lease()
    report(job_id, Failure(next_due_time=LATER, error="x"), now=LATER, progress=PROGRESS)
    assert row(job_id).progress == PROGRESS
    lease(now=LATER)
    report(job_id, now=LATER, attempt=2)
    assert row(job_id).progress == PROGRESS


# --- Claims carry the cancel flag ------------------------------------------------------------------


def test_a_retried_job_whose_cancel_flag_is_still_up_is_claimed_with_it():
    job_id = enqueue()
    lease()
    store.cancel_job(job_id, actor="alice", now=T0)
    report(job_id, Failure(next_due_time=LATER, error="x"), now=T0)
    [claimed] = lease(now=LATER)
    assert claimed.cancel_requested is True


# --- Retry now -------------------------------------------------------------------------------------


def test_retry_now_makes_a_job_waiting_for_a_retry_due_now_and_is_audited():
    waiting = enqueue()
    fresh = enqueue(queue="fresh")
    lease()
    report(waiting, Failure(next_due_time=T0 + timedelta(hours=1), error="x"), now=T0)
    assert store.retry_now(waiting, actor="alice", now=LATER) is RetryNowResult.RETRIED_NOW
    record = row(waiting)
    assert (record.state, record.due_time, record.attempt) == (JobState.SCHEDULED, LATER, 1)
    assert store.retry_now(fresh, actor="alice", now=LATER) is RetryNowResult.NOT_RETRYING
    assert store.retry_now(uuid.uuid4(), actor="alice", now=LATER) is RetryNowResult.NOT_RETRYING
    assert list(OperatorAudit.objects.values_list("actor", "action", "target")) == [
        ("alice", "retry_now", str(waiting))
    ]


# --- Cancel hints ----------------------------------------------------------------------------------


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_cancelling_a_running_job_sends_its_id_on_the_cancel_channel():
    import psycopg

    from backwave_django.database import listen_database

    params = connections[listen_database()].get_connection_params()
    for key in ("cursor_factory", "context", "server_side_binding", "prepare_threshold"):
        params.pop(key, None)
    job_id = enqueue()
    pending = enqueue(queue="pending")
    lease()
    with psycopg.connect(**params, autocommit=True) as listener:
        listener.execute(f"LISTEN {store.CANCEL_CHANNEL}")
        store.cancel_job(job_id, actor="alice", now=T0)
        store.cancel_job(pending, actor="alice", now=T0)  # not running: nothing to tell a worker
        heard = [n.payload for n in listener.notifies(timeout=2.0, stop_after=2)]
    assert heard == [str(job_id)]


def test_new_job_keeps_its_policy_fields_optional():
    job = NewJob(job_id=uuid.uuid4(), wire_name="w", payload={}, due_time=T0)
    assert (job.max_attempts, job.backoff, job.timeout) == (None, None, None)


def test_a_ceiling_raised_past_the_declarable_maximum_still_decides_retries():
    from backwave_django.core.retry import MAX_ATTEMPT_CEILING, job_retry_policy

    policy = job_retry_policy(MAX_ATTEMPT_CEILING + 5, None, RetryPolicy())
    assert policy.max_attempts == MAX_ATTEMPT_CEILING + 5
    assert policy.next_attempt_at(MAX_ATTEMPT_CEILING + 4, T0) is not None
    assert policy.next_attempt_at(MAX_ATTEMPT_CEILING + 5, T0) is None
