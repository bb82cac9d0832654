"""A real worker loses its database connection between running a job and reporting it.

The worker is a ``manage.py backwave_worker`` subprocess on the test database. While its handler
runs, the test terminates every database session the worker holds (``pg_terminate_backend``), so
the outcome write is the first thing to hit the dead connection. The worker must reconnect and
write the outcome exactly once; and when it cannot reconnect before its lease runs out, the
outcome it finally writes must be fenced off, never applied on top of the new attempt's.
"""

from __future__ import annotations

import signal
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection
from django.utils import timezone

from backwave_django import JobState, OutcomeReport, OutcomeResult, RetryPolicy, Success, store
from backwave_django.models import JobRecord, JobTransition, WorkerNode
from tests.jobsapp import jobs
from tests.worker.conftest import Workers, allow_connections, wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

#: Heartbeats and maintenance far apart, so the outcome write is the first call after the kill.
QUIET = {"LEASE_DURATION": 30, "HEARTBEAT_INTERVAL": 10, "MAINTENANCE_INTERVAL": 30, "POLL_INTERVAL": 0.2}


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Workers]:
    pool = Workers(tmp_path)
    yield pool
    pool.stop_all()


def _marks(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def _terminate_other_sessions() -> int:
    """End every session on the test database except this one (only the worker's are there)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return int(cursor.fetchone()[0])


def _applied(job_id: uuid.UUID, attempt: int) -> list[tuple[int, str]]:
    """The (state, actor) of every terminal transition written for one attempt of a job."""
    return list(
        JobTransition.objects.filter(job__job_id=job_id, attempt=attempt, state__gte=JobState.SUCCEEDED)
        .order_by("ordinal")
        .values_list("state", "actor")
    )


def test_an_outcome_written_over_a_killed_connection_is_applied_once_after_reconnecting(workers, tmp_path):
    marker = tmp_path / "marks"
    job_id = jobs.sleep.enqueue(1.5, marker=str(marker)).job_id
    worker = workers.start("--queues", "slow", "--concurrency", "1", **QUIET)
    wait_for(lambda: any(m.startswith("start") for m in _marks(marker)), what="the job to start")
    assert _terminate_other_sessions() >= 1
    wait_for(lambda: _state(job_id) == JobState.SUCCEEDED, timeout=30, what="the outcome after reconnecting")
    # One slot, and no heartbeat or maintenance due: the outcome write met the dead connection.
    assert "Database fault" in workers.log(0)
    record = JobRecord.objects.get(job_id=job_id)
    assert (record.attempt, record.output) == (1, "slept")
    assert [state for state, _ in _applied(job_id, 1)] == [JobState.SUCCEEDED]
    assert [m.split()[0] for m in _marks(marker)] == ["start", "done"]  # run once, reported once
    assert worker.poll() is None
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(20) == 0


def test_a_worker_cut_off_past_its_lease_is_fenced_when_it_finally_reports(workers, tmp_path):
    marker = tmp_path / "marks"
    job_id = jobs.sleep.enqueue(2.0, marker=str(marker)).job_id
    worker = workers.start(
        "--queues", "slow", LEASE_DURATION=2, HEARTBEAT_INTERVAL=0.5, MAINTENANCE_INTERVAL=30
    )
    wait_for(lambda: WorkerNode.objects.exists(), what="the worker to register")
    wait_for(lambda: any(m.startswith("start") for m in _marks(marker)), what="the job to start")
    try:
        allow_connections(False)
        _terminate_other_sessions()
        wait_for(lambda: any(m.startswith("done") for m in _marks(marker)), what="the handler to finish")
        # The worker holds the outcome and cannot write it. Its lease runs out; another node
        # sweeps it and claims attempt 2.
        lease_expiry = JobRecord.objects.get(job_id=job_id).lease_expiry
        assert lease_expiry is not None
        wait_for(lambda: timezone.now() > lease_expiry, what="the lease to expire")
        now = timezone.now()
        assert store.expire_leases(now=now, queues=["slow"], retry=RetryPolicy(backoff=[0])) == 1
        [stolen] = store.claim(
            worker_id="thief", queues=["slow"], max_jobs=1, lease_duration=timedelta(minutes=5), now=now
        )
        assert stolen.attempt == 2
    finally:
        allow_connections(True)
    wait_for(lambda: "was fenced off" in workers.log(0), timeout=30, what="the late outcome to be fenced")
    record = JobRecord.objects.get(job_id=job_id)
    assert (record.state, record.lease_owner, record.attempt, record.output) == (
        JobState.LEASED,
        "thief",
        2,
        None,
    )
    assert _applied(job_id, 1) == []
    thief = OutcomeReport(job_id=job_id, worker_id="thief", attempt=2, outcome=Success(), output="again")
    assert store.report_outcome(thief, now=timezone.now()) is OutcomeResult.APPLIED
    assert _applied(job_id, 2) == [(JobState.SUCCEEDED, "thief")]
    assert worker.poll() is None
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(20) == 0


def _state(job_id: uuid.UUID) -> JobState:
    return JobState(JobRecord.objects.get(job_id=job_id).state)


def test_a_worker_started_while_the_database_refuses_connections_waits_for_it(workers):
    """Found by the torture suite: a worker started during a database restart used to exit 1."""
    job_id = jobs.echo.enqueue("after the outage").job_id
    allow_connections(False)
    try:
        worker = workers.start("--queues", "default")
        wait_for(lambda: "Database fault" in workers.log(0), what="the worker to meet the refusal")
        assert worker.poll() is None
        assert not WorkerNode.objects.exists()
    finally:
        allow_connections(True)
    wait_for(lambda: _state(job_id) == JobState.SUCCEEDED, timeout=60, what="the job to run after the outage")
    assert WorkerNode.objects.count() == 1
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(20) == 0


def test_a_worker_gives_up_on_a_database_that_keeps_refusing_and_exits_4(workers):
    """``--burst`` under cron must end: once its faults have lasted ``--give-up-after`` seconds it
    exits 4 (60 s by default under ``--burst``; a long-running worker waits unless given one), and a
    supervisor does not restart a child that gave up."""
    allow_connections(False)
    try:
        burst = workers.run("--burst", "--queues", "default", "--give-up-after", "1")
        long_running = workers.run("--queues", "default", "--give-up-after", "1")
        supervised = workers.run("--burst", "--processes", "2", "--queues", "default", "--give-up-after", "1")
    finally:
        allow_connections(True)
    for finished in (burst, long_running, supervised):
        assert finished.returncode == 4, finished.stderr
        assert "Database fault (OperationalError" in finished.stderr
        assert "gives up, exit status 4" in finished.stderr
    assert supervised.stderr.count("gave up on the database; not restarted") == 2
    assert not WorkerNode.objects.exists()
