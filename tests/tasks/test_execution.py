"""Tasks run through the worker's own execution path (the Executor), in-process.

Pins the execution hooks: Django's ``TaskContext`` as the context argument, ``task_started`` before
the call and ``task_finished`` with the outcome's status, on sync and async handlers alike.
"""

from __future__ import annotations

import queue
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("django.tasks", reason="the Django Tasks backend needs Django 6.0+")

from django.tasks import TaskResultStatus
from django.tasks.signals import task_finished, task_started
from django.utils import timezone

from backwave_django import store
from backwave_django.conf import get_settings
from backwave_django.context import JobContext
from backwave_django.core.outcomes import ClaimedJob, Failure, OutcomeReport, Success
from backwave_django.core.states import OutcomeResult
from backwave_django.tasks import BackWaveBackend
from backwave_django.worker.execution import Executor, Finished, Running
from tests.jobsapp import tasks
from tests.tasks.conftest import SignalLog, claim

# The executor's threads use their own database connections: the rows must be committed.
pytestmark = pytest.mark.django_db(transaction=True)


class InProcessWorker:
    """Claims one job at a time and runs it on a real Executor, then writes its outcome."""

    worker_id = "in-process:1"

    def __init__(self) -> None:
        self.finished: queue.Queue[Finished] = queue.Queue()
        self.executor = Executor(concurrency=2, settings=get_settings(), on_finished=self.finished.put)

    def run(self, result_id: str) -> Finished:
        claimed = claim(result_id, worker=self.worker_id)
        self.executor.start_many([self._running(claimed)])
        finished = self.finished.get(timeout=20)
        applied = store.report_outcome(
            OutcomeReport(
                job_id=claimed.job_id,
                worker_id=self.worker_id,
                attempt=claimed.attempt,
                outcome=finished.outcome,
                failure_detail=finished.failure_detail,
                output=finished.output,
            ),
            now=timezone.now(),
        )
        assert applied is OutcomeResult.APPLIED
        return finished

    def _running(self, claimed: ClaimedJob) -> Running:
        context = JobContext(
            job_id=claimed.job_id, attempt=claimed.attempt, wire_name=claimed.wire_name, queue=claimed.queue
        )
        return Running(claimed=claimed, context=context, started=timezone.now())


@pytest.fixture
def worker() -> Iterator[InProcessWorker]:
    pool = InProcessWorker()
    yield pool
    pool.executor.shutdown()


def test_sync_task_runs_and_sends_started_then_finished(
    worker: InProcessWorker, task_signals: SignalLog
) -> None:
    result = tasks.add.enqueue(2, 3)

    finished = worker.run(result.id)

    assert isinstance(finished.outcome, Success)
    assert finished.output == 5
    assert task_signals.names(result.id) == [
        ("enqueued", "READY"),
        ("started", "RUNNING"),
        ("finished", "SUCCESSFUL"),
    ]
    started = task_signals.results[1]
    assert started.worker_ids == [worker.worker_id]
    assert started.started_at is not None
    assert task_signals.results[2].return_value == 5
    assert {event[3] for event in task_signals.events} == {BackWaveBackend}
    done = tasks.add.get_result(result.id)
    assert done.status == TaskResultStatus.SUCCESSFUL
    assert done.return_value == 5
    assert done.worker_ids == [worker.worker_id]


def test_task_taking_context_gets_djangos_task_context(worker: InProcessWorker) -> None:
    result = tasks.whoami.enqueue()

    finished = worker.run(result.id)

    assert finished.output == {"id": result.id, "attempt": 1, "worker_ids": [worker.worker_id]}


def test_failure_with_a_retry_left_finishes_ready_then_failed_at_the_ceiling(
    worker: InProcessWorker, task_signals: SignalLog
) -> None:
    result = tasks.always_fails.enqueue()

    first = worker.run(result.id)
    second = worker.run(result.id)

    assert isinstance(first.outcome, Failure)
    assert first.outcome.next_due_time is not None
    assert isinstance(second.outcome, Failure)
    assert second.outcome.next_due_time is None
    finishes = [
        r
        for (name, *_), r in zip(task_signals.events, task_signals.results, strict=True)
        if name == "finished"
    ]
    assert [str(r.status) for r in finishes] == ["READY", "FAILED"]
    assert [e.exception_class_path for e in finishes[-1].errors] == [
        "builtins.ValueError",
        "builtins.ValueError",
    ]
    failed = tasks.always_fails.get_result(result.id)
    assert failed.status == TaskResultStatus.FAILED
    assert failed.attempts == 2
    assert [e.exception_class_path for e in failed.errors] == ["builtins.ValueError", "builtins.ValueError"]
    assert "gateway timeout" in failed.errors[0].traceback


