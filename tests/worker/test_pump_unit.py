"""The worker's in-process plumbing, without a database: job threads and the outcome hand-over."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import OperationalError

from backwave_django import store
from backwave_django.context import JobContext
from backwave_django.core.dispatch import StrictDispatch
from backwave_django.core.outcomes import ClaimedJob, Success
from backwave_django.core.states import OutcomeResult
from backwave_django.worker import Worker, WorkerOptions
from backwave_django.worker.execution import Finished, Running
from backwave_django.worker.threads import JobThreads
from backwave_django.worker.writer import WriteDone

T0 = datetime(2026, 11, 30, tzinfo=UTC)


def _finished() -> Finished:
    job = ClaimedJob(
        job_id=uuid.uuid4(),
        wire_name="noop",
        queue="default",
        payload={"args": [], "kwargs": {}},
        attempt=1,
        due_time=T0,
        lease_owner="w",
        lease_expiry=T0 + timedelta(minutes=5),
    )
    context = JobContext(job_id=job.job_id, attempt=1, wire_name="noop", queue="default")
    return Finished(Running(claimed=job, context=context, started=T0), Success())


@pytest.fixture
def threads() -> Iterator[JobThreads]:
    pool = JobThreads(4)
    yield pool
    pool.shutdown()


def test_a_batch_of_blocking_calls_runs_on_every_thread_at_once(threads: JobThreads) -> None:
    # Each call waits for all four to be running: one thread working through the batch alone
    # would break the barrier, so this passes only if each taker wakes the next idle thread.
    barrier = threading.Barrier(4, timeout=5)
    done: list[str] = []
    lock = threading.Lock()

    def call() -> None:
        barrier.wait()
        with lock:
            done.append(threading.current_thread().name)

    threads.submit_many([(call, ()) for _ in range(4)])
    deadline = time.monotonic() + 10
    while len(done) < 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(set(done)) == 4
    assert not barrier.broken


def test_quick_calls_all_run_and_later_batches_still_wake_a_thread(threads: JobThreads) -> None:
    ran: list[int] = []
    event = threading.Event()

    def call(n: int) -> None:
        ran.append(n)
        if len(ran) == 250:
            event.set()

    for start in range(0, 250, 50):
        threads.submit_many([(call, (n,)) for n in range(start, start + 50)])
        time.sleep(0.01)  # let the threads go idle between batches
    assert event.wait(5)
    assert sorted(ran) == list(range(250))


def test_shutdown_drops_calls_not_yet_started(threads: JobThreads) -> None:
    gate = threading.Event()
    started = threading.Semaphore(0)
    ran: list[int] = []

    def blocker() -> None:
        started.release()
        gate.wait(5)

    threads.submit_many([(blocker, ()) for _ in range(4)])
    for _ in range(4):
        assert started.acquire(timeout=5)
    threads.submit_many([(ran.append, (n,)) for n in range(10)])
    threads.shutdown()
    gate.set()
    for thread in threads.threads:
        thread.join(5)
    assert ran == []


@pytest.fixture
def worker() -> Iterator[Worker]:
    worker = Worker(WorkerOptions(dispatch=StrictDispatch(["default"]), concurrency=4, prefetch=0))
    yield worker
    worker.executor.shutdown()


def test_a_failed_outcome_write_goes_back_to_the_front_of_the_outbox(worker: Worker) -> None:
    first, second, later = _finished(), _finished(), _finished()
    worker.writing = [first, second]
    worker.outbox = [later]
    worker._take_written(WriteDone([first, second], None, OperationalError("server closed the connection")))
    assert worker.writing is None
    assert worker.outbox == [first, second, later]
    assert worker.faults.writes.seconds == 0.5
    assert not worker._flush_due()  # it waits out the backoff before writing again
    worker.write_not_before = 0.0
    worker.running.clear()
    assert worker._flush_due()


def test_a_successful_write_resets_the_backoff(worker: Worker) -> None:
    batch = [_finished()]
    worker.faults.writes.failed(time.monotonic())
    worker.writing = batch
    worker._take_written(WriteDone(batch, [OutcomeResult.APPLIED], None))
    assert worker.writing is None
    assert worker.faults.writes.seconds == 0.0
    assert worker.faults.writes.since is None
    assert worker.outbox == []


class _Waits:
    """Stands in for the pump's wake-up event: records the waits instead of sleeping through them."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    def wait(self, timeout: float) -> bool:
        self.waits.append(timeout)
        return True

    def clear(self) -> None:
        pass

    def set(self) -> None:
        pass


def _fail() -> None:
    raise OperationalError("connection refused")


