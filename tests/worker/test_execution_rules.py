"""How the worker runs one attempt, in-process: outcomes decided by the handler, time limits,
abandonment, ``current_job()`` and progress. No database: the executor only runs handlers."""

from __future__ import annotations

import queue
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from backwave_django import Discard, JobTimeout, Snooze, current_job
from backwave_django.conf import load
from backwave_django.context import JobContext
from backwave_django.core.outcomes import ClaimedJob, Failure, Snoozed, Success
from backwave_django.exceptions import MAX_SNOOZE_DELAY
from backwave_django.worker.execution import Executor, Finished, Running, from_exception

from ..jobsapp import jobs

T0 = datetime(2026, 11, 30, tzinfo=UTC)
SETTINGS = load({"TIMEOUT_GRACE": 0.3})[0]


def _running(
    wire_name: str, *args: Any, timeout: float | None = None, attempt: int = 1, **kwargs: Any
) -> Running:
    definition = {d.wire_name: d for d in vars(jobs).values() if hasattr(d, "wire_name")}[wire_name]
    policy = definition.policy
    claimed = ClaimedJob(
        job_id=uuid.uuid4(),
        wire_name=wire_name,
        queue="slow",
        payload={"args": list(args), "kwargs": kwargs},
        attempt=attempt,
        due_time=T0,
        lease_owner="w",
        lease_expiry=T0 + timedelta(minutes=5),
        max_attempts=policy.max_attempts,
        backoff=policy.backoff,
        timeout=timeout,
    )
    context = JobContext(job_id=claimed.job_id, attempt=attempt, wire_name=wire_name, queue="slow")
    return Running(claimed=claimed, context=context, started=T0)


class Outcomes:
    """The executor's ``on_finished``, with a way to wait for the next outcome."""

    def __init__(self) -> None:
        self.queue: queue.SimpleQueue[Finished] = queue.SimpleQueue()

    def __call__(self, finished: Finished) -> None:
        self.queue.put(finished)

    def next(self, timeout: float = 10.0) -> Finished:
        return self.queue.get(timeout=timeout)

    def none_within(self, seconds: float) -> bool:
        try:
            self.queue.get(timeout=seconds)
        except queue.Empty:
            return True
        return False


@pytest.fixture
def outcomes() -> Outcomes:
    return Outcomes()


@pytest.fixture
def executor(outcomes: Outcomes) -> Iterator[Executor]:
    running = Executor(concurrency=2, settings=SETTINGS, on_finished=outcomes)
    yield running
    running.shutdown()


def _timeout_failure(finished: Finished, seconds: str) -> None:
    assert isinstance(finished.outcome, Failure)
    assert finished.outcome.error == f"timed out after {seconds}s"
    assert finished.failure_detail is not None
    assert finished.failure_detail.startswith(f"backwave_django.JobTimeout: timed out after {seconds}s\n")


# --- Time limits -----------------------------------------------------------------------------------


def test_a_sync_handler_past_its_timeout_is_stopped_and_retried(
    executor: Executor, outcomes: Outcomes
) -> None:
    executor.start_many([_running("test.busy", 30, timeout=0.2)])
    finished = outcomes.next()
    _timeout_failure(finished, "0.2")
    assert isinstance(finished.outcome, Failure)
    assert finished.outcome.next_due_time is not None
    assert executor.abandoned_threads == 0


def test_an_async_handler_past_its_timeout_is_cancelled(executor: Executor, outcomes: Outcomes) -> None:
    executor.start_many([_running("test.async-busy", 30, timeout=0.2)])
    _timeout_failure(outcomes.next(), "0.2")


def test_the_last_attempt_past_its_timeout_dead_letters(executor: Executor, outcomes: Outcomes) -> None:
    executor.start_many([_running("test.busy", 30, timeout=0.1, attempt=2)])
    finished = outcomes.next()
    assert isinstance(finished.outcome, Failure)
    assert finished.outcome.next_due_time is None


def test_a_handler_blocked_in_c_is_abandoned_after_the_grace_and_its_thread_replaced(
    executor: Executor, outcomes: Outcomes
) -> None:
    started = time.monotonic()
    executor.start_many([_running("test.blocked", 2.0, timeout=0.1)])
    finished = outcomes.next()
    # Reported without it, after the timeout and the grace, while the sleep still runs.
    assert time.monotonic() - started < 2.0
    _timeout_failure(finished, "0.1")
    assert executor.abandoned_threads == 1
    # Its slot works: another job runs on the replacement thread meanwhile.
    executor.start_many([_running("test.echo", 1)])
    assert isinstance(outcomes.next().outcome, Success)
    # When the stuck call returns at last its thread leaves, uncounted, and reports nothing more.
    assert outcomes.none_within(2.5)
    assert executor.abandoned_threads == 0


def test_a_worker_whose_jobs_have_no_timeout_starts_no_watchdog(
    executor: Executor, outcomes: Outcomes
) -> None:
    executor.start_many([_running("test.busy", 0.01), _running("test.async-busy", 0.01)])
    assert {type(outcomes.next().outcome) for _ in range(2)} == {Success}
    assert executor.watchdog is None


