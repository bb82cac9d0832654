"""Query plans of the hot statements (store/postgres/sql/), pinned on PostgreSQL.

Each test reads ``EXPLAIN (FORMAT JSON)`` of a statement over a seeded jobs table: thousands of
finished jobs, a backlog in a few queues, statistics fresh. The statements the worker sends as
transactions of their own run with server-side parameters on their generic plan (see
``store/postgres/claims.py``, ``_open_claim``), so that is the plan read here: the parameters
are bound on the server (``connection.server_bound``) under ``plan_cache_mode =
force_generic_plan``. The claim's walk of jobs due later is pinned in ``test_claim.py``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection, transaction

from backwave_django import store
from backwave_django.conf import get_settings
from backwave_django.core.outcomes import OutcomeReport, Success
from backwave_django.core.states import EnqueueResult
from backwave_django.store.postgres import claims, outcomes
from backwave_django.store.postgres.connection import server_bound
from backwave_django.store.postgres.enqueue import inserts
from backwave_django.store.uniqueness import LOOK_UP_UNIQUE

from ..conftest import LEASE, T0, WORKER, enqueue, lease, new_job, report
from .statement_params import claim_params, report_params

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.fast_path,
    pytest.mark.django_db,
    pytest.mark.usefixtures("job_statistics_restored"),
]

JOBS = "backwave_django_jobrecord"
FINISHED = 3000
BACKLOG = 200


@pytest.fixture
def seeded() -> list[uuid.UUID]:
    """A jobs table of ``FINISHED`` succeeded jobs and a backlog of ``BACKLOG`` due jobs spread over
    four queues and three priorities; returns the backlog's ids."""
    finished = [new_job(queue="done") for _ in range(FINISHED)]
    store.enqueue_many(finished, now=T0)
    while claimed := store.claim(
        worker_id=WORKER, queues=["done"], max_jobs=1000, lease_duration=LEASE, now=T0
    ):
        store.report_outcomes(
            [OutcomeReport(job_id=c.job_id, worker_id=WORKER, attempt=1, outcome=Success()) for c in claimed],
            now=T0,
        )
    backlog = [new_job(queue=f"q{n % 4}", priority=(n % 3) * 10) for n in range(BACKLOG)]
    store.enqueue_many(backlog, now=T0)
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {JOBS}")
    return [j.job_id for j in backlog]


def _plan(sql: str, params: dict[str, Any]) -> dict[str, Any]:
    """The generic plan of ``sql`` with ``params`` bound on the server; nothing it would write stays."""
    with transaction.atomic(), server_bound("default") as cursor:
        cursor.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        cursor.execute("EXPLAIN (FORMAT JSON) " + sql, params)
        (document,) = cursor.fetchone()
        transaction.set_rollback(True)
    found = document if isinstance(document, list) else json.loads(document)
    plan: dict[str, Any] = found[0]["Plan"]
    return plan


def _nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", ()):
        yield from _nodes(child)


def _scans_of(plan: dict[str, Any], relation: str) -> list[tuple[str, str | None]]:
    """Each scan of ``relation`` in the plan: its node type and index (for a bitmap scan, each of
    the indexes it combines)."""
    scans: list[tuple[str, str | None]] = []
    for node in _nodes(plan):
        if node.get("Relation Name") != relation or "Scan" not in node["Node Type"]:
            continue
        if node["Node Type"] == "Bitmap Heap Scan":
            bitmaps = [n["Index Name"] for n in _nodes(node) if n["Node Type"] == "Bitmap Index Scan"]
            scans += [("Bitmap Heap Scan", index) for index in bitmaps]
        else:
            scans.append((node["Node Type"], node.get("Index Name")))
    return scans


def _seq_scans(scans: list[tuple[str, str | None]]) -> list[tuple[str, str | None]]:
    return [scan for scan in scans if scan[0] == "Seq Scan"]


