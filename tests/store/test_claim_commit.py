"""A claim that is its own transaction commits without waiting for the WAL flush; nothing else does.

The guarantees do not need a claim to be durable (a lost claim is a job Scheduled again, and the
outcome of the run that acted on it is fenced off), so on PostgreSQL the claim transaction sets
``synchronous_commit = off`` for itself. These tests pin where that setting goes and where not.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection, transaction

from backwave_django import store
from backwave_django.core.outcomes import OutcomeReport, Success

from ..conftest import LEASE, T0, WORKER, enqueue

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

ASYNC = "synchronous_commit"  # SET LOCAL, or set_config(…, true) in the pipelined claim


def _statements(call: Any) -> list[str]:
    seen: list[str] = []

    def capture(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        seen.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(capture):
        call()
    return seen


def _setting() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SHOW synchronous_commit")
        value: str = cursor.fetchone()[0]
        return value


@pytest.mark.fast_path
def test_a_claim_of_its_own_commits_asynchronously_and_the_setting_ends_with_it() -> None:
    before = _setting()
    enqueue()
    claimed: list[Any] = []
    statements = _statements(
        lambda: claimed.extend(
            store.claim(worker_id=WORKER, queues=["default"], max_jobs=5, lease_duration=LEASE, now=T0)
        )
    )
    assert len(claimed) == 1
    assert any(ASYNC in sql for sql in statements)
    assert _setting() == before  # SET LOCAL: gone with the claim's transaction


def test_a_claim_inside_the_callers_transaction_leaves_its_commit_alone() -> None:
    before = _setting()
    enqueue()
    with transaction.atomic():
        statements = _statements(
            lambda: store.claim(
                worker_id=WORKER, queues=["default"], max_jobs=5, lease_duration=LEASE, now=T0
            )
        )
        assert _setting() == before
    assert not any(ASYNC in sql for sql in statements)


def test_outcomes_and_enqueues_wait_for_the_flush() -> None:
    statements = _statements(lambda: enqueue())
    claimed = store.claim(worker_id=WORKER, queues=["default"], max_jobs=5, lease_duration=LEASE, now=T0)
    report = OutcomeReport(job_id=claimed[0].job_id, worker_id=WORKER, attempt=1, outcome=Success())
    statements += _statements(lambda: store.report_outcomes([report], now=T0))
    assert statements
    assert not any("synchronous_commit" in sql for sql in statements)


def test_a_claim_in_the_callers_implicit_transaction_leaves_its_commit_alone() -> None:
    # With autocommit off (DATABASES' AUTOCOMMIT=False, or set_autocommit) every statement is part
    # of the caller's transaction, which the caller commits: the claim must not end it or change it.
    before = _setting()
    enqueue()
    transaction.set_autocommit(False)
    try:
        statements = _statements(
            lambda: store.claim(worker_id=WORKER, queues=["default"], max_jobs=5, lease_duration=LEASE, now=T0)
        )
        assert _setting() == before
        transaction.rollback()  # the caller's decision: nothing of the claim stays
    finally:
        transaction.set_autocommit(True)
    assert not any(ASYNC in sql or sql in ("BEGIN", "COMMIT") for sql in statements)
    assert store.claim(worker_id=WORKER, queues=["default"], max_jobs=5, lease_duration=LEASE, now=T0)