def test_a_burst_worker_whose_faults_last_too_long_gives_up_at_once() -> None:
    worker = Worker(
        WorkerOptions(dispatch=StrictDispatch(["default"]), concurrency=4, burst=True, give_up_after=0)
    )
    try:
        waits = worker.wakeup = _Waits()  # type: ignore[assignment]
        assert worker._guarded(_fail) is None
        assert worker.faults.gave_up
        assert waits.waits == []  # it does not back off: nothing more will be tried
        assert worker._should_exit(None)
        batch = [_finished()]  # an outcome batch that then fails is kept, left to lease expiry
        worker.writing = batch
        worker._take_written(WriteDone(batch, None, OperationalError("connection refused")))
        assert worker.outbox == batch
    finally:
        worker.executor.shutdown()


def test_a_worker_without_a_limit_backs_off_and_keeps_trying(worker: Worker) -> None:
    waits = worker.wakeup = _Waits()  # type: ignore[assignment]
    for _ in range(3):
        assert worker._guarded(_fail) is None
    assert waits.waits == [0.5, 1.0, 2.0]
    assert not worker.faults.gave_up
    assert not worker._should_exit(None)
    assert worker._guarded(lambda: 7) == 7
    assert worker.faults.calls.seconds == 0.0


def test_an_error_that_is_not_a_database_fault_is_raised_in_the_pump(worker: Worker) -> None:
    batch = [_finished()]
    worker.writing = batch
    with pytest.raises(ZeroDivisionError):
        worker._take_written(WriteDone(batch, None, ZeroDivisionError("bug")))


def test_only_the_first_outcome_a_batch_and_the_last_job_wake_the_pump(worker: Worker) -> None:
    worker.executing = 4  # concurrency 4: a batch is 3
    worker.wakeup.clear()
    wakes = []
    for n in range(1, 5):
        worker._on_finished(_finished())
        if worker.wakeup.is_set():
            wakes.append(n)
            worker.wakeup.clear()
    # 1st (its linger starts), 3rd (a batch's worth), 4th (nothing left executing)
    assert wakes == [1, 3, 4]
    assert len(worker.finished) == 4


def test_finished_jobs_waiting_for_their_write_hold_no_slot_up_to_twice_the_concurrency(
    worker: Worker,
) -> None:
    # concurrency 4: outcomes being written and waiting leave every slot free for the next claim
    # until eight of them are unwritten; after that each one holds a slot again.
    worker.writing = [_finished() for _ in range(4)]
    worker.outbox = [_finished() for _ in range(4)]
    assert worker._free_slots() == 4
    worker.outbox.append(_finished())
    assert worker._free_slots() == 3
    worker.running = {i: object() for i in range(3)}  # type: ignore[misc]
    assert worker._free_slots() == 0
    worker.writing = None
    assert worker._free_slots() == 1


def _ran_for(seconds: float) -> Finished:
    finished = _finished()
    finished.running.handler_started = 1_000.0
    finished.running.handler_ended = 1_000.0 + seconds
    return finished


def _drain(worker: Worker, finished: list[Finished]) -> None:
    """Jobs the worker held that finished, as the job threads hand them over."""
    for one in finished:
        worker.running[one.running.claimed.job_id] = one.running
        worker.finished.append(one)
    worker._drain_finished()


def test_the_default_prefetch_grows_for_short_jobs_and_shrinks_back_for_long_ones() -> None:
    worker = Worker(WorkerOptions(dispatch=StrictDispatch(["default"]), concurrency=20))
    try:
        assert (worker.prefetch.limit, worker.prefetch.grows) == (20, True)
        assert worker.executor.timed  # the job threads stamp run times, metrics or not
        assert worker._free_slots() == 40
        _drain(worker, [_ran_for(0.0001) for _ in range(5)])
        assert worker.prefetch.limit == 40
        assert worker._free_slots() == 60
        _drain(worker, [_ran_for(0.5) for _ in range(100)])
        assert worker.prefetch.limit == 20
        _drain(worker, [_finished()])  # never started (its handler did not run): not counted
        assert worker.prefetch.limit == 20
        _drain(worker, [_ran_for(0.0001) for _ in range(100)])
        assert worker.prefetch.limit == 40
        abandoned = _ran_for(0.0)
        abandoned.running.handler_started, abandoned.running.handler_ended = time.time() - 60, 0.0
        _drain(worker, [abandoned])  # past its time limit, still running: a minute at least
        assert worker.prefetch.limit == 20
    finally:
        worker.executor.shutdown()


@pytest.mark.parametrize("concurrency", [20, 4])
def test_a_prefetch_that_is_set_or_already_twice_the_concurrency_never_grows(concurrency: int) -> None:
    prefetch = 5 if concurrency == 20 else None  # set; or the default, already twice the concurrency
    worker = Worker(WorkerOptions(dispatch=StrictDispatch(["default"]), concurrency=concurrency, prefetch=prefetch))
    try:
        before = worker.prefetch.limit
        assert before == (5 if concurrency == 20 else 8)
        assert not worker.prefetch.grows
        assert not worker.executor.timed  # nothing to stamp without metrics
        _drain(worker, [_ran_for(0.0001) for _ in range(5)])
        assert worker.prefetch.limit == before
    finally:
        worker.executor.shutdown()


