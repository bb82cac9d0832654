from datetime import timedelta

import pytest

from backwave_django import JobState, store
from backwave_django.models import JobRecord

from ..conftest import LEASE, T0, WORKER, enqueue, history, lease, report, row
from .statement_params import claim_params

pytestmark = pytest.mark.django_db


def _claim(queues, now=T0, max_jobs=32, worker=WORKER):
    return store.claim(worker_id=worker, queues=queues, max_jobs=max_jobs, lease_duration=LEASE, now=now)


def test_claim_leases_the_job_and_logs_the_attempt():
    job_id = enqueue(payload={"args": [1], "kwargs": {}}, tags=["vip"])
    [claimed] = _claim(["default"], now=T0 + timedelta(seconds=3))
    assert claimed.job_id == job_id
    assert (claimed.wire_name, claimed.queue, claimed.payload) == (
        "send-invoice",
        "default",
        {"args": [1], "kwargs": {}},
    )
    assert (claimed.attempt, claimed.lease_owner) == (1, WORKER)
    assert claimed.lease_expiry == T0 + timedelta(seconds=3) + LEASE
    assert claimed.due_time == T0
    assert claimed.tags == ("vip",)
    record = row(job_id)
    assert (record.state, record.attempt, record.lease_owner) == (JobState.LEASED, 1, WORKER)
    assert record.lease_expiry == claimed.lease_expiry
    assert history(job_id)[-1] == (1, "LEASED", 1, WORKER)


def test_claim_is_queue_major_then_due_time_then_sequence():
    late_b = enqueue(queue="b", due_time=T0 - timedelta(minutes=1))
    early_b = enqueue(queue="b", due_time=T0 - timedelta(minutes=5))
    a1 = enqueue(queue="a", due_time=T0)
    a2 = enqueue(queue="a", due_time=T0)
    a0 = enqueue(queue="a", due_time=T0 - timedelta(minutes=1))
    claimed = _claim(["a", "b"])
    assert [c.job_id for c in claimed] == [a0, a1, a2, early_b, late_b]


def test_claim_skips_jobs_not_yet_due_and_awaiting_parents():
    future = enqueue(due_time=T0 + timedelta(seconds=1))
    parent = enqueue(queue="p")
    enqueue(parents=[parent])
    assert _claim(["default"]) == []
    assert [c.job_id for c in _claim(["default"], now=T0 + timedelta(seconds=1))] == [future]


def test_claim_is_clamped_to_the_batch_limit():
    for _ in range(40):
        enqueue()
    assert len(_claim(["default"], max_jobs=1000)) == 32
    assert len(_claim(["default"], max_jobs=3)) == 3
    assert len(_claim(["default"])) == 5


def test_claim_fills_the_batch_from_later_queues():
    enqueue(queue="a")
    enqueue(queue="b")
    enqueue(queue="b")
    claimed = _claim(["a", "b"], max_jobs=2)
    assert [c.queue for c in claimed] == ["a", "b"]


def test_nothing_is_claimed_for_no_queues_or_no_slots():
    enqueue()
    assert _claim([]) == []
    assert _claim(["default"], max_jobs=0) == []
    assert row(JobRecord.objects.get().job_id).state == JobState.SCHEDULED


def test_paused_queue_yields_nothing_until_resumed():
    paused = enqueue(queue="paused")
    other = enqueue(queue="other")
    store.pause_queue("paused", actor="ops", now=T0)
    assert [c.job_id for c in _claim(["paused", "other"])] == [other]
    store.resume_queue("paused", actor="ops", now=T0)
    assert [c.job_id for c in _claim(["paused", "other"])] == [paused]


def test_pausing_keeps_running_jobs_heartbeating_and_reporting():
    job_id = enqueue()
    _claim(["default"])
    store.pause_queue("default", actor="ops", now=T0)
    [beat] = store.heartbeat(worker_id=WORKER, job_ids=[job_id], lease_duration=LEASE, now=T0)
    assert beat.renewed
    assert report(job_id).name == "APPLIED"


