"""A worker's claim floors on PostgreSQL (``core.claim_floors``, ``store/postgres/claims.py``): the
claim starts reading each priority level where the worker's claims got to, keeps claim order,
finds new levels at once and the jobs behind a floor at the next full scan; and under a held
snapshot, what it reads (``EXPLAIN (ANALYZE, BUFFERS)``) stays flat however many jobs were leased
since the snapshot, where a claim from the heads reads them all.

The tests commit for real (``transaction=True``): floors are used only by a claim that is its own
transaction.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.db import connection, connections, transaction

from backwave_django import store
from backwave_django.core.claim_floors import ClaimFloors, FloorBounds
from backwave_django.store.postgres import claims
from backwave_django.store.postgres.connection import server_bound

from ..conftest import LEASE, T0, WORKER, new_job
from .statement_params import claim_params

pytestmark = [pytest.mark.postgres, pytest.mark.fast_path, pytest.mark.django_db(transaction=True)]

#: A full scan each hour: within a test, only the first claim reads from the heads.
NO_RESCAN = timedelta(hours=1)


def _claim(queue: str, now: datetime, floors: ClaimFloors | None, max_jobs: int = 30) -> list[Any]:
    return store.claim(
        worker_id=WORKER, queues=[queue], max_jobs=max_jobs, lease_duration=LEASE, now=now, floors=floors
    )


def _enqueue(queue: str, *dues: tuple[int, datetime], now: datetime = T0) -> list[uuid.UUID]:
    """Jobs of ``queue`` at ``(priority, due time)`` each, in that order; their ids."""
    jobs = [new_job(queue=queue, priority=priority, due_time=due) for priority, due in dues]
    store.enqueue_many(jobs, now=now)
    return [job.job_id for job in jobs]


def test_claims_with_floors_lease_in_claim_order_across_priorities() -> None:
    queue = "floors-order"
    dues = [
        (priority, T0 + timedelta(milliseconds=7 * i)) for i, priority in enumerate([0, 5, -3, 0, 5] * 20)
    ]
    ids = _enqueue(queue, *dues)
    # Claim order: priority (highest first), due time, then enqueue order.
    order = sorted(range(len(ids)), key=lambda i: (-dues[i][0], dues[i][1], i))
    expected = [ids[i] for i in order]
    floors = ClaimFloors(rescan=NO_RESCAN)
    now = T0 + timedelta(seconds=1)
    leased = [job.job_id for _ in range(15) for job in _claim(queue, now, floors, max_jobs=7)]
    assert leased == expected
    assert floors.bounds(queue, now).levels == [-3, 0, 5]


def test_a_new_level_is_found_by_the_next_claim_in_priority_order() -> None:
    queue = "floors-levels"
    floors = ClaimFloors(rescan=NO_RESCAN)
    _enqueue(queue, (0, T0))
    assert len(_claim(queue, T0, floors)) == 1
    assert floors.bounds(queue, T0).levels == [0]
    low, high, mid, plain = _enqueue(queue, (-7, T0), (9, T0), (3, T0), (0, T0))
    assert not floors.bounds(queue, T0).full  # the next claim starts from the floors
    assert [job.job_id for job in _claim(queue, T0, floors)] == [high, mid, plain, low]
    assert floors.bounds(queue, T0).levels == [-7, 0, 3, 9]


def test_a_job_behind_a_floor_waits_for_the_next_full_scan() -> None:
    queue = "floors-behind"
    floors = ClaimFloors(rescan=timedelta(seconds=10))
    now = T0 + timedelta(minutes=1)
    _enqueue(queue, (0, now))
    assert len(_claim(queue, now, floors)) == 1  # a full scan: the floor is now - LAG
    # Made visible after that claim: one due within the lag (a late commit), one due long before.
    within, behind = _enqueue(queue, (0, now - floors.lag / 2), (0, now - timedelta(minutes=1)))
    later = now + timedelta(seconds=1)
    assert [job.job_id for job in _claim(queue, later, floors)] == [within]
    assert _claim(queue, later + timedelta(seconds=5), floors) == []
    rescan = now + floors.rescan
    assert floors.bounds(queue, rescan).full
    assert [job.job_id for job in _claim(queue, rescan, floors)] == [behind]


def test_a_late_jobs_hint_brings_the_floors_down_to_it() -> None:
    """The enqueue's hint carries the earliest due time it made claimable (sql/inserts.sql); the
    worker's listener lowers the floors to it, and the next claim takes the job."""
    import psycopg

    from backwave_django.database import listen_database
    from backwave_django.worker.hints import HintListener

    queue = "floors-hinted"
    floors = ClaimFloors(rescan=NO_RESCAN)
    now = T0 + timedelta(minutes=1)
    _enqueue(queue, (0, now))
    assert len(_claim(queue, now, floors)) == 1
    listener = HintListener(using=listen_database(), queues=[queue], wake=lambda: None, floors=floors)
    params = connections[listen_database()].get_connection_params()
    for key in ("cursor_factory", "context"):
        params.pop(key, None)
    with psycopg.connect(**params, autocommit=True) as listening:
        listening.execute(f"LISTEN {store.HINT_CHANNEL}")
        (late,) = _enqueue(queue, (0, T0), now=now)  # due a minute before the floor
        for notice in listening.notifies(timeout=5.0, stop_after=1):
            listener.heard(notice.payload)
    assert [job.job_id for job in _claim(queue, now, floors)] == [late]


