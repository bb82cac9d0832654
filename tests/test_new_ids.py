"""Jobs whose ids ``prepare()`` made (``NewJob.id_is_new``). On PostgreSQL, in a transaction of
the store's own, they are inserted without ``ON CONFLICT`` (store/job_inserts.py); a prepared job
sent a second time must still come back DUPLICATE, with nothing written twice, on every path: one
job, one batch, and batches overlapped on the pipeline (where the failed batch is sent again and
the batches after it go on). Elsewhere the same calls take the portable path and give the same
results."""

from __future__ import annotations

import dataclasses
import select
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from backwave_django import EnqueueResult, client, enqueue_many
from backwave_django.core.ids import uuid7
from backwave_django.models import JobRecord, JobTransition
from backwave_django.store.postgres.connection import Pipelined
from tests.jobsapp import jobs

OK, DUPLICATE = EnqueueResult.OK, EnqueueResult.DUPLICATE


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("watched", [False, True], ids=["cursors-kept", "statements-watched"])
@pytest.mark.parametrize(
    ("size", "batch"), [(1, 1000), (5, 1000), (8, 3)], ids=["one", "one-batch", "batches"]
)
def test_prepared_jobs_sent_again_are_duplicates_and_nothing_is_written_twice(
    size: int, batch: int, watched: bool, announced: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(client, "ENQUEUE_MANY_BATCH", batch)
    prepared = [jobs.echo.prepare(n) for n in range(size)]
    sent_before = size // 2 + 1  # with batches of 3: the second call's first batch all duplicates,
    enqueue_many(prepared[:sent_before])  # its second one mixed, its third one new
    with CaptureQueriesContext(connection) if watched else nullcontext():
        receipts = enqueue_many(prepared)
    assert [r.enqueue_result for r in receipts] == [DUPLICATE] * sent_before + [OK] * (size - sent_before)
    assert [r.job_id for r in receipts] == [p.job_id for p in prepared]
    assert JobRecord.objects.count() == size
    assert JobTransition.objects.count() == size
    assert announced == [p.job_id for p in prepared]  # each once, when it was stored


class _Answered:
    """A cursor of a pipelined transaction, wrapped; they all share ``refusable``. A ``COMMIT`` after an
    insert sent without ``ON CONFLICT`` (one the server may refuse) goes out only once the server
    has answered (or after 2 s): the order a fast server gives by itself."""

    CONTROL = frozenset({"BEGIN", "COMMIT", "ROLLBACK"})

    def __init__(self, cursor: Any, refusable: list[bool]) -> None:
        self.cursor, self.refusable = cursor, refusable

    def execute(self, query: str, *args: Any, **kwargs: Any) -> Any:
        if query == "COMMIT" and self.refusable[0]:
            select.select([self.cursor.connection.fileno()], [], [], 2.0)
        elif query not in self.CONTROL:
            self.refusable[0] = "ON CONFLICT" not in query
        return self.cursor.execute(query, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.cursor, name)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("size", "batch"), [(5, 1000), (8, 3)], ids=["one-batch", "batches"])
def test_a_batch_refused_before_its_commit_is_sent_is_sent_again_all_the_same(
    size: int, batch: int, announced: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The insert's unique violation then comes out of sending the COMMIT, which the server skips,
    # and ending that failed stretch of the pipeline reports the COMMIT as aborted.
    monkeypatch.setattr(client, "ENQUEUE_MANY_BATCH", batch)
    prepared = [jobs.echo.prepare(n) for n in range(size)]
    sent_before = size // 2 + 1
    enqueue_many(prepared[:sent_before])
    handed = Pipelined.cursor
    refusable = [False]

    def answered(self: Pipelined) -> Any:
        return _Answered(handed(self), refusable)

    monkeypatch.setattr(Pipelined, "cursor", answered)
    receipts = enqueue_many(prepared)
    assert [r.enqueue_result for r in receipts] == [DUPLICATE] * sent_before + [OK] * (size - sent_before)
    assert JobRecord.objects.count() == size
    assert JobTransition.objects.count() == size
    assert announced == [p.job_id for p in prepared]


def _job_inserts(call: Callable[[], Any]) -> list[str]:
    with CaptureQueriesContext(connection) as queries:
        call()
    return [q["sql"] for q in queries.captured_queries if "INSERT INTO backwave_django_jobrecord" in q["sql"]]


def _in_atomic(call: Callable[[], Any]) -> Callable[[], None]:
    def run() -> None:
        with transaction.atomic():
            call()

    return run


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_only_ids_prepare_made_outside_the_callers_transaction_go_without_on_conflict() -> None:
    def fresh(count: int) -> Callable[[], Any]:
        return lambda: enqueue_many([jobs.echo.prepare(n) for n in range(count)])

    without = [*_job_inserts(fresh(1)), *_job_inserts(fresh(3))]
    assert len(without) == 2
    assert not any("ON CONFLICT" in sql for sql in without)
    with_conflict = [
        *_job_inserts(lambda: jobs.echo.using(job_id="order-1").enqueue(1)),  # the caller's key
        *_job_inserts(
            lambda: enqueue_many([jobs.echo.prepare(1), jobs.echo.using(job_id=uuid7()).prepare(2)])
        ),
        *_job_inserts(lambda: enqueue_many([dataclasses.replace(jobs.echo.prepare(3))])),  # a copy
        *_job_inserts(_in_atomic(fresh(1))),
        *_job_inserts(_in_atomic(fresh(3))),
    ]
    assert len(with_conflict) == 5
    assert all("ON CONFLICT (job_id) DO NOTHING" in sql for sql in with_conflict)
    assert JobRecord.objects.count() == 1 + 3 + 1 + 2 + 1 + 1 + 3
