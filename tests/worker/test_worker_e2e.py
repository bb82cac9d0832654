"""The worker as users run it: ``manage.py backwave_worker`` subprocesses against the test database.

Everything runs on PostgreSQL; tests that need it (session kills, NOTIFY) are marked so, and the
rest also run on SQLite and MariaDB.
"""

from __future__ import annotations

import itertools
import os
import signal
import socket
import time
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection, transaction
from django.db.models import Count
from django.utils import timezone

from backwave_django import JobState, NewJob, RetryPolicy, operator, store
from backwave_django.models import JobRecord, JobTag, JobTransition, WorkerNode
from tests import pgbouncer as pgbouncer_leg
from tests.jobsapp import jobs

from .conftest import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def _record(job_id: uuid.UUID) -> JobRecord:
    return JobRecord.objects.get(job_id=job_id)


def _state(job_id: uuid.UUID) -> JobState:
    return JobState(_record(job_id).state)


def _marks(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_a_job_runs_and_its_output_and_tags_are_stored(workers):
    echo = jobs.echo.enqueue("o-1", amount=5).job_id
    tagged = jobs.tagger.enqueue().job_id
    result = workers.run("--burst", "--queues", "default")
    assert result.returncode == 0, result.stderr
    record = _record(echo)
    assert (record.state, record.attempt) == (JobState.SUCCEEDED, 1)
    assert record.output == {"args": ["o-1"], "kwargs": {"amount": 5}}
    assert set(JobTag.objects.filter(job__job_id=tagged).values_list("key", "value")) == {
        ("", "from-definition"),
        ("tenant", "acme"),
        ("", "seen"),
    }
    assert "started" in result.stderr
    assert "stopped after 2 job(s)" in result.stderr


def test_async_handlers_run_and_sync_handlers_read_parent_output(workers):
    parent = jobs.echo.enqueue("p").job_id
    child = jobs.parent_reader.using(parents=[parent]).enqueue(str(parent)).job_id
    sleeper = jobs.async_sleep.enqueue(0.1).job_id
    assert workers.run("--burst", "--queues", "default,slow").returncode == 0
    assert _record(child).output == {"parent": {"args": ["p"], "kwargs": {}}}
    assert _record(sleeper).output == "async 1"


def test_retries_follow_the_jobs_policy_and_the_last_attempt_dead_letters(workers):
    flaky = jobs.flaky.enqueue(fail_until=2).job_id
    failing = jobs.always_fails.enqueue().job_id
    result = workers.run("--burst", "--queues", "default")
    assert result.returncode == 0, result.stderr
    assert (_state(flaky), _record(flaky).attempt, _record(flaky).output) == (JobState.SUCCEEDED, 2, 2)
    record = _record(failing)
    assert (record.state, record.attempt, record.terminal_cause) == (
        JobState.DEAD_LETTERED,
        2,
        "gateway timeout",
    )
    details = list(
        JobTransition.objects.filter(job=record, failure_detail__isnull=False).values_list(
            "failure_detail", flat=True
        )
    )
    assert len(details) == 2
    assert str(details[-1]).startswith("builtins.ValueError: gateway timeout\nTraceback")
    assert "dead-lettered on attempt 2: gateway timeout" in result.stderr


def test_oversized_output_is_a_failure_never_truncated(workers):
    job_id = jobs.big_output.using(max_attempts=1).enqueue().job_id
    workers.run("--burst", "--queues", "default")
    record = _record(job_id)
    assert record.state == JobState.DEAD_LETTERED
    assert record.output is None
    assert "70,002 bytes; MAX_OUTPUT_BYTES is 65,536" in str(record.terminal_cause)


def test_a_non_json_return_value_is_a_failure_that_says_so(workers):
    job_id = jobs.set_output.enqueue().job_id
    assert workers.run("--burst", "--queues", "default").returncode == 0
    record = _record(job_id)
    assert record.state == JobState.DEAD_LETTERED
    assert f"output of job {job_id} is not JSON-serializable" in str(record.terminal_cause)


def test_unknown_wire_names_and_changed_signatures_are_quarantined(workers):
    now = timezone.now()
    unknown, changed = uuid.uuid4(), uuid.uuid4()
    store.enqueue(
        NewJob(job_id=unknown, wire_name="gone", payload={"args": [], "kwargs": {}}, due_time=now), now=now
    )
    store.enqueue(
        NewJob(job_id=changed, wire_name="test.echo", payload={"positional": 1}, due_time=now), now=now
    )
    assert workers.run("--burst", "--queues", "default").returncode == 0
    assert (_state(unknown), _record(unknown).terminal_cause) == (
        JobState.QUARANTINED,
        "no handler registered for wire name 'gone'",
    )
    assert str(_record(changed).terminal_cause).startswith(
        "payload for wire name 'test.echo' no longer decodes:"
    )
    assert _record(unknown).attempt == 1


def test_a_killed_worker_s_job_is_finished_once_by_another_worker(workers, tmp_path):
    marker = tmp_path / "marks"
    job_id = jobs.sleep.enqueue(1.5, marker=str(marker)).job_id
    first = workers.start("--queues", "slow", "--name", "doomed")
    try:
        wait_for(lambda: any(m.startswith("start") for m in _marks(marker)), what="the job to start")
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{workers.logs()}") from None
    first.send_signal(signal.SIGKILL)
    first.wait(10)
    second = workers.start("--queues", "slow", "--name", "rescuer")
    try:
        wait_for(lambda: _state(job_id) == JobState.SUCCEEDED, timeout=30, what="the job to succeed")
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{workers.logs()}") from None
    second.send_signal(signal.SIGTERM)
    assert second.wait(20) == 0, workers.logs()
    record = _record(job_id)
    actors = list(
        JobTransition.objects.filter(job=record).order_by("ordinal").values_list("actor", "state", "attempt")
    )
    seen = f"transitions {actors}, marks {_marks(marker)}\n{workers.logs()}"
    assert record.attempt == 2, seen
    assert record.lease_owner is None
    marks = [m.split()[0:3] for m in _marks(marker)]
    assert marks.count(["done", str(job_id), "2"]) == 1, seen
    assert [m for m in marks if m[0] == "done"] == [["done", str(job_id), "2"]], seen
    assert "lease-expiry" in [actor for actor, _, _ in actors], seen


@pytest.mark.parametrize("handler", ["sync", "async"])
def test_a_running_job_is_cancelled_from_another_process(workers, tmp_path, handler):
    marker = tmp_path / "marks"
    if handler == "sync":
        job_id = jobs.sleep.enqueue(30, marker=str(marker)).job_id
    else:
        job_id = jobs.async_sleep.enqueue(30).job_id
    worker = workers.start("--queues", "slow")
    wait_for(lambda: _state(job_id) == JobState.LEASED, what="the job to be leased")
    assert operator.cancel(job_id, actor="alice").name == "CANCELLATION_REQUESTED"
    wait_for(lambda: _state(job_id) == JobState.CANCELLED, what="the cancel to reach the handler")
    assert _record(job_id).terminal_cause == "operator-cancel"
    assert _record(job_id).cancel_requested is False
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(20) == 0


def test_graceful_shutdown_lets_short_jobs_finish_and_releases_long_ones(workers, tmp_path):
    marker = tmp_path / "marks"
    short = jobs.sleep.enqueue(1.0, marker=str(marker)).job_id
    long = jobs.sleep.enqueue(60, marker=str(marker)).job_id
    worker = workers.start("--queues", "slow", "--shutdown-timeout", "3")
    wait_for(
        lambda: len([m for m in _marks(marker) if m.startswith("start")]) == 2, what="both jobs to start"
    )
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(20) == 0
    assert _state(short) == JobState.SUCCEEDED
    record = _record(long)
    # Given back: due again now for any worker, and the attempt it cut short does not count.
    assert (record.state, record.attempt, record.max_attempts) == (JobState.SCHEDULED, 1, 10 + 1)
    assert (record.lease_owner, record.lease_expiry) == (None, None)
    assert record.due_time <= timezone.now()
    released = JobTransition.objects.filter(job=record).order_by("ordinal").last()
    assert released is not None
    assert released.actor.startswith(socket.gethostname())
    log = workers.log(0)
    assert "Released 1 lease(s)" in log
    assert not WorkerNode.objects.exists()


def test_a_second_signal_exits_at_once_with_status_1(workers, tmp_path):
    marker = tmp_path / "marks"
    jobs.sleep.enqueue(60, marker=str(marker))
    worker = workers.start("--queues", "slow", "--shutdown-timeout", "60")
    wait_for(lambda: _marks(marker), what="the job to start")
    worker.send_signal(signal.SIGTERM)
    wait_for(lambda: "stopping" in workers.log(0), what="the worker to begin stopping")
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(10) == 1


@pytest.mark.postgres
@pytest.mark.skipif(
    pgbouncer_leg.leg_active(),
    reason="terminates every server connection of the database; behind PgBouncer those are the "
    "test's own pooled connections too, so the test itself would be cut off, not just the worker",
)
def test_killing_the_worker_s_database_sessions_does_not_stop_it(workers):
    worker = workers.start("--queues", "default")
    wait_for(lambda: WorkerNode.objects.exists(), what="the worker to register")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        assert cursor.fetchone()[0] >= 1
    job_id = jobs.echo.enqueue("after the fault").job_id
    wait_for(lambda: _state(job_id) == JobState.SUCCEEDED, timeout=30, what="the job to run after the fault")
    assert worker.poll() is None
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(20) == 0


def test_weighted_dispatch_claims_in_proportion(workers, tmp_path):
    marker = tmp_path / "marks"
    for _ in range(60):
        jobs.weighted_a.enqueue(str(marker))
        jobs.weighted_b.enqueue(str(marker))
    result = workers.run("--weighted", "wa=3,wb=1", "--concurrency", "4", "--max-jobs", "40")
    assert result.returncode == 0, result.stderr
    done = dict(
        JobRecord.objects.filter(state=JobState.SUCCEEDED).values_list("queue").annotate(n=Count("sequence"))
    )
    assert sum(done.values()) == 40
    assert 26 <= done.get("wa", 0) <= 34, done


def test_slots_left_beside_long_jobs_keep_serving_short_ones(workers, tmp_path):
    # 8 slots, 3 held by long jobs: the 5 free slots are fewer than a full claim batch, and must
    # still be claimed (after a short linger) rather than wait for the long jobs.
    marker = tmp_path / "marks"
    long = [jobs.sleep.using(queue="default").enqueue(8, marker=str(marker)).job_id for _ in range(3)]
    worker = workers.start("--queues", "default", "--concurrency", "8", "--shutdown-timeout", "1")
    wait_for(lambda: all(_state(j) == JobState.LEASED for j in long), what="the long jobs to start")
    short = [jobs.echo.enqueue(i).job_id for i in range(20)]
    wait_for(lambda: all(_state(j) == JobState.SUCCEEDED for j in short), timeout=6, what="the short jobs")
    assert all(_state(j) == JobState.LEASED for j in long)
    worker.send_signal(signal.SIGTERM)
    worker.wait(30)


def test_max_jobs_recycles_the_process(workers):
    for i in range(5):
        jobs.echo.enqueue(i)
    result = workers.run("--queues", "default", "--max-jobs", "3", "--concurrency", "1")
    assert result.returncode == 0, result.stderr
    assert JobRecord.objects.filter(state=JobState.SUCCEEDED).count() == 3


def test_the_supervisor_restarts_a_killed_child(workers):
    supervisor = workers.start("--queues", "default", "--processes", "2")
    first = set(
        wait_for(
            lambda: (
                set(WorkerNode.objects.values_list("pid", flat=True))
                if WorkerNode.objects.count() == 2
                else None
            ),
            what="two children",
        )
    )
    victim = sorted(first)[0]
    os.kill(victim, signal.SIGKILL)
    wait_for(
        lambda: len(set(WorkerNode.objects.values_list("pid", flat=True)) - first) >= 1,
        timeout=30,
        what="a replacement child",
    )
    job_id = jobs.echo.enqueue().job_id
    wait_for(lambda: _state(job_id) == JobState.SUCCEEDED, what="the job to run")
    supervisor.send_signal(signal.SIGTERM)
    assert supervisor.wait(30) == 0


def test_burst_with_processes_exits_once_every_child_has_drained(workers):
    for i in range(30):
        jobs.echo.enqueue(i)
    result = workers.run("--burst", "--queues", "default", "--processes", "2")
    assert result.returncode == 0, result.stderr
    assert JobRecord.objects.filter(state=JobState.SUCCEEDED).count() == 30
    assert "starting a fresh one" not in result.stderr


@pytest.mark.postgres
def test_a_hint_wakes_an_idle_worker_long_before_its_poll_interval(workers):
    worker = workers.start(
        "--queues", "default", POLL_INTERVAL=120, HEARTBEAT_INTERVAL=60, LEASE_DURATION=180
    )
    wait_for(lambda: "Listening" in workers.log(0) or WorkerNode.objects.exists(), what="the worker to start")
    wait_for(lambda: WorkerNode.objects.exists(), what="the worker to register")
    time.sleep(1.0)  # let it go idle, waiting out its 120 s poll interval
    job_id = jobs.echo.enqueue().job_id
    wait_for(lambda: _state(job_id) == JobState.SUCCEEDED, timeout=30, what="the hint to wake the worker")
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(20) == 0


def test_a_lost_lease_is_abandoned_and_its_result_never_reported(workers, tmp_path):
    marker = tmp_path / "marks"
    job_id = jobs.sleep.enqueue(2.0, marker=str(marker)).job_id
    worker = workers.start("--queues", "slow")
    wait_for(lambda: _marks(marker), what="the job to start")
    # Another node takes the job over: its lease lapses (forced here), a sweep reschedules it, a
    # thief claims attempt 2. The first worker's next heartbeat finds the lease gone.
    # One transaction, so the worker's own sweep and claims cannot step in between.
    now = timezone.now()
    with transaction.atomic():
        JobRecord.objects.filter(job_id=job_id).update(lease_expiry=now)
        assert store.expire_leases(now=now, queues=["slow"], retry=RetryPolicy(backoff=[0])) == 1
        [stolen] = store.claim(
            worker_id="thief", queues=["slow"], max_jobs=1, lease_duration=timedelta(minutes=5), now=now
        )
    assert stolen.attempt == 2
    wait_for(lambda: "lost; abandoning it" in workers.log(0), what="the lease loss to be noticed")
    time.sleep(2.5)  # past the handler's own duration: whatever it did, nothing may be reported
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(20) == 0
    record = _record(job_id)
    assert (record.state, record.lease_owner, record.attempt) == (JobState.LEASED, "thief", 2)


def test_maintenance_purges_by_retention_and_applies_queue_settings(workers):
    from backwave_django.models import OperatorAudit, QueueSettings

    job_id = jobs.echo.enqueue().job_id
    # Maintenance runs on a worker's first pass; the long interval keeps a slow first run from
    # purging the job before it is checked.
    retention = {
        "RETENTION": {"SUCCEEDED_OR_CANCELLED": 0},
        "QUEUES": {"default": {"concurrency_limit": 7}},
        "MAINTENANCE_INTERVAL": 3600,
    }
    assert workers.run("--burst", "--queues", "default", **retention).returncode == 0
    assert _state(job_id) == JobState.SUCCEEDED
    assert workers.run("--burst", "--queues", "default", **retention).returncode == 0
    assert not JobRecord.objects.filter(job_id=job_id).exists()
    assert QueueSettings.objects.get(queue="default").concurrency_limit == 7
    audits = list(OperatorAudit.objects.values_list("actor", "action", "target"))
    assert audits == [
        ("settings", "set_concurrency_limit", "default")
    ]  # applied once: unchanged the second time


def test_verbose_logging_adds_a_line_per_job(workers):
    jobs.echo.enqueue()
    result = workers.run("--burst", "--queues", "default", "-v", "2")
    assert "Running test.echo" in result.stderr


def test_burst_leaves_jobs_due_later(workers):
    later = jobs.echo.using(run_after=timedelta(hours=1)).enqueue().job_id
    now_job = jobs.echo.enqueue().job_id
    assert workers.run("--burst", "--queues", "default").returncode == 0
    assert (_state(now_job), _state(later)) == (JobState.SUCCEEDED, JobState.SCHEDULED)


def test_help_documents_every_flag(workers):
    result = workers.run("--help")
    for flag in (
        "--queues",
        "--weighted",
        "--concurrency",
        "--processes",
        "--burst",
        "--max-jobs",
        "--name",
        "--shutdown-timeout",
    ):
        assert flag in result.stdout, flag


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--weighted", "a=0"], "all weights >= 1"),
        (["--weighted", "a"], "expected queue=weight"),
        (["--queues", "a", "--weighted", "a=1"], "alternatives"),
        (["--concurrency", "0"], "expected a positive integer"),
    ],
)
def test_bad_flags_are_refused_with_a_clear_message(workers, args, message):
    result = workers.run(*args)
    assert result.returncode != 0
    assert message in result.stderr


