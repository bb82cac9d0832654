"""Workers behind a real PgBouncer in transaction pooling mode.

Each test starts a PgBouncer of its own (the ``pgbouncer`` fixture, tests/pgbouncer.py) and
points worker subprocesses at it: their jobs' alias goes through it, and their LISTEN connection
goes straight to PostgreSQL through ``BACKWAVE["LISTEN_DATABASE"]`` (tests/settings.py, the
``pgbouncer`` database). The test process itself talks to the database as usual.
"""

from __future__ import annotations

import signal
import time
import uuid
from collections import Counter

import pytest
from django.db import connection

from backwave_django import JobState, enqueue_many, operator
from backwave_django.models import JobRecord, JobTransition, WorkerNode
from tests.jobsapp import jobs
from tests.pgbouncer import PgBouncer
from tests.worker.conftest import Workers, wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

#: Heartbeats and polls far apart, so that a prompt wake-up or cancel can only come from LISTEN.
QUIET = {"POLL_INTERVAL": 120, "HEARTBEAT_INTERVAL": 60, "LEASE_DURATION": 180}


def _through(workers: Workers, bouncer: PgBouncer) -> None:
    """Workers started from now on reach the jobs' database through ``bouncer``."""
    workers.environ.update(BACKWAVE_TEST_DB="pgbouncer", BACKWAVE_PGBOUNCER_PORT=str(bouncer.port))


def _state(job_id: uuid.UUID) -> JobState:
    return JobState(JobRecord.objects.values_list("state", flat=True).get(job_id=job_id))


def _logins(bouncer: PgBouncer) -> int:
    """Client logins to the test database that pgbouncer logged."""
    return bouncer.log().count(f"login attempt: db={connection.settings_dict['NAME']} ")


def test_a_worker_behind_pgbouncer_is_woken_and_hears_cancels_on_its_direct_listen_alias(workers, pgbouncer, tmp_path):
    _through(workers, pgbouncer)
    worker = workers.start("--queues", "default,slow", **QUIET)
    wait_for(WorkerNode.objects.exists, what="the worker to register")
    time.sleep(1.0)  # let it go idle, waiting out its 120 s poll interval

    woken = jobs.echo.enqueue("hint").job_id
    wait_for(lambda: _state(woken) == JobState.SUCCEEDED, timeout=30, what="a hint to wake the worker")

    marker = tmp_path / "marks"
    running = jobs.sleep.enqueue(60, marker=str(marker)).job_id
    wait_for(marker.exists, timeout=30, what="the long job to start")
    assert operator.cancel(running, actor="alice").name == "CANCELLATION_REQUESTED"
    wait_for(lambda: _state(running) == JobState.CANCELLED, timeout=30, what="the cancel request to arrive")

    worker.send_signal(signal.SIGTERM)
    assert worker.wait(20) == 0
    assert "pooler" not in workers.log(0)  # neither check backwave.W003/W004 nor the listener's warning
    assert _logins(pgbouncer) >= 2  # the pump's and the outcome writer's connections at least


def test_a_worker_listening_through_pgbouncer_warns_and_still_finds_jobs_by_polling(workers, pgbouncer):
    _through(workers, pgbouncer)
    worker = workers.start("--queues", "default", LISTEN_DATABASE=None)
    wait_for(lambda: "Listening for wake-up hints through a connection pooler" in workers.log(0), what="the warning")
    job_id = jobs.echo.enqueue().job_id
    wait_for(lambda: _state(job_id) == JobState.SUCCEEDED, what="the poll to find the job")
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(20) == 0
    log = workers.log(0)
    assert "backwave.W003" in log  # the start-up check said it first
    assert "backwave.W004" not in log  # the pgbouncer alias keeps no state past a transaction


def test_a_worker_rides_out_pgbouncer_going_away_and_loses_nothing(workers, pgbouncer, tmp_path):
    total = 200
    marker = tmp_path / "marks"
    receipts = enqueue_many([jobs.sleep.prepare(0.05, marker=str(marker)) for _ in range(total)])
    job_ids = {receipt.job_id for receipt in receipts}
    _through(workers, pgbouncer)
    worker = workers.start("--queues", "slow", "--concurrency", "5")

    def succeeded() -> int:
        return JobRecord.objects.filter(state=JobState.SUCCEEDED).count()

    wait_for(lambda: succeeded() >= 20, timeout=60, what="the worker to get going")
    pgbouncer.kill()
    wait_for(lambda: "Database fault" in workers.log(0), timeout=30, what="the worker to notice")
    assert succeeded() < total
    pgbouncer.start()
    wait_for(lambda: succeeded() == total, timeout=120, what="every job to succeed after the restart")

    worker.send_signal(signal.SIGTERM)
    assert worker.wait(30) == 0
    assert Counter(JobRecord.objects.values_list("state", flat=True)) == {JobState.SUCCEEDED: total}
    outcomes = Counter(
        JobTransition.objects.filter(state=JobState.SUCCEEDED).values_list("job__job_id", flat=True)
    )
    assert set(outcomes) == job_ids
    assert set(outcomes.values()) == {1}
    finished = {line.split()[1] for line in marker.read_text().splitlines() if line.startswith("done")}
    assert finished == {str(job_id) for job_id in job_ids}