def test_concurrency_limit_counts_leased_jobs():
    jobs = [enqueue() for _ in range(5)]
    store.set_concurrency_limit("default", 2, actor="ops", now=T0)
    first = _claim(["default"])
    assert [c.job_id for c in first] == jobs[:2]
    assert _claim(["default"]) == []
    report(jobs[0])
    assert [c.job_id for c in _claim(["default"])] == [jobs[2]]
    store.set_concurrency_limit("default", None, actor="ops", now=T0)
    assert [c.job_id for c in _claim(["default"])] == jobs[3:]


def test_a_limit_of_zero_blocks_the_queue():
    enqueue()
    store.set_concurrency_limit("default", 0, actor="ops", now=T0)
    assert _claim(["default"]) == []


def test_a_lowered_limit_is_not_retroactive():
    for _ in range(4):
        enqueue()
    assert len(_claim(["default"], max_jobs=3)) == 3
    store.set_concurrency_limit("default", 1, actor="ops", now=T0)
    assert _claim(["default"]) == []
    assert JobRecord.objects.filter(state=JobState.LEASED).count() == 3


def test_a_lapsed_lease_holds_its_slot_until_it_is_swept():
    enqueue()
    waiting = enqueue()
    store.set_concurrency_limit("default", 1, actor="ops", now=T0)
    _claim(["default"])
    later = T0 + LEASE + timedelta(seconds=1)
    assert _claim(["default"], now=later) == []
    from backwave_django import RetryPolicy

    assert store.expire_leases(now=later, queues=["default"], retry=RetryPolicy()) == 1
    assert [c.job_id for c in _claim(["default"], now=later)] == [waiting]


def test_claim_refuses_malformed_arguments():
    from datetime import datetime

    with pytest.raises(ValueError, match="lease_duration must be greater than zero"):
        store.claim(worker_id="w", queues=["q"], max_jobs=1, lease_duration=timedelta(0), now=T0)
    with pytest.raises(TypeError, match="lease_duration must be a timedelta"):
        store.claim(worker_id="w", queues=["q"], max_jobs=1, lease_duration=60, now=T0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="now must be timezone-aware"):
        store.claim(worker_id="w", queues=["q"], max_jobs=1, lease_duration=LEASE, now=datetime(2026, 1, 1))
    with pytest.raises(ValueError, match="worker_id must be a non-empty string"):
        store.claim(worker_id="", queues=["q"], max_jobs=1, lease_duration=LEASE, now=T0)
    with pytest.raises(ValueError, match="max_jobs must be an int >= 0"):
        store.claim(worker_id="w", queues=["q"], max_jobs=-1, lease_duration=LEASE, now=T0)
    with pytest.raises(TypeError, match="queues must be a list"):
        store.claim(worker_id="w", queues="q", max_jobs=1, lease_duration=LEASE, now=T0)


@pytest.mark.postgres
@pytest.mark.fast_path
@pytest.mark.usefixtures("job_statistics_restored")
def test_the_claim_never_reads_jobs_due_later_whatever_their_priority():
    """The claim statement walks the claim index one priority at a time with ``due_time`` in the
    index condition, so future jobs (here 500 urgent ones) are never visited."""
    from django.db import connection, transaction

    from backwave_django.store.postgres import claims

    for _ in range(500):
        enqueue(priority=50, due_time=T0 + timedelta(days=1))
    due = [enqueue(priority=p) for p in (10, 0)]
    params = claim_params("default", through=[])
    with transaction.atomic(), connection.cursor() as cursor:  # EXPLAIN ANALYZE runs it: undo that
        cursor.execute("ANALYZE backwave_django_jobrecord")
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) " + claims.CLAIM, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
        transaction.set_rollback(True)
    assert "backwave_job_claim" in plan, plan
    conditions = [line for line in plan.splitlines() if "Index Cond" in line and "due_time" in line]
    assert conditions, plan
    assert "Rows Removed by Filter: 500" not in plan, plan
    assert [c.job_id for c in lease(now=T0)] == due
