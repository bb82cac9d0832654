"""Prefetch (``BACKWAVE["PREFETCH"]``): leases a worker holds ready beyond its busy slots.

Real worker subprocesses on the fast clocks of ``conftest.FAST`` (3 s leases, heartbeats every
0.5 s). One slot, and jobs that sleep: the first runs while the next ones wait, prefetched.
"""

from __future__ import annotations

import signal
import time
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from backwave_django import JobState, operator
from backwave_django.models import JobRecord
from tests.jobsapp import jobs

from .conftest import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def _record(job_id: uuid.UUID) -> JobRecord:
    return JobRecord.objects.get(job_id=job_id)


def _starts(marker: Path) -> list[str]:
    if not marker.exists():
        return []
    return [line for line in marker.read_text().splitlines() if line.startswith("start")]


def _leased(job_ids: list[uuid.UUID]) -> list[JobRecord]:
    return list(JobRecord.objects.filter(job_id__in=job_ids, state=JobState.LEASED).order_by("sequence"))


def test_prefetched_jobs_are_leased_and_heartbeated_while_they_wait(workers, tmp_path):
    marker = tmp_path / "marks"
    job_ids = [jobs.sleep.enqueue(8, marker=str(marker)).job_id for _ in range(3)]
    workers.start("--queues", "slow", "--concurrency", "1", PREFETCH=2)
    # The claim leases all three at once; the running handler marks its start a moment later.
    wait_for(
        lambda: len(_leased(job_ids)) == 3 and _starts(marker),
        what="one running and two prefetched leases",
    )
    assert len(_starts(marker)) == 1  # one slot: the other two wait
    first_expiries = {r.job_id: r.lease_expiry for r in _leased(job_ids) if r.lease_expiry is not None}
    assert len(first_expiries) == 3
    # The lease is 3 s long; past its first expiry the waiting jobs are still this worker's,
    # renewed by its heartbeats like the running one.
    latest = max(first_expiries.values())
    wait_for(lambda: timezone.now() > latest + timedelta(seconds=0.5), what="the first leases to expire")
    leased = _leased(job_ids)
    assert len(leased) == 3
    assert len(_starts(marker)) == 1
    for record in leased:
        assert record.lease_expiry is not None
        assert record.lease_expiry > first_expiries[record.job_id]
        assert record.attempt == 1
    assert len({r.lease_owner for r in leased}) == 1


def test_prefetched_jobs_are_given_back_at_shutdown_without_spending_an_attempt(workers, tmp_path):
    marker = tmp_path / "marks"
    running = jobs.sleep.enqueue(1.5, marker=str(marker)).job_id
    waiting = [jobs.sleep.enqueue(1.5, marker=str(marker)).job_id for _ in range(2)]
    worker = workers.start("--queues", "slow", "--concurrency", "1", "--shutdown-timeout", "10", PREFETCH=2)
    wait_for(lambda: len(_leased([running, *waiting])) == 3 and _starts(marker), what="the prefetch")
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(20) == 0
    # The running job finished; the prefetched ones never started and went back at once.
    assert _record(running).state == JobState.SUCCEEDED
    assert len(_starts(marker)) == 1
    for job_id in waiting:
        record = _record(job_id)
        assert (record.state, record.attempt, record.max_attempts) == (JobState.SCHEDULED, 1, 10 + 1)
        assert (record.lease_owner, record.lease_expiry) == (None, None)
    log = workers.log(0)
    # The stop line counts the prefetched jobs apart from the one running, and says where they go.
    assert (
        "stopping: no more claims; waiting up to 10 s for 1 running job(s); 2 prefetched, not started, "
        "go back to the queue, due again now" in log
    )
    assert "Gave back 2 prefetched lease(s)" in log


def test_prefetched_leases_count_against_a_queue_concurrency_limit(workers, tmp_path):
    marker = tmp_path / "marks"
    operator.set_concurrency_limit("slow", 2, actor="test")
    job_ids = [jobs.sleep.enqueue(8, marker=str(marker)).job_id for _ in range(5)]
    workers.start("--queues", "slow", "--concurrency", "1", PREFETCH=4)
    wait_for(lambda: _starts(marker), what="the first job to start")
    # One slot and room to prefetch four, but the queue's limit of two counts leases: the
    # running job and one prefetched.
    wait_for(lambda: len(_leased(job_ids)) == 2, what="a prefetched lease")
    owners = {r.lease_owner for r in _leased(job_ids)}
    assert len(owners) == 1
    # A second worker with free slots gets nothing: the prefetched lease holds the queue's slot.
    second = workers.start("--queues", "slow", "--concurrency", "2", "--name", "second", PREFETCH=4)
    wait_for(lambda: "started" in workers.log(1), what="the second worker to start")
    time.sleep(1.0)  # five of its poll intervals
    leased = _leased(job_ids)
    assert len(leased) == 2
    assert {r.lease_owner for r in leased} == owners
    assert len(_starts(marker)) == 1
    second.send_signal(signal.SIGTERM)
    assert second.wait(20) == 0


def test_a_prefetched_job_s_time_limit_starts_with_its_handler(workers, tmp_path):
    marker = tmp_path / "marks"
    # One slot: the second job waits 1.5 s behind the first, longer than its own 1 s limit.
    first = jobs.sleep.enqueue(1.5, marker=str(marker)).job_id
    second = jobs.sleep.using(timeout=1.0).enqueue(0.3, marker=str(marker)).job_id
    result = workers.run("--burst", "--queues", "slow", "--concurrency", "1", PREFETCH=1)
    assert result.returncode == 0, result.stderr
    assert _record(first).state == JobState.SUCCEEDED
    record = _record(second)
    assert (record.state, record.attempt) == (JobState.SUCCEEDED, 1)
