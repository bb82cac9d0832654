"""Real workers delivering to observers (declared in tests/jobsapp/worker_observers.py, loaded only
in worker processes started with BACKWAVE_TEST_OBSERVERS=1)."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest

from backwave_django import JobState, store
from tests.jobsapp import jobs

from .conftest import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def _records(path: Path, observer: str) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [r for r in map(json.loads, path.read_text().splitlines()) if r["observer"] == observer]


def _observed(workers: Any, tmp_path: Path, **settings: Any) -> tuple[Any, Path]:
    log = tmp_path / "observed.jsonl"
    env = {"BACKWAVE_TEST_OBSERVERS": "1", "BACKWAVE_TEST_OBSERVER_LOG": str(log)}
    import os

    os.environ.update(env)  # the workers fixture passes the test process's environment on
    try:
        worker = workers.start("--queues", "default", **settings)
    finally:
        for key in env:
            os.environ.pop(key)
    return worker, log


def test_every_transition_is_delivered_in_log_order_and_a_failing_observer_is_retried(workers, tmp_path):
    receipts = [jobs.echo.enqueue(n) for n in range(3)]
    worker, log = _observed(workers, tmp_path, OBSERVER_RETRY={"MAX_ATTEMPTS": 5, "BACKOFF": [0]})
    ids = {str(r.job_id) for r in receipts}
    # Each job: enqueued (Scheduled), claimed (Leased), Succeeded: nine entries for the first observer.
    every = wait_for(
        lambda: (
            (rows := [r for r in _records(log, "test.every-transition") if r["job"] in ids])
            and len(rows) >= 9
            and rows
        ),
        what="nine deliveries to the every-transition observer",
    )
    positions = [r["position"] for r in every]
    assert positions == sorted(positions)
    for job in ids:
        assert [r["state"] for r in every if r["job"] == job] == ["SCHEDULED", "LEASED", "SUCCEEDED"]
    # The flaky observer fails twice per event, then succeeds; the later events wait behind it.
    flaky = wait_for(
        lambda: (
            (rows := _records(log, "test.flaky-finisher"))
            and sum(r["did"] == "ok" for r in rows) == 3
            and rows
        ),
        what="the flaky observer to succeed on all three",
    )
    for job in ids:
        assert [(r["attempt"], r["did"]) for r in flaky if r["job"] == job] == [
            (1, "fail"),
            (2, "fail"),
            (3, "ok"),
        ]
    ok_positions = [r["position"] for r in flaky if r["did"] == "ok"]
    assert ok_positions == sorted(ok_positions)
    # The in-process signals: each job started and finished once, Succeeded, in the worker.
    for name, state in (("job_started", None), ("job_finished", "SUCCEEDED")):
        sent = [r for r in _records(log, f"signal.{name}") if r["job"] in ids]
        assert sorted((r["job"], r["attempt"], r["state"]) for r in sent) == sorted(
            (job, 1, state) for job in ids
        )
    # The observer logs "ok" before the worker reports the delivery, so the cursor catches up a moment later.
    wait_for(
        lambda: store.observer_lag("test.flaky-finisher", states=[JobState.SUCCEEDED], wire_name="test.echo").pending
        == 0,
        what="the flaky observer's cursor to pass its last delivery",
    )
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(20) == 0


def test_an_observer_that_times_out_is_dead_lettered_and_the_worker_carries_on(workers, tmp_path, admin_client):
    doomed = jobs.always_fails.enqueue().job_id  # max_attempts=2: dead-letters on its second attempt
    worker, log = _observed(
        workers,
        tmp_path,
        OBSERVER_TIMEOUT=0.5,
        OBSERVER_RETRY={"MAX_ATTEMPTS": 2, "BACKOFF": [0]},
    )
    dead = wait_for(
        lambda: store.observer_dead_letters("test.slow-dead-letters"), timeout=30, what="the dead letter"
    )
    assert [(d.job_id, d.state, d.delivery_attempts) for d in dead] == [(doomed, JobState.DEAD_LETTERED, 2)]
    assert len(_records(log, "test.slow-dead-letters")) == 2  # two attempts, each timed out
    assert "Observer test.slow-dead-letters gave up on test.always-fails" in workers.log(0)
    # The console shows it: a dead-letter count on the Observers page, the delivery in the list.
    observers = admin_client.get("/admin/backwave_django/observer/").content.decode()
    assert "test.slow-dead-letters" in observers
    assert 'data-testid="bw-observer-dead-letters"' in observers
    listed = admin_client.get(
        "/admin/backwave_django/observerdeadletter/", {"observer_id": "test.slow-dead-letters"}
    ).content.decode()
    assert str(doomed) in listed
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(20) == 0