@pytest.mark.parametrize(("handed_out", "short"), [(32, False), (31, True), (0, True)])
def test_a_claim_is_short_when_it_hands_out_less_than_it_asked_for_within_the_batch_cap(
    monkeypatch: pytest.MonkeyPatch, handed_out: int, short: bool
) -> None:
    # concurrency 20 and the default prefetch ask for 40 leases; a claim hands out at most
    # MAX_CLAIM_BATCH (32), so 32 is a full claim, and fewer mean the queue was out of due jobs.
    worker = Worker(WorkerOptions(dispatch=StrictDispatch(["default"]), concurrency=20))
    asked: list[int] = []

    def claim(*, max_jobs: int, **_: object) -> list[ClaimedJob]:
        asked.append(max_jobs)
        return [_finished().running.claimed for _ in range(handed_out)]

    monkeypatch.setattr(store, "claim", claim)
    monkeypatch.setattr(store, "held_until", lambda **_: None)  # no rate limit holds anything back
    monkeypatch.setattr(worker.executor, "start_many", lambda running: None)
    try:
        assert worker._claim() == handed_out
        assert asked == [40]
        assert worker.pacing.last_short is short
        assert worker.pacing.last_empty is (handed_out == 0)
        assert worker.pacing.opens_at is None
    finally:
        worker.executor.shutdown()


def test_an_empty_claim_held_back_by_a_rate_limit_wakes_when_the_window_slides(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    worker = Worker(WorkerOptions(dispatch=StrictDispatch(["default"]), concurrency=20))
    asked: list[tuple[str, ...]] = []

    def held_until(*, queues: list[str], now: datetime) -> datetime:
        asked.append(tuple(queues))
        return now + timedelta(seconds=0.25)

    monkeypatch.setattr(store, "claim", lambda **_: [])
    monkeypatch.setattr(store, "held_until", held_until)
    try:
        assert worker._claim() == 0
        assert asked == []  # no rate declared: nothing can be held until a moment, so no question
        worker.pacing.rates_declared = True
        assert worker._claim() == 0
        assert asked == [("default",)]
        assert worker.pacing.opens_at is not None
        assert worker.pacing.next_partial() == pytest.approx(worker.pacing.last_at + 0.25)
        # With nothing running (the jobs it let through were short), it sleeps until then, not
        # for the poll interval: a binding rate is used whole.
        worker.next_heartbeat = time.monotonic() + 60
        timeouts: list[float] = []
        monkeypatch.setattr(worker.wakeup, "wait", lambda timeout: timeouts.append(timeout))
        assert not worker.running
        worker._sleep()
        assert timeouts[0] == pytest.approx(0.25, abs=0.1)
        assert worker.settings.poll_interval.total_seconds() >= 1
    finally:
        worker.executor.shutdown()


def test_a_landed_write_lets_the_next_claim_go_at_once_and_a_finished_job_does_not(worker: Worker) -> None:
    # A finished job's lease still counts against its queue's limit until its outcome is written.
    worker.pacing.answered(1, 4)
    _drain(worker, [_finished()])
    assert worker.pacing.last_short
    batch = [_finished()]
    worker.writing = batch
    worker._take_written(WriteDone(batch, [OutcomeResult.APPLIED], None))
    assert not worker.pacing.last_short


@pytest.mark.parametrize("window", [0.0, 0.05])
def test_a_lone_outcome_waits_for_company_only_within_a_batch_window(
    backwave_settings: Any, monkeypatch: pytest.MonkeyPatch, window: float
) -> None:
    """Without a batch window a lone finished job's outcome is written at once; with one it waits
    up to the window for others (the pump sleeps until then), and goes at once when stopping."""
    backwave_settings(BATCH_WINDOW=window)
    worker = Worker(WorkerOptions(dispatch=StrictDispatch(["default"]), concurrency=4, prefetch=0))
    try:
        worker.outbox, worker.outbox_since = [_finished()], time.monotonic()
        assert not worker.running
        assert worker._flush_due() is (window == 0)
        if window:
            worker.next_heartbeat = time.monotonic() + 60
            worker.pacing.sending(time.monotonic())  # (a claim just went: none is due either)
            timeouts: list[float] = []
            monkeypatch.setattr(worker.wakeup, "wait", lambda timeout: timeouts.append(timeout))
            worker._sleep()
            assert timeouts[0] == pytest.approx(window, abs=0.02)
            worker.outbox_since -= window
            assert worker._flush_due()
            worker.outbox_since = time.monotonic()
            worker.stopping = True
            assert worker._flush_due()
    finally:
        worker.executor.shutdown()
