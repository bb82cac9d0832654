"""A worker's outcome counters and histograms, fed one written batch at a time."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from backwave_django.context import JobContext
from backwave_django.core.outcomes import (
    Cancelled,
    ClaimedJob,
    Failure,
    Snoozed,
    Success,
    Unroutable,
)
from backwave_django.core.states import OutcomeResult
from backwave_django.metrics.recorder import UNREGISTERED, WorkerMetrics
from backwave_django.worker.execution import Finished, Running
from backwave_django.worker.timeouts import Deadline

DUE = datetime(2026, 1, 1, tzinfo=UTC)
LATER = DUE + timedelta(minutes=5)
APPLIED = OutcomeResult.APPLIED


def _finished(outcome, *, wire_name="test.echo", queue="default", started=0.0, ended=0.0, timed_out=False):
    claimed = ClaimedJob(
        job_id=uuid.uuid4(),
        wire_name=wire_name,
        queue=queue,
        payload={"args": [], "kwargs": {}},
        attempt=1,
        due_time=DUE,
        lease_owner="w",
        lease_expiry=LATER,
    )
    context = JobContext(job_id=claimed.job_id, attempt=1, wire_name=wire_name, queue=queue)
    running = Running(claimed=claimed, context=context, started=DUE, handler_started=started, handler_ended=ended)
    if timed_out:
        running.deadline = Deadline(seconds=1.0, thread_id=None, cancel_task=None, timed_out=True)
    return Finished(running, outcome)


def _value(metrics: WorkerMetrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def test_each_result_is_counted_by_wire_name_queue_and_result():
    metrics = WorkerMetrics()
    start = DUE.timestamp() + 2
    batch = [
        _finished(Success(), started=start, ended=start + 0.5),
        _finished(Success(), started=start, ended=start + 0.5),
        _finished(Failure(next_due_time=LATER, error="boom"), started=start, ended=start + 1),
        _finished(Failure(next_due_time=None, error="boom"), started=start, ended=start + 1),
        _finished(Snoozed(next_due_time=LATER), started=start, ended=start + 1),
        _finished(Cancelled(cause="operator-cancel"), started=start, ended=start + 1),
        _finished(Success(), started=start, ended=start + 1),
    ]
    results = [APPLIED] * 6 + [OutcomeResult.STALE_LEASE]

    metrics.outcomes_written(batch, results)

    def outcomes(result: str) -> float | None:
        return _value(metrics, "backwave_job_outcomes_total", wire_name="test.echo", queue="default", result=result)

    assert [outcomes(r) for r in ("succeeded", "retried", "dead_lettered", "snoozed", "cancelled", "fenced")] == [
        2, 1, 1, 1, 1, 1
    ]


def test_run_time_is_handler_start_to_end_and_latency_is_due_time_to_start():
    metrics = WorkerMetrics()
    start = DUE.timestamp() + 3.0  # started 3 s after it was due
    metrics.outcomes_written([_finished(Success(), started=start, ended=start + 0.2)], [APPLIED])

    assert _value(metrics, "backwave_job_run_seconds_count", wire_name="test.echo") == 1
    assert _value(metrics, "backwave_job_run_seconds_sum", wire_name="test.echo") == pytest.approx(0.2)
    assert _value(metrics, "backwave_job_run_seconds_bucket", wire_name="test.echo", le="0.25") == 1
    assert _value(metrics, "backwave_job_run_seconds_bucket", wire_name="test.echo", le="0.1") == 0
    assert _value(metrics, "backwave_job_start_latency_seconds_sum", queue="default") == pytest.approx(3.0)
    assert _value(metrics, "backwave_job_start_latency_seconds_bucket", queue="default", le="5.0") == 1
    assert _value(metrics, "backwave_job_start_latency_seconds_bucket", queue="default", le="2.5") == 0


def test_an_unroutable_job_is_counted_under_one_label_and_not_timed():
    metrics = WorkerMetrics()
    batch = [
        _finished(Unroutable(reason="unknown wire name"), wire_name=f"stray.{n}") for n in range(3)
    ]

    metrics.outcomes_written(batch, [APPLIED] * 3)

    assert _value(
        metrics, "backwave_job_outcomes_total", wire_name=UNREGISTERED, queue="default", result="quarantined"
    ) == 3
    assert _value(metrics, "backwave_job_run_seconds_count", wire_name=UNREGISTERED) is None
    assert _value(metrics, "backwave_job_start_latency_seconds_count", queue="default") is None


def test_a_timed_out_attempt_counts_as_a_timeout_and_as_its_failure():
    metrics = WorkerMetrics(wall=lambda: DUE.timestamp() + 40)
    start = DUE.timestamp() + 1
    abandoned = _finished(Failure(next_due_time=None, error="timed out"), started=start, timed_out=True)

    metrics.outcomes_written([abandoned], [APPLIED])

    assert _value(metrics, "backwave_job_timeouts_total", wire_name="test.echo", queue="default") == 1
    assert _value(
        metrics, "backwave_job_outcomes_total", wire_name="test.echo", queue="default", result="dead_lettered"
    ) == 1
    # Abandoned, it never returned: its run time runs to when the outcome was written.
    assert _value(metrics, "backwave_job_run_seconds_sum", wire_name="test.echo") == pytest.approx(39)


def test_the_worker_gauges_are_read_when_scraped():
    metrics = WorkerMetrics()
    running = [1, 2]
    beats: list[float | None] = [None]
    metrics.watch(running=lambda: len(running), slots=8, last_heartbeat=lambda: beats[0])

    assert _value(metrics, "backwave_worker_up") == 1
    assert _value(metrics, "backwave_worker_slots") == 8
    assert _value(metrics, "backwave_worker_running_jobs") == 2
    assert _value(metrics, "backwave_worker_last_heartbeat_timestamp_seconds") == 0
    running.append(3)
    beats[0] = 1234.5
    assert _value(metrics, "backwave_worker_running_jobs") == 3
    assert _value(metrics, "backwave_worker_last_heartbeat_timestamp_seconds") == 1234.5
