"""An outcome batch hints, on commit, the queues of the jobs it made claimable (PostgreSQL): a
worker that hears hints waits for one after a short claim instead of claiming again after every
outcome batch (``worker/pacing.py``), so every way an outcome frees work must say so. Both store
paths: the pipelined REPORT statement, and the ORM's (which PostgreSQL takes when a job that
ended has waiting children)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from django.db import connections

from backwave_django import store
from backwave_django.core.outcomes import Failure, OutcomeReport, Snoozed
from backwave_django.database import listen_database
from backwave_django.store.postgres.notifications import hint_payload

from ..conftest import T0, WORKER, enqueue, force_portable, lease, new_job, report

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


@pytest.fixture(params=["pipelined", "portable"])
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "portable":
        force_portable(monkeypatch)
    return str(request.param)


@pytest.fixture
def hints() -> Iterator[Callable[[Callable[[], Any]], list[str]]]:
    """The hints sent while a call runs (and commits), in order of arrival."""
    params = connections[listen_database()].get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    with psycopg.connect(**params, autocommit=True) as listener:
        listener.execute(f"LISTEN {store.HINT_CHANNEL}")

        def heard(call: Callable[[], Any]) -> list[str]:
            list(listener.notifies(timeout=0.05))  # what came before
            call()
            # A marker sent after the call has committed arrives after the call's hints.
            marker = f"end-{uuid.uuid4()}"
            with psycopg.connect(**params, autocommit=True) as sender:
                sender.execute("SELECT pg_notify(%s, %s)", [store.HINT_CHANNEL, marker])
            payloads = []
            for notice in listener.notifies(timeout=10.0):
                if notice.payload == marker:
                    break
                payloads.append(notice.payload)
            return payloads

        yield heard


def test_a_success_in_a_queue_without_a_limit_hints_nothing(path: str, hints: Any) -> None:
    job = enqueue(queue="plain")
    lease("plain")
    assert hints(lambda: report(job)) == []


def test_an_attempt_given_back_due_now_hints_its_queue_and_one_due_later_does_not(
    path: str, hints: Any
) -> None:
    now_job, later_job = enqueue(queue="snoozing"), enqueue(queue="failing")
    lease("snoozing")
    lease("failing")
    # With its due time: a worker whose claim floors are past it reads the queue from there.
    assert hints(lambda: report(now_job, Snoozed(next_due_time=T0))) == [hint_payload("snoozing", T0)]
    later = Failure(next_due_time=T0 + timedelta(minutes=5), error="boom")
    assert hints(lambda: report(later_job, later)) == []


def test_a_lease_of_a_queue_with_a_concurrency_limit_hints_its_queue(path: str, hints: Any) -> None:
    store.set_concurrency_limit("limited", 1, actor="op", now=T0)
    job = enqueue(queue="limited")
    lease("limited")
    assert hints(lambda: report(job)) == ["limited"]  # no job of it became due: no due time


def test_a_released_dependent_hints_its_own_queue(path: str, hints: Any) -> None:
    parent = enqueue(queue="parents")
    child = new_job(queue="children", parents=[parent])
    store.enqueue(child, now=T0)
    lease("parents")
    assert hints(lambda: report(parent)) == [hint_payload("children", T0)]
    assert [c.job_id for c in lease("children")] == [child.job_id]


def test_a_batch_hints_each_queue_once_with_the_earliest_due_time_it_gave_back(path: str, hints: Any) -> None:
    first, second = enqueue(queue="snoozing"), enqueue(queue="snoozing")
    lease("snoozing")
    earlier = T0 - timedelta(seconds=30)
    reports = [
        OutcomeReport(job_id=first, worker_id=WORKER, attempt=1, outcome=Snoozed(next_due_time=T0)),
        OutcomeReport(job_id=second, worker_id=WORKER, attempt=1, outcome=Snoozed(next_due_time=earlier)),
    ]
    assert hints(lambda: store.report_outcomes(reports, now=T0)) == [hint_payload("snoozing", earlier)]
