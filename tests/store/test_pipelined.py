"""Claims and outcome batches that are their own transaction on PostgreSQL, pipelined.

A claim's queue locks, settings and one claim statement per queue go out together (psycopg's
pipeline mode) as one transaction, which the pipeline's Sync commits, and each claim statement
works out its own batch size. An outcome batch's ``BEGIN``, report statement and check for
waiting children go out together, and the ``COMMIT`` follows. These tests run outside any
transaction (``transaction=True``), so the store takes those paths; ``test_claim.py`` and
``test_outcomes.py`` cover the same rules inside a caller's transaction, where both have the
classic shape.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from django.db import DataError, OperationalError, connection

from backwave_django import JobState, store
from backwave_django.core.outcomes import OutcomeReport, Success
from backwave_django.core.states import OutcomeResult
from backwave_django.models import JobRecord
from backwave_django.store import backends
from backwave_django.store._schema import QUEUE_LOCK_CLASS
from backwave_django.store.postgres.queues import queue_key

from ..conftest import LEASE, T0, WORKER, enqueue, row
from .statement_params import claim_params, report_params

pytestmark = [pytest.mark.postgres, pytest.mark.fast_path, pytest.mark.django_db(transaction=True)]


def _claim(queues: list[str], max_jobs: int = 32, now: Any = T0) -> list[Any]:
    return store.claim(worker_id=WORKER, queues=queues, max_jobs=max_jobs, lease_duration=LEASE, now=now)


def _statements(call: Any) -> list[str]:
    seen: list[str] = []

    def capture(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        seen.append(" ".join(sql.split()))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(capture):
        call()
    return seen


def _idle() -> bool:
    return bool(connection.connection.pgconn.transaction_status == psycopg.pq.TransactionStatus.IDLE)


def test_a_claim_is_one_transaction_sent_in_one_round_trip() -> None:
    job = enqueue(queue="a")
    claimed: list[Any] = []
    statements = _statements(lambda: claimed.extend(_claim(["a", "b"])))
    assert [c.job_id for c in claimed] == [job]
    assert statements[0].startswith("SELECT set_config(")
    assert "pg_advisory_xact_lock_shared" in statements[1]
    assert sum(s.startswith("WITH RECURSIVE gate") for s in statements) == 2  # one claim statement per queue
    assert len(statements) == 4  # no BEGIN, no COMMIT: the pipeline's Sync ends the transaction
    assert _idle()
    assert row(job).state == JobState.LEASED


def test_a_claim_that_fails_in_a_later_queue_leases_nothing_in_the_earlier_ones() -> None:
    # The statements before the pipeline's Sync are one transaction: when the second queue's
    # claim statement fails (here its attempt counter would overflow), the first queue's lease,
    # already written by an earlier statement of the flight, is rolled back with it.
    first = enqueue(queue="a")
    broken = enqueue(queue="b")
    JobRecord.objects.filter(job_id=broken).update(attempt=2**31 - 1)
    with pytest.raises(DataError, match="out of range"):
        _claim(["a", "b"])
    assert _idle()
    assert row(first).state == JobState.SCHEDULED
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()")
        assert cursor.fetchone() == (0,)
    assert [c.job_id for c in _claim(["a"])] == [first]


def test_queues_are_served_in_order_and_later_queues_get_what_earlier_ones_left() -> None:
    late_b = enqueue(queue="b", due_time=T0 - timedelta(minutes=1))
    early_b = enqueue(queue="b", due_time=T0 - timedelta(minutes=5))
    a1 = enqueue(queue="a")
    a0 = enqueue(queue="a", due_time=T0 - timedelta(minutes=1))
    c1 = enqueue(queue="c")
    assert [c.job_id for c in _claim(["a", "b", "c"], max_jobs=3)] == [a0, a1, early_b]
    assert [c.job_id for c in _claim(["a", "b", "c"], max_jobs=3)] == [late_b, c1]


def test_claims_with_the_same_clock_reading_count_only_their_own_leases() -> None:
    # Same worker, same `now` (so the same lease expiry) twice: the second claim's batch size
    # must not count the first claim's leases in queue a as its own.
    a = enqueue(queue="a")
    b1 = enqueue(queue="b")
    b2 = enqueue(queue="b", due_time=T0 + timedelta(microseconds=1))
    assert [c.job_id for c in _claim(["a", "b"], max_jobs=1)] == [a]
    assert [c.job_id for c in _claim(["a", "b"], max_jobs=1)] == [b1]
    assert [c.job_id for c in _claim(["a", "b"], max_jobs=2, now=T0 + timedelta(seconds=1))] == [b2]


def test_a_paused_queue_yields_nothing_and_the_next_queue_is_served() -> None:
    enqueue(queue="paused")
    other = enqueue(queue="other")
    store.pause_queue("paused", actor="ops", now=T0)
    assert [c.job_id for c in _claim(["paused", "other"])] == [other]
    assert JobRecord.objects.filter(queue="paused", state=JobState.SCHEDULED).count() == 1


def test_a_limited_queue_keeps_its_place_and_its_limit() -> None:
    first = enqueue(queue="first")
    limited = [enqueue(queue="limited", due_time=T0 - timedelta(seconds=3 - i)) for i in range(3)]
    last = [enqueue(queue="last", due_time=T0 - timedelta(seconds=2 - i)) for i in range(2)]
    store.set_concurrency_limit("limited", 2, actor="ops", now=T0)
    claimed = _claim(["first", "limited", "last"], max_jobs=4)
    assert [c.job_id for c in claimed] == [first, limited[0], limited[1], last[0]]
    assert [c.job_id for c in _claim(["first", "limited", "last"])] == [last[1]]  # limited is full
    assert _idle()


@pytest.mark.session_bound  # SET lock_timeout
def test_a_failed_flight_is_rolled_back_and_the_connection_stays_usable() -> None:
    job = enqueue(queue="a")
    with connection.cursor() as cursor:
        cursor.execute("SET lock_timeout = '50ms'")
    blocker = psycopg.connect(
        **{k: v for k, v in connection.get_connection_params().items() if k != "cursor_factory"},
        autocommit=False,
    )
    try:
        # An operator change in progress holds the queue's lock exclusively.
        blocker.execute("SELECT pg_advisory_xact_lock(%s, %s)", (QUEUE_LOCK_CLASS, queue_key("a")))
        with pytest.raises(OperationalError, match="lock"):
            _claim(["a"])
        assert _idle()
        assert row(job).state == JobState.SCHEDULED
        blocker.rollback()
        assert [c.job_id for c in _claim(["a"])] == [job]
    finally:
        blocker.close()
        with connection.cursor() as cursor:
            cursor.execute("RESET lock_timeout")


@pytest.mark.session_bound  # prepared statements live in the session
def test_a_claim_runs_on_the_generic_plan_and_leaves_the_setting_behind() -> None:
    """Left to choose, PostgreSQL plans the claim statement afresh for every claim of a
    connection whose first claims found nothing; a claim of its own asks for the generic plan,
    in a statement ahead of the others (the one that sets it is planned before it is set)."""
    store.set_concurrency_limit("limited", 2, actor="ops", now=T0)
    connection.ensure_connection()
    raw = connection.connection
    raw.prepare_threshold = 0  # prepare every statement at its first run
    try:
        for _ in range(7):
            assert _claim(["empty"]) == []  # the pipelined path
            assert _claim(["limited"]) == []  # the exact path
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT sum(generic_plans), sum(custom_plans) FROM pg_prepared_statements"
                " WHERE statement LIKE %s",
                ["%WITH RECURSIVE gate%"],
            )
            generic, custom = cursor.fetchone()
            cursor.execute(
                "SELECT sum(generic_plans), sum(custom_plans) FROM pg_prepared_statements"
                " WHERE statement LIKE %s",
                ["%pg_advisory_xact_lock_shared%"],
            )
            opened_generic, opened_custom = cursor.fetchone()
            cursor.execute("SHOW plan_cache_mode")
            mode = cursor.fetchone()[0]
            cursor.execute("SHOW enable_seqscan")
            seqscan = cursor.fetchone()[0]
        assert custom == 0
        assert opened_custom == 0
        assert opened_generic >= 14
        assert generic >= 14  # (a limited queue's claim also passes through the pipelined path)
        assert (mode, seqscan) == ("auto", "on")  # SET LOCAL: the claim's transaction only
    finally:
        connection.close()  # the next test starts without these prepared statements


def _success(claimed: Any, worker: str = WORKER) -> OutcomeReport:
    return OutcomeReport(job_id=claimed.job_id, worker_id=worker, attempt=claimed.attempt, outcome=Success())


def test_an_outcome_batch_runs_on_generic_plans_and_leaves_the_setting_behind() -> None:
    """Left to choose, PostgreSQL plans the first five runs of a prepared statement afresh and may
    go on doing so (the check for waiting children did, at every batch, in the long-horizon
    scenario); an outcome batch of its own asks for the generic plans."""
    connection.ensure_connection()
    connection.connection.prepare_threshold = 0  # prepare every statement at its first run
    try:
        for _ in range(7):
            enqueue()
            claimed = _claim(["default"], max_jobs=1)
            assert store.report_outcomes([_success(claimed[0])], now=T0) == [OutcomeResult.APPLIED]
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements"
                " WHERE statement LIKE %s OR statement LIKE %s",
                ["%jsonb_to_recordset%", "%reported AS MATERIALIZED%"],
            )
            plans = {" ".join(text.split()[:2]): (generic, custom) for text, generic, custom in cursor.fetchall()}
            cursor.execute("SHOW plan_cache_mode")
            mode = cursor.fetchone()[0]
        assert plans == {"WITH input": (7, 0), "WITH reported": (7, 0)}
        assert mode == "auto"  # the batch's transaction only
    finally:
        connection.close()  # the next test starts without these prepared statements


def test_an_outcome_batch_is_begin_report_and_check_in_one_round_trip_then_commit() -> None:
    first, second = enqueue(), enqueue()
    claimed = _claim(["default"])
    reports = [_success(claimed[0]), _success(claimed[1], worker="someone-else")]
    results: list[Any] = []
    statements = _statements(lambda: results.extend(store.report_outcomes(reports, now=T0)))
    assert results == [OutcomeResult.APPLIED, OutcomeResult.STALE_LEASE]
    assert [s.split()[0] for s in statements] == ["BEGIN", "SELECT", "WITH", "WITH", "COMMIT"]
    assert _idle()
    assert (row(first).state, row(second).state) == (JobState.SUCCEEDED, JobState.LEASED)


def test_a_parent_with_waiting_children_is_written_by_the_classic_transaction() -> None:
    parent = enqueue()
    child = enqueue(parents=[parent])
    [claimed] = _claim(["default"])
    results: list[Any] = []
    statements = _statements(lambda: results.extend(store.report_outcomes([_success(claimed)], now=T0)))
    assert results == [OutcomeResult.APPLIED]
    assert [s.split()[0] for s in statements[:5]] == ["BEGIN", "SELECT", "WITH", "WITH", "ROLLBACK"]
    assert _idle()
    assert row(parent).state == JobState.SUCCEEDED
    assert row(child).state == JobState.SCHEDULED  # released by the cascade, in the same commit
    assert [c.job_id for c in _claim(["default"])] == [child]


def test_on_psycopg2_the_store_takes_the_orm_path_and_workers_poll(monkeypatch: pytest.MonkeyPatch) -> None:
    # Django's PostgreSQL backend also runs on psycopg2; the statements above need psycopg 3.
    from django.db.backends.postgresql import psycopg_any

    from backwave_django.worker.hints import HintListener

    monkeypatch.setattr(psycopg_any, "is_psycopg3", False)
    monkeypatch.setattr(backends, "CHOSEN", {})  # chosen again, on psycopg2
    job = enqueue(queue="a")
    claimed: list[Any] = []
    statements = _statements(lambda: claimed.extend(_claim(["a"])))
    assert [c.job_id for c in claimed] == [job]
    assert not any(s in ("BEGIN", "COMMIT") or s.startswith("WITH picked") for s in statements)
    assert store.report_outcomes([_success(claimed[0])], now=T0) == [OutcomeResult.APPLIED]
    assert not HintListener.available("default")


def test_the_claims_generic_plan_made_on_an_empty_table_reads_by_index() -> None:
    """A worker's first claim may find the jobs table empty (a fresh project, the start of a run),
    and its generic plan is kept until the table's statistics change (an ANALYZE). Made with
    sequential scans allowed, it would read the whole jobs table and transition log at every claim
    as they grow (measured: hundreds of buffers a claim, growing); the claim's transaction plans
    without them (``PIPELINED_SETTINGS``)."""
    import json

    from django.db import transaction

    from backwave_django.store.postgres import claims
    from backwave_django.store.postgres.connection import server_bound
    from backwave_django.store.postgres.queues import PIPELINED_SETTINGS, queue_keys

    _truncate_and_analyze()
    params = claim_params("q")
    with transaction.atomic(), server_bound("default") as cursor:
        cursor.execute(PIPELINED_SETTINGS)
        cursor.execute(claims.PIPELINED_OPEN, {"queue_keys": queue_keys(["q"]), "queues": ["q"]})
        cursor.execute("EXPLAIN (FORMAT JSON) " + claims.CLAIM, params)
        (document,) = cursor.fetchone()
        transaction.set_rollback(True)
    plan = json.dumps(document if isinstance(document, list) else json.loads(document))
    assert '"Seq Scan"' not in plan, plan
    assert '"JIT"' not in plan, plan


def _truncate_and_analyze() -> None:
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE backwave_django_jobrecord CASCADE")
        cursor.execute("ANALYZE backwave_django_jobrecord")
        cursor.execute("ANALYZE backwave_django_jobtransition")


def test_an_outcome_batch_made_on_an_empty_table_reads_by_index() -> None:
    """As the claim's (above): the outcome batch's statements are planned without sequential scans
    (``REPORT_OWN_SETTINGS``), so a plan kept from an empty table does not read the whole table."""
    import json
    import uuid

    from django.db import transaction

    from backwave_django.store.postgres import outcomes
    from backwave_django.store.postgres.connection import server_bound

    _truncate_and_analyze()
    batch = [{"job_id": str(uuid.uuid4()), "worker_id": WORKER, "attempt": 1, "state": 3}]
    params = report_params(batch)
    with transaction.atomic(), server_bound("default") as cursor:
        cursor.execute(outcomes.REPORT_OWN_SETTINGS)
        plans = []
        for sql, values in (
            (outcomes.REPORT, params),
            (outcomes.ENDED_WITH_CHILDREN, {"ids": "{" + str(batch[0]["job_id"]) + "}"}),
        ):
            cursor.execute("EXPLAIN (FORMAT JSON) " + sql, values)
            (document,) = cursor.fetchone()
            plans.append(json.dumps(document if isinstance(document, list) else json.loads(document)))
        transaction.set_rollback(True)
    for plan in plans:
        # (The queue settings, one row per configured queue, have no index for what REPORT reads.)
        for scan in re.findall(r'"Node Type": "Seq Scan"[^{}]*?"Relation Name": "(\w+)"', plan):
            assert scan == "backwave_django_queuesettings", plan
        assert '"JIT"' not in plan, plan
