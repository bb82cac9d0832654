"""``enqueue_many`` over more than one batch (client.py, store ``enqueue_batches``): every batch is a
transaction of its own (or all are in the caller's), a failure keeps the batches before it and
nothing after, and ``job_enqueued`` is sent for exactly the stored jobs. On PostgreSQL the next
batch is built while the database writes the one in flight; these tests hold that path to what
one batch after another would do (a database error part-way: tests/faults/). Batches are cut at
3 jobs here instead of 1,000."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from backwave_django import EnqueueError, EnqueueResult, client, enqueue_many, store
from backwave_django.core.outcomes import NewJob
from backwave_django.core.states import JobState
from backwave_django.models import JobDependency, JobRecord, JobTransition
from tests.jobsapp import jobs

from .conftest import T0

BATCH = 3


@pytest.fixture(autouse=True)
def small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client, "ENQUEUE_MANY_BATCH", BATCH)


def _stored_ids() -> list[Any]:
    return list(JobRecord.objects.order_by("sequence").values_list("job_id", flat=True))


def _transaction_ids() -> list[int]:
    """The transaction that wrote each job row, in insert order (PostgreSQL's ``xmin``)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT xmin::text::bigint FROM backwave_django_jobrecord ORDER BY sequence")
        return [row[0] for row in cursor.fetchall()]


@pytest.mark.django_db(transaction=True)
def test_every_batch_is_stored_in_order_each_in_a_transaction_of_its_own(announced: list[Any]) -> None:
    prepared = [jobs.echo.prepare(n) for n in range(8)]
    receipts = enqueue_many(prepared)
    assert [r.job_id for r in receipts] == [p.job_id for p in prepared]
    assert {r.enqueue_result for r in receipts} == {EnqueueResult.OK}
    assert _stored_ids() == [p.job_id for p in prepared] == announced
    assert JobTransition.objects.filter(ordinal=0).count() == 8
    if connection.vendor == "postgresql":
        tx = _transaction_ids()
        assert len({tx[0], tx[3], tx[6]}) == 3
        assert tx == [tx[0]] * 3 + [tx[3]] * 3 + [tx[6]] * 2


@pytest.mark.django_db(transaction=True)
def test_a_refusal_in_a_later_batch_keeps_the_batches_before_it_and_nothing_after(
    announced: list[Any],
) -> None:
    prepared = [jobs.echo.prepare(n) for n in range(7)]
    prepared.insert(7, jobs.echo.prepare("x" * 70_000))  # the third batch's second job
    prepared.append(jobs.echo.prepare("after"))
    with pytest.raises(EnqueueError, match="MAX_PAYLOAD_BYTES"):
        enqueue_many(prepared)
    assert _stored_ids() == [p.job_id for p in prepared[:6]] == announced


@pytest.mark.django_db(transaction=True)
def test_inside_atomic_all_batches_commit_or_roll_back_with_the_caller(announced: list[Any]) -> None:
    with pytest.raises(RuntimeError), transaction.atomic():
        enqueue_many([jobs.echo.prepare(n) for n in range(8)])
        raise RuntimeError
    assert _stored_ids() == [] == announced
    prepared = [jobs.echo.prepare(n) for n in range(8)]
    with transaction.atomic():
        enqueue_many(prepared)
        assert announced == []  # sent after the commit
    assert _stored_ids() == [p.job_id for p in prepared] == announced
    if connection.vendor == "postgresql":
        assert len(set(_transaction_ids())) == 1


@pytest.mark.django_db(transaction=True)
def test_a_batch_with_a_child_between_plain_batches_sees_its_parent_in_the_batch_before() -> None:
    plain = [jobs.echo.prepare(n) for n in range(3)]
    child = jobs.echo.using(parents=[plain[0].job_id]).prepare("child")
    prepared = [*plain, jobs.echo.prepare(3), child, jobs.echo.prepare(4), jobs.echo.prepare(5)]
    receipts = enqueue_many(prepared)
    assert {r.enqueue_result for r in receipts} == {EnqueueResult.OK}
    assert _stored_ids() == [p.job_id for p in prepared]
    stored_child = JobRecord.objects.get(job_id=child.job_id)
    assert stored_child.state == JobState.AWAITING_PARENT
    assert JobDependency.objects.get(child=stored_child).parent.job_id == plain[0].job_id


@pytest.mark.django_db(transaction=True)
def test_a_repeated_id_in_a_later_batch_is_a_duplicate_of_the_stored_job() -> None:
    prepared = [jobs.echo.prepare(n) for n in range(4)]
    again = jobs.echo.using(job_id=prepared[0].job_id).prepare("again")
    receipts = enqueue_many([*prepared, again])
    assert [r.enqueue_result for r in receipts] == [EnqueueResult.OK] * 4 + [EnqueueResult.DUPLICATE]
    assert JobRecord.objects.count() == 4


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_each_batch_is_begin_insert_commit_where_statements_are_watched() -> None:
    with CaptureQueriesContext(connection) as queries:
        enqueue_many([jobs.echo.prepare(n) for n in range(7)])
    assert [q["sql"].split()[0] for q in queries.captured_queries] == ["BEGIN", "WITH", "COMMIT"] * 3
    assert len(_stored_ids()) == 7


def _batches(sizes: list[int], then: BaseException | None = None) -> Iterator[tuple[list[NewJob], datetime]]:
    for number, size in enumerate(sizes):
        yield [jobs.echo.prepare(number, n).due_at(T0) for n in range(size)], T0
    if then is not None:
        raise then


@pytest.mark.django_db(transaction=True)
def test_an_error_building_the_next_batch_reports_the_batches_already_stored() -> None:
    written: list[list[store.Enqueued]] = []
    with pytest.raises(LookupError, match="next batch"):
        store.enqueue_batches(_batches([2, 3], LookupError("next batch")), written=written.append)
    assert [[e.result for e in entries] for entries in written] == [
        [EnqueueResult.OK] * 2,
        [EnqueueResult.OK] * 3,
    ]
    assert _stored_ids() == [e.job_id for entries in written for e in entries]


@pytest.mark.django_db(transaction=True)
def test_store_enqueue_batches_without_raise_refusals_reports_them() -> None:
    written: list[list[store.Enqueued]] = []
    big = jobs.echo.prepare("x" * 70_000).due_at(T0)
    batches = [([jobs.echo.prepare(1).due_at(T0), big], T0), ([jobs.echo.prepare(2).due_at(T0)], T0)]
    store.enqueue_batches(iter(batches), written=written.append)
    assert [[e.result for e in entries] for entries in written] == [
        [EnqueueResult.OK, EnqueueResult.PAYLOAD_TOO_LARGE],
        [EnqueueResult.OK],
    ]
    assert len(_stored_ids()) == 2
