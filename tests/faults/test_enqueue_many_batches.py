"""A database error in a later batch of ``enqueue_many`` (client.py, store ``batches.py``): the
batches before it stay stored and announced, nothing after it is written, and the connection is
usable after; inside the caller's savepoint only that savepoint rolls back. On PostgreSQL this is
the path that sends a batch and builds the next while the database writes it. Batches are cut
at 3 jobs here instead of 1,000."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import DatabaseError, connection, transaction

from backwave_django import client, enqueue_many
from backwave_django.core.states import JobState
from backwave_django.models import JobRecord
from tests.jobsapp import jobs

from .conftest import FAILPOINT_MESSAGE, failpoint

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client, "ENQUEUE_MANY_BATCH", 3)


def _stored_ids() -> list[Any]:
    return list(JobRecord.objects.order_by("sequence").values_list("job_id", flat=True))


def test_a_database_error_in_a_later_batch_keeps_the_batches_before_it_and_the_connection_usable(
    announced: list[Any],
) -> None:
    prepared = [jobs.echo.prepare(n) for n in range(10)]
    with pytest.raises(DatabaseError, match=FAILPOINT_MESSAGE), failpoint(JobRecord, nth=5):
        enqueue_many(prepared)  # the second batch fails on its second row
    assert _stored_ids() == [p.job_id for p in prepared[:3]] == announced
    assert connection.get_autocommit()
    assert not connection.in_atomic_block
    if connection.vendor == "postgresql":
        assert connection.connection.pgconn.pipeline_status == 0  # left pipeline mode
    receipt = jobs.echo.enqueue("still works")
    assert JobRecord.objects.get(job_id=receipt.job_id).state == JobState.SCHEDULED


def test_a_database_error_inside_a_savepoint_rolls_back_to_it_and_the_callers_transaction_goes_on(
    announced: list[Any],
) -> None:
    with transaction.atomic():
        before = jobs.echo.enqueue("before")
        with (
            pytest.raises(DatabaseError, match=FAILPOINT_MESSAGE),
            failpoint(JobRecord, when="NEW.wire_name = 'test.tagger'"),
            transaction.atomic(),
        ):
            enqueue_many([jobs.echo.prepare(n) for n in range(4)] + [jobs.tagger.prepare()])
        after = jobs.echo.enqueue("after")
    assert _stored_ids() == [before.job_id, after.job_id] == announced
