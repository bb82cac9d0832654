"""A worker cut off from the others reports late: its lease expired and the job moved on.

Worker A claims with a short lease and goes quiet (a partition, a long GC pause, a stopped VM).
The lease expires, a sweep reschedules the job, worker B claims attempt 2. When A finally
reports attempt 1, the fence turns it away as ``STALE_LEASE`` and nothing of it is written: not
the state, not the log, not its output or tags, not a cascade.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from backwave_django import (
    Cancelled,
    Failure,
    JobState,
    OutcomeReport,
    OutcomeResult,
    RetryPolicy,
    Success,
    Unroutable,
    store,
)

from ..conftest import T0, enqueue, history, row
from .conftest import snapshot

pytestmark = pytest.mark.django_db(transaction=True)

SHORT = timedelta(seconds=5)
EXPIRED = T0 + SHORT
RETRY_NOW = RetryPolicy(backoff=[0])

OUTCOMES = [
    Success(),
    Failure(next_due_time=T0 + timedelta(hours=1), error="late retry"),
    Failure(next_due_time=None, error="late dead letter"),
    Cancelled(cause="operator-cancel"),
    Unroutable(reason="late quarantine"),
]
IDS = ["success", "retry", "dead-letter", "cancelled", "unroutable"]


def _claim(worker: str, now, lease=SHORT):
    return store.claim(worker_id=worker, queues=["default"], max_jobs=1, lease_duration=lease, now=now)


def _late(job_id, outcome, *, now, attempt=1, worker="worker-a"):
    return OutcomeReport(
        job_id=job_id,
        worker_id=worker,
        attempt=attempt,
        outcome=outcome,
        output={"late": True} if isinstance(outcome, Success) else None,
        added_tags=("late",),
        failure_detail="Late: from the partitioned worker" if isinstance(outcome, Failure) else None,
    )


@pytest.mark.parametrize("outcome", OUTCOMES, ids=IDS)
def test_a_late_report_after_expiry_and_reclaim_is_fenced_and_changes_nothing(outcome):
    job = enqueue()
    child = enqueue(parents=[job])  # a late terminal outcome must not cascade either
    [first] = _claim("worker-a", T0)
    assert first.lease_expiry == EXPIRED
    assert store.expire_leases(now=EXPIRED, queues=["default"], retry=RETRY_NOW) == 1
    [second] = _claim("worker-b", EXPIRED)
    assert (second.job_id, second.attempt) == (job, 2)
    before = snapshot()
    late_now = EXPIRED + timedelta(seconds=1)
    assert store.report_outcome(_late(job, outcome, now=late_now), now=late_now) is OutcomeResult.STALE_LEASE
    assert snapshot() == before
    assert (row(job).state, row(job).lease_owner, row(job).attempt) == (JobState.LEASED, "worker-b", 2)
    assert row(child).state == JobState.AWAITING_PARENT
    # Worker B's report of its own attempt still applies, once.
    assert (
        store.report_outcome(
            OutcomeReport(job_id=job, worker_id="worker-b", attempt=2, outcome=Success()), now=late_now
        )
        is OutcomeResult.APPLIED
    )
    assert [h for h in history(job) if h[1] == "SUCCEEDED"] == [(4, "SUCCEEDED", 2, "worker-b")]


def test_a_report_at_the_exact_expiry_instant_is_fenced_even_before_any_sweep():
    job = enqueue()
    _claim("worker-a", T0)
    before = snapshot()
    result = store.report_outcome(_late(job, Success(), now=EXPIRED), now=EXPIRED)
    assert result is OutcomeResult.STALE_LEASE
    assert snapshot() == before


def test_a_report_after_the_sweep_but_before_the_reclaim_is_fenced():
    job = enqueue()
    _claim("worker-a", T0)
    store.expire_leases(now=EXPIRED, queues=["default"], retry=RETRY_NOW)
    assert row(job).state == JobState.SCHEDULED
    before = snapshot()
    assert store.report_outcome(_late(job, Success(), now=EXPIRED), now=EXPIRED) is OutcomeResult.STALE_LEASE
    assert snapshot() == before


def test_the_late_worker_cannot_pass_as_the_new_attempt():
    """Reporting attempt 2 under A's id, or attempt 1 under B's, is fenced just the same."""
    job = enqueue()
    _claim("worker-a", T0)
    store.expire_leases(now=EXPIRED, queues=["default"], retry=RETRY_NOW)
    _claim("worker-b", EXPIRED)
    before = snapshot()
    forged = [
        _late(job, Success(), now=EXPIRED, attempt=2, worker="worker-a"),
        _late(job, Success(), now=EXPIRED, attempt=1, worker="worker-b"),
    ]
    for report in forged:
        assert store.report_outcome(report, now=EXPIRED) is OutcomeResult.STALE_LEASE
    assert snapshot() == before


def test_in_a_batch_only_the_late_report_is_fenced():
    late_job = enqueue(due_time=T0)
    fresh_job = enqueue(due_time=EXPIRED)
    _claim("worker-a", T0)
    store.expire_leases(now=EXPIRED, queues=["default"], retry=RETRY_NOW)
    [stolen] = _claim("worker-b", EXPIRED)
    assert stolen.job_id == late_job
    [fresh] = _claim("worker-a", EXPIRED)
    assert fresh.job_id == fresh_job
    results = store.report_outcomes(
        [
            _late(late_job, Success(), now=EXPIRED),
            OutcomeReport(job_id=fresh_job, worker_id="worker-a", attempt=1, outcome=Success()),
        ],
        now=EXPIRED,
    )
    assert results == [OutcomeResult.STALE_LEASE, OutcomeResult.APPLIED]
    assert (row(late_job).state, row(late_job).output) == (JobState.LEASED, None)
    assert not row(late_job).tags.exists()
    assert row(fresh_job).state == JobState.SUCCEEDED


def test_a_repeated_report_of_an_applied_outcome_is_fenced():
    """A worker that cannot tell whether its write committed may send it again: harmless."""
    job = enqueue()
    _claim("worker-a", T0)
    report = OutcomeReport(job_id=job, worker_id="worker-a", attempt=1, outcome=Success(), output=1)
    assert store.report_outcome(report, now=T0) is OutcomeResult.APPLIED
    before = snapshot()
    assert store.report_outcome(report, now=T0) is OutcomeResult.STALE_LEASE
    assert snapshot() == before
