"""The worker's fault rules (``worker/faults.py``): the backoff, and when a worker gives up."""

from __future__ import annotations

import logging

import pytest
from django.db import OperationalError

from backwave_django.worker.faults import BURST_GIVE_UP_SECONDS, FaultBackoff, WorkerFaults, give_up_seconds


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> _Clock:
    fake = _Clock()
    monkeypatch.setattr("backwave_django.worker.faults.monotonic", fake)
    return fake


def test_the_wait_doubles_from_half_a_second_up_to_thirty() -> None:
    run = FaultBackoff()
    assert [run.failed(0.0) for _ in range(8)] == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]


def test_a_success_ends_the_run_of_faults() -> None:
    run = FaultBackoff()
    run.failed(10.0)
    run.failed(12.0)
    assert run.lasted(15.0) == 5.0
    run.succeeded()
    assert (run.seconds, run.lasted(99.0)) == (0.0, 0.0)
    assert run.failed(20.0) == 0.5
    assert run.lasted(21.0) == 1.0


def test_how_long_a_worker_tries() -> None:
    assert give_up_seconds(True, None) == BURST_GIVE_UP_SECONDS == 60.0
    assert give_up_seconds(False, None) is None
    assert give_up_seconds(False, 5.0) == 5.0
    assert give_up_seconds(True, 0.0) == 0.0


def test_a_worker_gives_up_once_its_faults_have_lasted_the_limit(
    clock: _Clock, caplog: pytest.LogCaptureFixture
) -> None:
    worker = WorkerFaults("w1", give_up_after=10.0)
    exc = OperationalError("database does not exist")
    waits = []
    with caplog.at_level(logging.WARNING, logger="backwave_django.worker"):
        while (wait := worker.failed(worker.calls, exc)) is not None:
            waits.append(wait)
            clock.now += wait
    # 0.5 + 1 + 2 + 4 = 7.5 s, then the last wait is cut to 2.5 s so the last try comes at 10 s.
    assert waits == [0.5, 1.0, 2.0, 4.0, 2.5]
    assert worker.gave_up
    assert clock.now == 10.0
    assert worker.failed(worker.writes, exc) is None  # once given up, nothing is tried again
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1
    assert "for 10 s" in errors[0].getMessage()
    assert "worker w1 gives up, exit status 4" in errors[0].getMessage()


def test_a_success_in_between_starts_the_count_again(clock: _Clock) -> None:
    worker = WorkerFaults("w1", give_up_after=10.0)
    exc = OperationalError("server closed the connection")
    worker.failed(worker.calls, exc)
    clock.now = 9.0
    worker.calls.succeeded()
    worker.failed(worker.calls, exc)
    clock.now = 18.0
    assert worker.failed(worker.calls, exc) is not None
    assert not worker.gave_up


def test_the_outcome_writes_are_counted_apart_from_the_other_calls(clock: _Clock) -> None:
    worker = WorkerFaults("w1", give_up_after=60.0)
    exc = OperationalError("server closed the connection")
    worker.failed(worker.calls, exc)
    clock.now = 100.0
    assert worker.failed(worker.writes, exc) == 0.5  # the writes' faults only began now
    assert worker.failed(worker.calls, exc) is None  # the calls' began 100 s ago
    assert worker.gave_up


def test_without_a_limit_a_worker_never_gives_up(clock: _Clock) -> None:
    worker = WorkerFaults("w1", give_up_after=None)
    exc = OperationalError("connection refused")
    worker.failed(worker.calls, exc)
    clock.now = 1e6
    assert worker.failed(worker.calls, exc) == 1.0
    assert not worker.gave_up