def test_the_claim_walks_its_partial_index_and_never_scans_the_jobs_table(seeded: list[uuid.UUID]) -> None:
    scans = _scans_of(_plan(claims.CLAIM, claim_params("q0")), JOBS)
    assert scans, scans
    assert not _seq_scans(scans), scans
    assert ("Index Only Scan", "backwave_job_claim") in scans or (
        "Index Scan",
        "backwave_job_claim",
    ) in scans, scans
    # The leased rows are updated by primary key (the ARRAY of the picked sequences).
    assert ("Index Scan", f"{JOBS}_pkey") in scans, scans


def test_the_report_locks_its_rows_through_the_job_id_index(seeded: list[uuid.UUID]) -> None:
    leased = lease(queue="q1", max_jobs=3)
    batch = [
        {
            "job_id": str(c.job_id),
            "worker_id": WORKER,
            "attempt": 1,
            "state": 3,
            "clear_cancel": False,
            "gives_back": False,
        }
        for c in leased
    ]
    params = report_params(batch)
    scans = _scans_of(_plan(outcomes.REPORT, params), JOBS)
    assert scans, scans
    assert not _seq_scans(scans), scans
    assert any(index is not None and index.endswith("job_id_key") for _, index in scans), scans


def test_the_check_for_ended_parents_reads_the_reported_jobs_by_id_not_every_finished_job(
    seeded: list[uuid.UUID],
) -> None:
    """After a report, the pipelined batch asks whether any job it just ended has waiting children.
    With the state condition beside the ids the planner would walk the terminal jobs' partial
    index (``backwave_job_purge``), reading every retained one on every batch."""
    scans = _scans_of(_plan(outcomes.ENDED_WITH_CHILDREN, {"ids": seeded[:2]}), JOBS)
    assert scans, scans
    assert all(index is not None and index.endswith("job_id_key") for _, index in scans), scans


def test_the_check_for_ended_parents_on_a_fresh_backlog_is_not_tempted_by_the_purge_index() -> None:
    """The statistics of a fresh backlog (every job Scheduled, as when a worker starts on one) make
    the terminal jobs' index look empty, so the planner is tempted most (a custom plan here)."""
    finished = [enqueue() for _ in range(400)]
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {JOBS}")
    lease(max_jobs=400)
    for job_id in finished:
        report(job_id)
    reported = [enqueue() for _ in range(2)]
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("EXPLAIN (COSTS OFF) " + outcomes.ENDED_WITH_CHILDREN, {"ids": reported})
        plan = "\n".join(row[0] for row in cursor.fetchall())
        transaction.set_rollback(True)
    assert "backwave_job_purge" not in plan, plan
    assert "job_id_key" in plan, plan


def test_the_unique_look_up_reads_the_unique_keys_and_ids_through_their_indexes(
    seeded: list[uuid.UUID],
) -> None:
    params = {"keys": ["k1", "k2"], "job_ids": seeded[:3]}
    scans = _scans_of(_plan(LOOK_UP_UNIQUE, params), JOBS)
    assert scans, scans
    assert not _seq_scans(scans), scans
    assert {index for _, index in scans} >= {"backwave_job_unique"}, scans


@pytest.mark.parametrize("statement", ["ENQUEUE", "ENQUEUE_ONE", "ENQUEUE_NEW", "ENQUEUE_ONE_NEW"])
def test_an_enqueue_reads_nothing_of_the_jobs_table(seeded: list[uuid.UUID], statement: str) -> None:
    """The inserts (with or without ``ON CONFLICT``; they take the same parameters) never look
    through the jobs table, whatever is in it."""
    jobs = [new_job(queue="q9", tags=("t",))]
    if "ONE" not in statement:
        jobs.append(new_job(queue="q8"))
    results: list[EnqueueResult | None] = [None] * len(jobs)
    tagged, params, _ = inserts.insert_statement(jobs, results, T0, get_settings())
    sql = getattr(inserts, statement)
    assert sql == tagged or "NEW" in statement
    assert ("ON CONFLICT" in sql) is ("NEW" not in statement)
    assert _scans_of(_plan(sql, params), JOBS) == []
