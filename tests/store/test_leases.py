import uuid
from datetime import timedelta

import pytest

from backwave_django import Failure, JobState, RetryPolicy, store
from backwave_django.models import JobTransition

from ..conftest import LEASE, T0, WORKER, enqueue, history, lease, report, row

pytestmark = pytest.mark.django_db

EXPIRED = T0 + LEASE
TWO_ATTEMPTS = RetryPolicy(max_attempts=2, backoff=[60])


def _beat(job_ids, now=T0, worker=WORKER):
    return store.heartbeat(worker_id=worker, job_ids=job_ids, lease_duration=LEASE, now=now)


def test_heartbeat_renews_a_live_lease_without_a_transition():
    job_id = enqueue()
    lease()
    [result] = _beat([job_id], now=T0 + timedelta(seconds=20))
    assert (result.job_id, result.renewed, result.cancel_requested) == (job_id, True, False)
    assert row(job_id).lease_expiry == T0 + timedelta(seconds=20) + LEASE
    assert len(history(job_id)) == 2


def test_heartbeat_carries_the_cancel_flag_and_still_renews():
    job_id = enqueue()
    lease()
    store.cancel_job(job_id, actor="alice", now=T0)
    [result] = _beat([job_id], now=T0 + timedelta(seconds=1))
    assert (result.renewed, result.cancel_requested) == (True, True)


def test_heartbeat_does_not_renew_lost_leases_and_answers_in_input_order():
    mine, theirs, done = enqueue(), enqueue(queue="other"), enqueue(queue="done")
    lease()
    lease(queue="other", worker="worker-b")
    lease(queue="done")
    report(done)
    unknown = uuid.uuid4()
    results = _beat([unknown, theirs, mine, done])
    assert [(r.job_id, r.renewed) for r in results] == [
        (unknown, False),
        (theirs, False),
        (mine, True),
        (done, False),
    ]
    assert _beat([]) == []


def test_a_heartbeat_at_the_expiry_instant_is_too_late():
    job_id = enqueue()
    lease()
    [result] = _beat([job_id], now=EXPIRED)
    assert not result.renewed
    assert row(job_id).lease_expiry == EXPIRED


def test_expiry_with_a_retry_left_reschedules_at_the_same_attempt():
    job_id = enqueue()
    lease()
    assert store.expire_leases(now=EXPIRED, queues=["default"], retry=TWO_ATTEMPTS) == 1
    record = row(job_id)
    assert (record.state, record.attempt, record.due_time) == (
        JobState.SCHEDULED,
        1,
        EXPIRED + timedelta(seconds=60),
    )
    assert (record.lease_owner, record.lease_expiry) == (None, None)
    assert history(job_id)[-1] == (2, "SCHEDULED", 1, "lease-expiry")
    assert JobTransition.objects.get(job__job_id=job_id, ordinal=2).failure_detail is None


def test_expiry_at_the_ceiling_dead_letters_with_the_exact_cause():
    job_id = enqueue(max_attempts=2)
    lease()
    store.expire_leases(now=EXPIRED, queues=["default"], retry=TWO_ATTEMPTS)
    lease(now=EXPIRED + timedelta(seconds=60))
    later = EXPIRED + timedelta(seconds=60) + LEASE
    assert store.expire_leases(now=later, queues=["default"], retry=TWO_ATTEMPTS) == 1
    record = row(job_id)
    assert record.state == JobState.DEAD_LETTERED
    assert record.terminal_cause == "Lease expired on attempt 2 (attempt ceiling reached)."
    assert record.terminal_at == later
    assert history(job_id)[-1] == (4, "DEAD_LETTERED", 2, "lease-expiry")


def test_expiry_leaves_live_leases_and_other_queues_alone():
    live = enqueue()
    elsewhere = enqueue(queue="elsewhere")
    lease()
    lease(queue="elsewhere")
    assert (
        store.expire_leases(now=EXPIRED - timedelta(microseconds=1), queues=["default"], retry=TWO_ATTEMPTS)
        == 0
    )
    assert store.expire_leases(now=EXPIRED, queues=["default"], retry=TWO_ATTEMPTS) == 1
    assert store.expire_leases(now=EXPIRED, queues=[], retry=TWO_ATTEMPTS) == 0
    assert row(live).state == JobState.SCHEDULED
    assert row(elsewhere).state == JobState.LEASED


def test_expiry_sweeps_at_most_max_jobs_oldest_first():
    jobs = [enqueue() for _ in range(3)]
    for index in range(len(jobs)):
        lease(now=T0 + timedelta(seconds=index), max_jobs=1)
    assert (
        store.expire_leases(
            now=EXPIRED + timedelta(minutes=1), queues=["default"], retry=TWO_ATTEMPTS, max_jobs=2
        )
        == 2
    )
    assert [row(j).state for j in jobs] == [JobState.SCHEDULED, JobState.SCHEDULED, JobState.LEASED]


def test_expiry_keeps_the_cancel_flag_and_the_late_report_is_fenced():
    job_id = enqueue()
    lease()
    store.cancel_job(job_id, actor="alice", now=T0)
    store.expire_leases(now=EXPIRED, queues=["default"], retry=TWO_ATTEMPTS)
    assert row(job_id).cancel_requested
    assert report(job_id, Failure(next_due_time=None, error="late"), now=EXPIRED).name == "STALE_LEASE"


def test_expiry_judges_each_job_by_its_own_stored_policy():
    # The sweep's policy only stands in for what a row does not store: a job declared with one
    # attempt dead-letters when its worker dies, whatever the settings allow.
    once = enqueue(max_attempts=1)
    own_backoff = enqueue(max_attempts=3, backoff=[5])
    lease(max_jobs=2)
    assert store.expire_leases(now=EXPIRED, queues=["default"], retry=RetryPolicy(max_attempts=10)) == 2
    assert (row(once).state, row(once).terminal_cause) == (
        JobState.DEAD_LETTERED,
        "Lease expired on attempt 1 (attempt ceiling reached).",
    )
    assert (row(own_backoff).state, row(own_backoff).due_time) == (
        JobState.SCHEDULED,
        EXPIRED + timedelta(seconds=5),
    )


def test_rows_without_a_stored_policy_take_the_sweeps_policy():
    from backwave_django.models import JobRecord

    job_id = enqueue()
    JobRecord.objects.filter(job_id=job_id).update(max_attempts=None)  # a row older than the column
    lease()
    store.expire_leases(now=EXPIRED, queues=["default"], retry=RetryPolicy(max_attempts=1))
    assert row(job_id).state == JobState.DEAD_LETTERED


def test_expire_leases_refuses_malformed_arguments():
    with pytest.raises(TypeError, match="retry must be a RetryPolicy"):
        store.expire_leases(now=T0, queues=["q"], retry=3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_jobs must be an int >= 0"):
        store.expire_leases(now=T0, queues=["q"], retry=TWO_ATTEMPTS, max_jobs=-1)
