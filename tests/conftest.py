from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection

from backwave_django import conf, signals, store
from backwave_django.core.outcomes import NewJob, OutcomeReport, Success
from backwave_django.core.states import EnqueueResult
from backwave_django.store import backends

from . import pgbouncer as pgbouncer_leg
from .pgbouncer import PgBouncer

#: The conformance epoch: every store test runs on virtual time from here.
T0 = datetime(2026, 1, 1, tzinfo=UTC)
LEASE = timedelta(minutes=1)
WORKER = "worker-a"


def pytest_report_header(config: pytest.Config) -> str:
    return f"backwave database: {os.environ.get('BACKWAVE_TEST_DB', 'postgres')}"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if pgbouncer_leg.leg_active():
        pooled = pytest.mark.skip(reason="keeps session state, which PgBouncer's transaction pooling cannot")
        for item in items:
            if "session_bound" in item.keywords:
                item.add_marker(pooled)
    if os.environ.get("BACKWAVE_TEST_DB", "postgres") in ("postgres", "pgbouncer"):
        return
    skip = pytest.mark.skip(reason="needs PostgreSQL (row locks, SKIP LOCKED, concurrent sessions)")
    for item in items:
        if "postgres" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def job_statistics_restored(db: None) -> Iterator[None]:
    """For a test that ``ANALYZE``s a job table it filled: afterwards, on PostgreSQL, the table's
    statistics are gathered again from an empty table. ``ANALYZE`` writes ``pg_class.reltuples``
    in place, so the test's rollback does not undo it, and a later test of the console (whose
    unfiltered job list pages by that estimate above ``admin/job_list.py``'s ``COUNT_CAP``) would
    see the thousands of rows this one made. The rows are deleted inside the test's transaction,
    which still rolls back; only the statistics stay, as they were before."""
    yield
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("DELETE FROM backwave_django_jobrecord")
            cursor.execute("ANALYZE backwave_django_jobrecord")


@pytest.fixture
def pgbouncer() -> Iterator[PgBouncer]:
    """A PgBouncer of this test's own, in transaction mode, running in front of the test PostgreSQL
    (tests/pgbouncer.py). Skipped loudly without the binary; a failure under CI=true."""
    bouncer = PgBouncer()
    try:
        bouncer.start()
        yield bouncer
    finally:
        bouncer.close()


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix: None) -> Iterator[None]:
    """On the ``pgbouncer`` leg, start the session's PgBouncer before the test database is created
    through it (replaces pytest-django's fixture of this name, which does nothing else)."""
    if pgbouncer_leg.leg_active():
        pgbouncer_leg.start_leg()
    yield
    pgbouncer_leg.end_leg()


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup: None) -> Iterator[None]:
    """pytest-django's test databases; on the ``pgbouncer`` leg the session's PgBouncer stops before
    they are dropped (its idle server sessions would keep the test database open)."""
    yield
    pgbouncer_leg.end_leg()


@pytest.fixture(autouse=True)
def _fresh_settings() -> Any:
    conf.reset()
    yield
    conf.reset()


@pytest.fixture
def t0() -> datetime:
    return T0


def new_job(**overrides: Any) -> NewJob:
    fields: dict[str, Any] = {
        "job_id": uuid.uuid4(),
        "wire_name": "send-invoice",
        "payload": {"args": [], "kwargs": {}},
        "queue": "default",
        "due_time": T0,
    }
    fields.update(overrides)
    return NewJob(**fields)


def enqueue(now: datetime = T0, **overrides: Any) -> uuid.UUID:
    """Enqueue a job that must be accepted; returns its id."""
    job = new_job(**overrides)
    result = store.enqueue(job, now=now)
    assert result is EnqueueResult.OK, result
    return job.job_id


def lease(queue: str = "default", now: datetime = T0, worker: str = WORKER, max_jobs: int = 32) -> list[Any]:
    return store.claim(worker_id=worker, queues=[queue], max_jobs=max_jobs, lease_duration=LEASE, now=now)


def lease_one(job_id: uuid.UUID, now: datetime = T0, worker: str = WORKER) -> Any:
    """Claim until ``job_id`` is leased (it must be the only due job in its queue)."""
    claimed = [c for c in lease(queue=queue_of(job_id), now=now, worker=worker) if c.job_id == job_id]
    assert claimed, f"job {job_id} was not claimable"
    return claimed[0]


def queue_of(job_id: uuid.UUID) -> str:
    from backwave_django.models import JobRecord

    return JobRecord.objects.values_list("queue", flat=True).get(job_id=job_id)


def report(
    job_id: uuid.UUID,
    outcome: Any = None,
    *,
    now: datetime = T0,
    worker: str = WORKER,
    attempt: int = 1,
    **kw: Any,
) -> Any:
    return store.report_outcome(
        OutcomeReport(job_id=job_id, worker_id=worker, attempt=attempt, outcome=outcome or Success(), **kw),
        now=now,
    )


def row(job_id: uuid.UUID) -> Any:
    from backwave_django.models import JobRecord

    return JobRecord.objects.get(job_id=job_id)


def history(job_id: uuid.UUID) -> list[tuple[int, str, int, str]]:
    """(ordinal, state name, attempt, actor) for every transition of a job, oldest first."""
    from backwave_django.core.states import JobState
    from backwave_django.models import JobTransition

    return [
        (o, JobState(s).name, a, actor)
        for o, s, a, actor in JobTransition.objects.filter(job__job_id=job_id)
        .order_by("ordinal")
        .values_list("ordinal", "state", "attempt", "actor")
    ]


def number_log(timeout: float = 30.0) -> int:
    """Number every committed log entry; returns how many were numbered.

    On PostgreSQL the sequencer waits for every older transaction of the whole cluster to end
    (docs/observers.md), and other sessions (another test run, a worker) may hold one briefly:
    rounds repeat until nothing written so far is left unnumbered.
    """
    import time

    from backwave_django.models import JobTransition

    numbered, deadline = 0, time.monotonic() + timeout
    while True:
        numbered += store.sequence_log()
        if not JobTransition.objects.filter(position__isnull=True).exists():
            return numbered
        if time.monotonic() > deadline:
            raise AssertionError(f"log entries still unnumbered after {timeout} s")
        time.sleep(0.05)


@pytest.fixture
def backwave_settings(settings: Any) -> Callable[..., None]:
    """Override keys of settings.BACKWAVE for one test."""

    def apply(**values: Any) -> None:
        settings.BACKWAVE = {**getattr(settings, "BACKWAVE", {}), **values}

    return apply


@pytest.fixture
def announced() -> Iterator[list[Any]]:
    """The job ids ``job_enqueued`` is sent for during the test, in order."""
    sent: list[Any] = []

    def receive(sender: Any, **named: Any) -> None:
        sent.append(named["job_id"])

    signals.job_enqueued.connect(receive)
    try:
        yield sent
    finally:
        signals.job_enqueued.disconnect(receive)


@pytest.fixture
def vendor() -> str:
    return connection.vendor


def force_portable(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the store take its portable ORM path on every database alias, PostgreSQL included
    (``store/backends.py``), until the test ends."""
    from django.conf import settings

    for alias in settings.DATABASES:
        monkeypatch.setitem(backends.CHOSEN, alias, backends.portable_backend())