def test_a_claim_in_the_callers_transaction_keeps_no_floors() -> None:
    queue = "floors-inside"
    _enqueue(queue, (0, T0))
    floors = ClaimFloors()
    with transaction.atomic():
        assert len(_claim(queue, T0, floors)) == 1
    assert floors.bounds(queue, T0).full


# --- Under a held snapshot ------------------------------------------------------------------

#: Jobs due every 5 ms (200 a second), claimed 30 at a time as they fall due.
SPACING = timedelta(milliseconds=5)
BATCH = 30


@pytest.fixture
def held_snapshot() -> Iterator[None]:
    """Another session idle in a REPEATABLE READ transaction with a snapshot and a transaction id:
    no row version of a job leased after it can be pruned while it lasts."""
    import psycopg

    holder = psycopg.connect(**connection.get_connection_params(), autocommit=True)
    try:
        holder.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        holder.execute("SELECT txid_current(), count(*) FROM backwave_django_jobrecord")
        yield
    finally:
        holder.close()


def _claim_buffers(queue: str, now: datetime, bounds: FloorBounds) -> int:
    """Shared buffers (hit + read) a :data:`CLAIM` of ``queue`` at ``now`` touches from ``bounds``
    (a full scan when empty); rolled back."""
    params = claim_params(queue, now=now, take=BATCH, bounds=bounds)
    with transaction.atomic(), server_bound("default") as cursor:
        cursor.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + claims.CLAIM, params)
        (document,) = cursor.fetchone()
        transaction.set_rollback(True)
    plan = (document if isinstance(document, list) else json.loads(document))[0]["Plan"]
    return int(plan.get("Shared Hit Blocks", 0)) + int(plan.get("Shared Read Blocks", 0))


@pytest.mark.usefixtures("held_snapshot")
def test_under_a_held_snapshot_the_claim_from_its_floors_reads_the_same_however_many_jobs_were_leased() -> (
    None
):
    queue = "floors-held"
    total = 3_990  # a whole number of batches
    for start in range(0, total, 1_000):
        _enqueue(queue, *((0, T0 + SPACING * i) for i in range(start, min(start + 1_000, total))))
    floors = ClaimFloors(rescan=NO_RESCAN)
    measured: dict[int, tuple[int, int]] = {}
    leased = 0
    while leased < total:
        now = T0 + SPACING * (leased + BATCH - 1)
        got = _claim(queue, now, floors, max_jobs=BATCH)
        assert len(got) == BATCH
        leased += len(got)
        if leased in (600, total):  # nothing due is left at ``now``: what finding nothing costs
            measured[leased] = (
                _claim_buffers(queue, now, floors.bounds(queue, now)),
                _claim_buffers(queue, now, FloorBounds([], [])),
            )
    (floored_early, full_early), (floored_late, full_late) = measured[600], measured[total]
    print(
        f"CLAIM after 600 / {total} leased under a held snapshot: from floors {floored_early} / "
        f"{floored_late} buffers, from the heads {full_early} / {full_late}"
    )
    # From the heads, the claim steps over every job leased since the snapshot: its reads grow.
    assert full_late > full_early + 50
    # From the floors, over those due in the last LAG (400 at 200 a second), whatever the total.
    assert floored_late <= floored_early + 10
    assert floored_late * 3 < full_late