def test_flaky_task_sees_its_attempt_and_succeeds(worker: InProcessWorker) -> None:
    result = tasks.flaky.enqueue(fail_until=2)

    worker.run(result.id)
    finished = worker.run(result.id)

    assert finished.output == 2
    done = tasks.flaky.get_result(result.id)
    assert done.status == TaskResultStatus.SUCCESSFUL
    assert done.attempts == 2
    assert [e.exception_class_path for e in done.errors] == ["builtins.RuntimeError"]


def test_async_task_runs_on_the_event_loop_with_signals(
    worker: InProcessWorker, task_signals: SignalLog
) -> None:
    result = tasks.async_double.enqueue(21)

    finished = worker.run(result.id)

    assert finished.output == 42
    assert task_signals.names(result.id)[1:] == [("started", "RUNNING"), ("finished", "SUCCESSFUL")]
    done: Any = tasks.async_double.get_result(
        result.id
    )  # django-stubs type an async task's value as a coroutine
    assert done.return_value == 42


def test_a_failing_task_finished_receiver_does_not_change_the_outcome(
    worker: InProcessWorker, caplog: pytest.LogCaptureFixture
) -> None:
    def explode(**kwargs: Any) -> None:
        raise RuntimeError("receiver bug")

    task_finished.connect(explode, weak=False, dispatch_uid="explode")
    try:
        result = tasks.add.enqueue(1, 1)
        finished = worker.run(result.id)
    finally:
        task_finished.disconnect(dispatch_uid="explode")

    assert isinstance(finished.outcome, Success)
    assert tasks.add.get_result(result.id).status == TaskResultStatus.SUCCESSFUL
    assert "Execution hooks of job" in caplog.text


def test_a_failing_task_started_receiver_fails_the_attempt(worker: InProcessWorker) -> None:
    def explode(**kwargs: Any) -> None:
        raise RuntimeError("receiver bug")

    task_started.connect(explode, weak=False, dispatch_uid="explode")
    try:
        result = tasks.add.enqueue(1, 1)
        finished = worker.run(result.id)
    finally:
        task_started.disconnect(dispatch_uid="explode")

    assert isinstance(finished.outcome, Failure)
    assert finished.failure_detail is not None
    assert finished.failure_detail.startswith("builtins.RuntimeError: receiver bug")
    assert tasks.add.get_result(result.id).status == TaskResultStatus.READY


# --- Time limits and outcomes the function decides -------------------------------------------------


def test_a_task_past_its_timeout_is_stopped_and_fails(worker: InProcessWorker) -> None:
    result = tasks.spins.enqueue(30)
    assert job_row_timeout(result.id) == 0.3
    finished = worker.run(result.id)
    assert isinstance(finished.outcome, Failure)
    assert finished.outcome.error == "timed out after 0.3s"
    assert tasks.spins.get_result(result.id).status == TaskResultStatus.FAILED


def test_discard_on_and_snooze_in_a_task(worker: InProcessWorker) -> None:
    discarded = tasks.looks_up.enqueue("k")
    finished = worker.run(discarded.id)
    assert isinstance(finished.outcome, Failure)
    assert finished.outcome.next_due_time is None
    assert tasks.looks_up.get_result(discarded.id).status == TaskResultStatus.FAILED
    snoozed = tasks.snoozes.enqueue()
    finished = worker.run(snoozed.id)
    assert type(finished.outcome).__name__ == "Snoozed"
    assert tasks.snoozes.get_result(snoozed.id).status == TaskResultStatus.READY


def test_the_backends_timeout_option_applies_to_tasks_that_set_none(settings: Any) -> None:
    settings.TASKS = {
        "default": {"BACKEND": "backwave_django.tasks.BackWaveBackend", "OPTIONS": {"TIMEOUT": 45}}
    }
    from django.tasks import task_backends

    backend = task_backends["default"]
    assert backend.check() == []
    result = backend.enqueue(tasks.add, [1, 2], {})
    assert job_row_timeout(result.id) == 45.0
    assert job_row_timeout(backend.enqueue(tasks.spins, [0], {}).id) == 0.3  # its own wins


def job_row_timeout(result_id: str) -> float | None:
    import uuid

    from backwave_django.models import JobRecord

    return JobRecord.objects.values_list("timeout", flat=True).get(job_id=uuid.UUID(result_id))


def test_a_task_run_by_the_harness_finishes_at_the_harness_time(task_signals: SignalLog) -> None:
    """``finished_at`` is the time the job ended on the worker's clock: virtual under the harness."""
    from datetime import UTC, datetime

    from backwave_django.testing import BackWaveHarness

    start = datetime(2031, 5, 6, 7, 8, 9, tzinfo=UTC)
    with BackWaveHarness(start=start) as harness:
        result = tasks.add.enqueue(1, 2)
        harness.run_until_idle()
        finished_at = harness.now
    [finished] = [r for event, r in zip(task_signals.events, task_signals.results, strict=True) if event[0] == "finished"]
    assert finished.status == TaskResultStatus.SUCCESSFUL
    assert finished.finished_at == finished_at == start
    assert tasks.add.get_result(result.id).finished_at == start  # the job's terminal_at agrees
