"""Real worker subprocesses and handlers that misbehave or decide: time limits, abandonment and
recycling, snoozes and discards, a killed worker's one-attempt job, prompt cancel, progress.

The job types are in ``tests/jobsapp/jobs.py``. Everything runs on PostgreSQL; the prompt-cancel
test needs its LISTEN channel and is marked so, the rest also run on SQLite and MariaDB.
"""

from __future__ import annotations

import signal
import time
import uuid

import pytest

from backwave_django import JobState, operator
from backwave_django.models import JobRecord, JobTransition
from backwave_django.worker.pump import EXIT_RECYCLE
from tests.jobsapp import jobs

from .conftest import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def _record(job_id: uuid.UUID) -> JobRecord:
    return JobRecord.objects.get(job_id=job_id)


def _details(job_id: uuid.UUID) -> list[str]:
    return [
        str(detail)
        for detail in JobTransition.objects.filter(job__job_id=job_id, failure_detail__isnull=False)
        .order_by("ordinal")
        .values_list("failure_detail", flat=True)
    ]


def test_a_hung_sync_handler_is_stopped_at_its_timeout_and_retried(workers):
    job_id = jobs.busy.using(timeout=0.5).enqueue(60).job_id
    result = workers.run("--burst", "--queues", "slow")
    assert result.returncode == 0, result.stderr
    record = _record(job_id)
    # Two attempts (the job's own max_attempts=2), each stopped at half a second.
    assert (record.state, record.attempt, record.terminal_cause) == (
        JobState.DEAD_LETTERED,
        2,
        "timed out after 0.5s",
    )
    details = _details(job_id)
    assert len(details) == 2
    assert all(d.startswith("backwave_django.JobTimeout: timed out after 0.5s\nTraceback") for d in details)


def test_an_async_handler_past_its_timeout_is_cancelled(workers):
    job_id = jobs.async_busy.using(timeout=0.5).enqueue(60).job_id
    result = workers.run("--burst", "--queues", "slow")
    assert result.returncode == 0, result.stderr
    record = _record(job_id)
    assert (record.state, record.attempt) == (JobState.DEAD_LETTERED, 2)
    assert _details(job_id)[0].startswith("backwave_django.JobTimeout: timed out after 0.5s")


def test_handlers_blocked_in_c_are_abandoned_and_the_worker_recycles(workers):
    stuck = [jobs.blocked.using(timeout=0.3).enqueue(60).job_id for _ in range(2)]
    started = time.monotonic()
    result = workers.run("--queues", "slow", "--concurrency", "1", TIMEOUT_GRACE=0.3)
    # Two threads stuck with one slot: the worker gives up and exits for a fresh process.
    assert result.returncode == EXIT_RECYCLE, result.stderr
    assert time.monotonic() - started < 30
    for job_id in stuck:
        record = _record(job_id)
        assert (record.state, record.terminal_cause) == (JobState.DEAD_LETTERED, "timed out after 0.3s")
        assert f"test.blocked {job_id} (attempt 1) did not stop within" in result.stderr
    assert "exiting for a fresh process to take over" in result.stderr


def test_a_killed_workers_one_attempt_job_is_dead_lettered_by_the_sweep(workers, tmp_path):
    marker = tmp_path / "marks"
    job_id = jobs.sleep.using(max_attempts=1).enqueue(60, marker=str(marker)).job_id
    first = workers.start("--queues", "slow", "--name", "doomed")
    wait_for(lambda: marker.exists() and marker.read_text(), what="the job to start")
    first.send_signal(signal.SIGKILL)
    first.wait(10)
    # The settings allow five attempts; the job's own ceiling is what the sweep applies.
    second = workers.start("--queues", "slow", "--name", "sweeper")
    wait_for(lambda: _record(job_id).state == JobState.DEAD_LETTERED, timeout=30, what="the sweep")
    second.send_signal(signal.SIGTERM)
    assert second.wait(20) == 0
    record = _record(job_id)
    assert (record.attempt, record.terminal_cause) == (
        1,
        "Lease expired on attempt 1 (attempt ceiling reached).",
    )


def test_snoozes_discards_and_retry_on_in_a_real_worker(workers):
    snoozed = jobs.snoozer.enqueue(1, 0).job_id
    discarded = jobs.discarder.enqueue("card refused").job_id
    not_retried = jobs.picky.enqueue("value").job_id
    result = workers.run("--burst", "--queues", "default")
    assert result.returncode == 0, result.stderr
    record = _record(snoozed)
    # One attempt snoozed (given back), then the job's one real attempt succeeded.
    assert (record.state, record.attempt, record.max_attempts, record.output) == (JobState.SUCCEEDED, 2, 2, 2)
    record = _record(discarded)
    assert (record.state, record.attempt, record.terminal_cause) == (
        JobState.DEAD_LETTERED,
        1,
        "card refused",
    )
    assert _details(discarded)[0].startswith("backwave_django.Discard: card refused\n")
    record = _record(not_retried)
    assert (record.state, record.attempt, record.terminal_cause) == (JobState.DEAD_LETTERED, 1, "value")


@pytest.mark.postgres
def test_a_cancel_reaches_a_running_handler_long_before_the_next_heartbeat(workers):
    job_id = jobs.watch_cancel.enqueue(120).job_id
    # Heartbeats every 20 s: only the cancel channel can deliver the request sooner.
    worker = workers.start("--queues", "slow", LEASE_DURATION=60, HEARTBEAT_INTERVAL=20)
    wait_for(lambda: _record(job_id).state == JobState.LEASED, what="the job to start")
    time.sleep(0.5)  # past the first heartbeat round, which runs as the worker starts
    asked = time.monotonic()
    assert operator.cancel(job_id, actor="alice").name == "CANCELLATION_REQUESTED"
    wait_for(lambda: _record(job_id).state == JobState.CANCELLED, timeout=15, what="the cancel")
    assert time.monotonic() - asked < 10  # a heartbeat would have taken up to 20 s
    assert _record(job_id).terminal_cause == "operator-cancel"
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(20) == 0


def test_progress_is_written_while_the_job_runs_and_kept_after(workers):
    job_id = jobs.progress.enqueue(8, 0.4).job_id
    worker = workers.start("--queues", "slow")
    seen = wait_for(
        lambda: _record(job_id).state == JobState.LEASED and _record(job_id).progress,
        what="progress while the job runs",
    )
    assert seen["total"] == 8
    assert 1 <= seen["done"] < 8
    wait_for(lambda: _record(job_id).state == JobState.SUCCEEDED, what="the job to finish")
    progress = _record(job_id).progress
    assert progress is not None
    assert (progress["done"], progress["total"], progress["note"]) == (8, 8, "step 8")
    assert set(progress) == {"done", "total", "note", "at"}
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(20) == 0
