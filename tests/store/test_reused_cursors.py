"""The PostgreSQL statements' cursors: reused while nothing watches the connection, Django's
wrapped cursors when something does, and Django's behaviour (errors, broken transactions) either way."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import DatabaseError, IntegrityError, connection, transaction
from django.db.transaction import TransactionManagementError
from django.test.utils import CaptureQueriesContext

from backwave_django import store
from backwave_django.store.postgres.connection import (
    BOUND_SLOT,
    fetch_bound,
    pipelined_transaction,
    reused_cursor,
)

from ..conftest import LEASE, T0, WORKER, enqueue

pytestmark = [pytest.mark.postgres, pytest.mark.fast_path, pytest.mark.django_db(transaction=True)]

USING = "default"


def test_statements_reuse_one_cursor_per_connection_and_a_new_connection_gets_new_ones() -> None:
    assert fetch_bound(USING, "SELECT %(x)s::int", {"x": 1}, jobs=1) == [(1,)]
    first = reused_cursor(connection, BOUND_SLOT)
    assert fetch_bound(USING, "SELECT %(x)s::int", {"x": 2}, jobs=1) == [(2,)]
    assert reused_cursor(connection, BOUND_SLOT) is first
    connection.close()
    assert fetch_bound(USING, "SELECT %(x)s::int", {"x": 3}, jobs=1) == [(3,)]
    second = reused_cursor(connection, BOUND_SLOT)
    assert second is not first
    assert second.connection is connection.connection


def test_a_pipelined_transaction_hands_out_a_different_cursor_each_call_never_the_bound_one() -> None:
    with pipelined_transaction(USING, jobs=1) as tx:
        handed = [tx.cursor(), tx.cursor(), tx.cursor()]
        with tx.round_trip():
            for index, each in enumerate(handed):
                each.execute("SELECT %(x)s::int", {"x": index})
        # A statement between the pipeline's and its fetches leaves their results alone.
        assert fetch_bound(USING, "SELECT 42", {}, jobs=1) == [(42,)]
        assert [each.fetchall() for each in handed] == [[(0,)], [(1,)], [(2,)]]
    assert len({id(each) for each in handed} | {id(reused_cursor(connection, BOUND_SLOT))}) == 4
    with pipelined_transaction(USING, jobs=1) as tx:
        assert tx.cursor() is handed[0]  # the next transaction reuses them


def test_a_statement_or_transaction_about_a_batch_lets_its_cursors_go() -> None:
    """A kept cursor holds its last parameters and rows: only a single job's are kept that way."""
    big = "x" * 100_000
    assert fetch_bound(USING, "SELECT length(%(big)s)", {"big": big}, jobs=1) == [(100_000,)]
    kept = reused_cursor(connection, BOUND_SLOT)
    assert fetch_bound(USING, "SELECT length(%(big)s)", {"big": big}, jobs=1000) == [(100_000,)]
    assert reused_cursor(connection, BOUND_SLOT) is not kept  # let go after the batch
    with pipelined_transaction(USING, jobs=1) as tx:
        single = [tx.cursor(), tx.cursor()]
    with pipelined_transaction(USING, jobs=32) as tx:
        assert [tx.cursor(), tx.cursor()] == single  # the kept ones, run again...
    with pipelined_transaction(USING, jobs=1) as tx:
        again = [tx.cursor(), tx.cursor()]
    assert not {id(c) for c in again} & {id(c) for c in single}  # ...and let go after the batch
    # A failed statement lets its batch go too.
    batch = reused_cursor(connection, BOUND_SLOT)
    with pytest.raises(DatabaseError):
        fetch_bound(USING, "SELECT 1 / %(zero)s::int", {"zero": 0}, jobs=2)
    assert reused_cursor(connection, BOUND_SLOT) is not batch


def test_errors_come_out_as_django_s_and_a_broken_transaction_is_refused() -> None:
    job = enqueue(queue="q")
    insert = (
        "INSERT INTO backwave_django_jobrecord (sequence, job_id, wire_name, queue, payload, due_time, "
        "mode, state, attempt, cancel_requested, parents_remaining, enqueued_at, next_ordinal) "
        "SELECT sequence, gen_random_uuid(), 'x', 'q', '{}', now(), 0, 0, 0, false, 0, now(), 0 "
        "FROM backwave_django_jobrecord WHERE job_id = %(job)s RETURNING 1"
    )
    with pytest.raises(IntegrityError):  # the same sequence again: the primary key refuses it
        fetch_bound(USING, insert, {"job": job}, jobs=1)
    with transaction.atomic():
        with pytest.raises(DatabaseError), transaction.atomic(savepoint=False):
            fetch_bound(USING, "SELECT 1 / %(zero)s::int", {"zero": 0}, jobs=1)
        # Django's rule: once an error left an atomic block without a savepoint, no statement
        # until the outer block is rolled back.
        with pytest.raises(TransactionManagementError):
            fetch_bound(USING, "SELECT 1", {}, jobs=1)
    assert fetch_bound(USING, "SELECT 1", {}, jobs=1) == [(1,)]  # the connection is usable again


def test_a_watched_connection_sees_every_hot_path_statement() -> None:
    enqueue(queue="q")

    def hot_path() -> Any:
        claimed = store.claim(worker_id=WORKER, queues=["q"], max_jobs=4, lease_duration=LEASE, now=T0)
        fetch_bound(USING, "SELECT 7", {}, jobs=1)
        return claimed

    with CaptureQueriesContext(connection) as captured:
        assert len(hot_path()) == 1
    statements = [" ".join(query["sql"].split()) for query in captured.captured_queries]
    assert statements[0].startswith("SELECT set_config(")
    assert "pg_advisory_xact_lock_shared" in statements[1]
    assert statements[2].startswith("WITH RECURSIVE gate")
    assert statements[-1] == "SELECT 7"