SECONDLY = {"ticker": {"job": "test.echo", "cron": "* * * * * *", "args": ["tick"], "queue": "default"}}


def test_a_settings_schedule_every_second_mints_on_time_in_a_real_worker(workers):
    worker = workers.start("--queues", "default", SCHEDULES=SECONDLY, MAINTENANCE_INTERVAL=0.2)
    wait_for(
        lambda: JobRecord.objects.filter(schedule_id="ticker", state=JobState.SUCCEEDED).count() >= 3,
        what="3 ticks",
    )
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(20) == 0
    minted = list(JobRecord.objects.filter(schedule_id="ticker").order_by("due_time"))
    dues = [j.due_time for j in minted]
    assert all(d.microsecond == 0 for d in dues)
    assert all(b - a == timedelta(seconds=1) for a, b in itertools.pairwise(dues))
    # On time: every tick minted, each due exactly at its tick, none late enough to be skipped.
    from backwave_django.models import RecurringSchedule

    assert RecurringSchedule.objects.get(schedule_id="ticker").skipped_ticks == []


def test_workers_sync_settings_schedules_and_prune_undeclared_ones(workers):
    from backwave_django.models import RecurringSchedule

    nightly = {"nightly": {"job": "test.echo", "cron": "0 2 * * *", "time_zone": "Europe/Berlin"}}
    assert workers.run("--burst", "--queues", "default", SCHEDULES={**SECONDLY, **nightly}).returncode == 0
    assert sorted(RecurringSchedule.objects.values_list("schedule_id", flat=True)) == ["nightly", "ticker"]
    result = workers.run("--burst", "--queues", "default", SCHEDULES=nightly)
    assert result.returncode == 0
    assert list(RecurringSchedule.objects.values_list("schedule_id", "cron")) == [("nightly", "0 0 2 * * *")]
    assert "Removed schedules no longer declared in settings: ticker" in result.stderr


@pytest.mark.postgres
def test_two_workers_minting_the_same_schedule_create_each_instance_once(workers):
    first = workers.start("--queues", "nobody", SCHEDULES=SECONDLY, MAINTENANCE_INTERVAL=0.05)
    second = workers.start("--queues", "nobody", SCHEDULES=SECONDLY, MAINTENANCE_INTERVAL=0.05)
    wait_for(lambda: JobRecord.objects.filter(schedule_id="ticker").count() >= 5, what="5 instances")
    for process in (first, second):
        process.send_signal(signal.SIGTERM)
        assert process.wait(20) == 0
    dues = list(
        JobRecord.objects.filter(schedule_id="ticker").order_by("due_time").values_list("due_time", flat=True)
    )
    assert len(dues) == len(set(dues))
    assert all(b - a == timedelta(seconds=1) for a, b in itertools.pairwise(dues)), dues