def test_a_handler_finishing_before_its_timeout_is_not_interrupted(
    executor: Executor, outcomes: Outcomes
) -> None:
    executor.start_many([_running("test.busy", 0.05, timeout=5)])
    assert isinstance(outcomes.next().outcome, Success)
    assert outcomes.none_within(0.2)


# --- Outcomes the handler decides ------------------------------------------------------------------


def test_snooze_discard_retry_on_and_discard_on(executor: Executor, outcomes: Outcomes) -> None:
    before = datetime.now(UTC)
    executor.start_many([_running("test.snoozer", 1, 30)])
    snoozed = outcomes.next()
    assert isinstance(snoozed.outcome, Snoozed)
    assert snoozed.outcome.next_due_time >= before + timedelta(seconds=30)
    assert snoozed.failure_detail is None

    executor.start_many([_running("test.discarder", "card refused")])
    discarded = outcomes.next()
    assert discarded.outcome == Failure(next_due_time=None, error="card refused")
    assert discarded.failure_detail is not None
    assert discarded.failure_detail.startswith("backwave_django.Discard: card refused\n")

    for kind, retried in (("connection", True), ("lookup", False), ("value", False)):
        executor.start_many([_running("test.picky", kind)])
        outcome = outcomes.next().outcome
        assert isinstance(outcome, Failure)
        assert (outcome.next_due_time is not None) is retried, kind


def test_a_handlers_own_job_timeout_is_a_timeout_failure() -> None:
    running = _running("test.busy", 1, timeout=7)
    finished = from_exception(running, JobTimeout(), settings=SETTINGS, now=T0)
    _timeout_failure(finished, "7")


# --- current_job() and progress --------------------------------------------------------------------


def test_current_job_is_the_running_attempts_context_in_sync_and_async_handlers(
    executor: Executor, outcomes: Outcomes
) -> None:
    seen: list[Any] = []

    def capture() -> None:
        seen.append(current_job())

    running = _running("test.progress", 2, 0.0)
    executor.start_many([running])
    finished = outcomes.next()
    assert isinstance(finished.outcome, Success)
    assert running.context.progress is not None
    assert (running.context.progress["done"], running.context.progress["total"]) == (2, 2)
    assert current_job() is None
    thread = threading.Thread(target=capture)
    thread.start()
    thread.join()
    assert seen == [None]


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ((-1,), ValueError),
        ((True,), ValueError),
        ((1, -2), ValueError),
        ((1, None, 5), TypeError),
        ((1, 2, "x" * 501), ValueError),
    ],
)
def test_bad_progress_is_refused(args: tuple[Any, ...], error: type[Exception]) -> None:
    context = JobContext(job_id=uuid.uuid4(), attempt=1, wire_name="w", queue="q")
    with pytest.raises(error):
        context.set_progress(*args)
    assert context.progress is None


def test_progress_has_exactly_its_four_keys_and_is_taken_once() -> None:
    context = JobContext(job_id=uuid.uuid4(), attempt=1, wire_name="w", queue="q")
    context.set_progress(3, note="rows")
    progress = context.take_unsaved_progress()
    assert progress is not None
    assert set(progress) == {"done", "total", "note", "at"}
    assert (progress["done"], progress["total"], progress["note"]) == (3, None, "rows")
    assert progress["at"].endswith("Z")
    assert context.take_unsaved_progress() is None


@pytest.mark.parametrize(
    ("delay", "error"),
    [
        (-1, ValueError),
        ("5", TypeError),
        (timedelta(seconds=-1), ValueError),
        (float("inf"), ValueError),  # was an OverflowError from timedelta
        (float("-inf"), ValueError),
        (float("nan"), ValueError),  # was a conversion error from timedelta
        (1e20, ValueError),  # past what a timedelta holds
        (timedelta.max, ValueError),  # a due time that no datetime holds
    ],
)
def test_a_bad_snooze_is_refused(delay: Any, error: type[Exception]) -> None:
    with pytest.raises(error):
        Snooze(delay)


@pytest.mark.parametrize("delay", [float("inf"), float("nan"), -1, 1e20])
def test_a_refused_snooze_says_what_is_allowed(delay: float) -> None:
    with pytest.raises(
        ValueError,
        match=r"^Snooze delay must be a timedelta or a finite number of seconds from 0 to 3,153,600,000 \(36,500 days\), got ",
    ):
        Snooze(delay)


def test_the_longest_snooze_is_a_hundred_years() -> None:
    assert Snooze(MAX_SNOOZE_DELAY).delay == timedelta(days=36_500)
    assert Snooze(0).delay == timedelta(0)


def test_a_discard_needs_a_reason() -> None:
    with pytest.raises(ValueError, match="reason"):
        Discard("")


def test_a_handler_that_swallows_its_timeout_still_fails_as_timed_out(
    executor: Executor, outcomes: Outcomes
) -> None:
    executor.start_many([_running("test.swallows-timeout", timeout=0.2)])
    _timeout_failure(outcomes.next(), "0.2")
