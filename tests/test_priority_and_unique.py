"""Priority within a queue, unique jobs, async enqueues and reading results, on every database leg
(PostgreSQL's statements and the ORM path elsewhere)."""

from __future__ import annotations

import asyncio
import threading
import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, transaction
from django.utils import timezone

from backwave_django import (
    EnqueueResult,
    JobState,
    Unique,
    aenqueue_many,
    await_job,
    get_job,
    store,
    wait_for,
)
from backwave_django.core.unique import UniqueKey
from backwave_django.models import JobRecord, JobTransition

from .conftest import LEASE, T0, enqueue, force_portable, lease, new_job, report
from .jobsapp import jobs

pytestmark = pytest.mark.django_db


@pytest.fixture(params=["statements", "orm"])
def enqueue_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both enqueue paths on PostgreSQL: its statements, and the ORM path the other databases take."""
    if request.param == "orm":
        if connection.vendor != "postgresql":
            pytest.skip("the ORM path is this database's only path (run as 'statements')")
        force_portable(monkeypatch)
    return str(request.param)


def _claim_order(queue: str = "default", max_jobs: int = 32) -> list[uuid.UUID]:
    return [c.job_id for c in lease(queue=queue, max_jobs=max_jobs)]


# --- Priority --------------------------------------------------------------------------------------


def test_claims_take_priority_first_then_due_time_then_sequence():
    late_low = enqueue(due_time=T0 - timedelta(seconds=1), priority=-5)
    normal_1 = enqueue(due_time=T0 - timedelta(seconds=2))
    normal_0 = enqueue(due_time=T0 - timedelta(seconds=3))
    normal_0b = enqueue(due_time=T0 - timedelta(seconds=3))
    urgent = enqueue(priority=100)
    future_urgent = enqueue(priority=100, due_time=T0 + timedelta(hours=1))
    assert _claim_order() == [urgent, normal_0, normal_0b, normal_1, late_low]
    assert JobRecord.objects.get(job_id=future_urgent).state == JobState.SCHEDULED


def test_a_claim_batch_is_filled_across_priorities_without_skipping_any():
    ids = {p: [enqueue(priority=p) for _ in range(3)] for p in (3, 0, -3)}
    first = _claim_order(max_jobs=4)
    assert first == [*ids[3], ids[0][0]]
    assert _claim_order(max_jobs=10) == [*ids[0][1:], *ids[-3]]


def test_queues_stay_queue_major_whatever_the_priority():
    low_a = enqueue(queue="a", priority=-100)
    high_b = enqueue(queue="b", priority=100)
    claimed = store.claim(worker_id="w", queues=["a", "b"], max_jobs=2, lease_duration=LEASE, now=T0)
    assert [c.job_id for c in claimed] == [low_a, high_b]


@pytest.mark.parametrize("priority", [101, -101, 1.5, True, "1"])
def test_a_bad_priority_is_refused_before_anything_is_written(priority: Any):
    with pytest.raises((TypeError, ValueError), match="priority"):
        new_job(priority=priority)
    with pytest.raises((TypeError, ValueError), match="priority"):
        jobs.echo.using(priority=priority)
    assert not JobRecord.objects.exists()


def test_job_and_using_set_the_priority():
    receipt = jobs.echo.using(priority=-7).enqueue()
    assert JobRecord.objects.get(job_id=receipt.job_id).priority == -7
    assert JobRecord.objects.get(job_id=jobs.echo.enqueue().job_id).priority == 0


# --- Unique jobs -----------------------------------------------------------------------------------


@pytest.mark.usefixtures("enqueue_path")
def test_a_unique_job_is_a_duplicate_of_the_live_one_with_the_same_arguments():
    first = jobs.echo.using(unique=Unique()).enqueue("o-1", amount=5)
    again = jobs.echo.using(unique=Unique()).enqueue("o-1", amount=5)
    other = jobs.echo.using(unique=Unique()).enqueue("o-2", amount=5)
    assert first.enqueue_result is EnqueueResult.OK
    assert (again.enqueue_result, again.job_id) == (EnqueueResult.DUPLICATE, first.job_id)
    assert again.duplicate
    assert other.enqueue_result is EnqueueResult.OK
    assert JobRecord.objects.count() == 2


@pytest.mark.usefixtures("enqueue_path")
def test_keys_choose_the_arguments_that_make_the_identity():
    unique = Unique(keys=["args"])
    first = jobs.echo.using(unique=unique).enqueue("o-1", amount=5)
    same_args = jobs.echo.using(unique=unique).enqueue("o-1", amount=9)
    assert (same_args.enqueue_result, same_args.job_id) == (EnqueueResult.DUPLICATE, first.job_id)


@pytest.mark.usefixtures("enqueue_path")
def test_defaults_count_toward_the_identity():
    unique = Unique(keys=["fail_until"])
    first = jobs.flaky.using(unique=unique).enqueue(1)
    second = jobs.flaky.using(unique=unique).enqueue(fail_until=1)
    assert second.job_id == first.job_id


@pytest.mark.usefixtures("enqueue_path")
def test_the_queue_is_not_part_of_the_identity():
    first = jobs.echo.using(unique=Unique(), queue="a").enqueue(1)
    assert jobs.echo.using(unique=Unique(), queue="b").enqueue(1).job_id == first.job_id


@pytest.mark.usefixtures("enqueue_path")
def test_a_finished_job_no_longer_conflicts_by_default_but_does_when_its_state_is_named():
    first = jobs.echo.using(unique=Unique()).enqueue(1)
    lease(now=timezone.now())
    report(first.job_id, now=timezone.now())
    after = jobs.echo.using(unique=Unique()).enqueue(1)
    assert (after.enqueue_result, after.job_id != first.job_id) == (EnqueueResult.OK, True)
    ever = Unique(states=[JobState.SUCCEEDED, *JobState.__members__.values()])
    assert jobs.echo.using(unique=ever).enqueue(1).job_id == first.job_id


@pytest.mark.usefixtures("enqueue_path")
def test_only_jobs_enqueued_within_the_period_conflict():
    old = enqueue(now=T0, unique=UniqueKey(key="k" * 64, period=timedelta(minutes=5)))
    within = new_job(unique=UniqueKey(key="k" * 64, period=timedelta(minutes=5)))
    [entry] = store.enqueue_batch([within], now=T0 + timedelta(minutes=5))
    assert (entry.result, entry.job_id) == (EnqueueResult.DUPLICATE, old)
    later = new_job(unique=UniqueKey(key="k" * 64, period=timedelta(minutes=5)))
    [entry] = store.enqueue_batch([later], now=T0 + timedelta(minutes=5, microseconds=1))
    assert (entry.result, entry.job_id) == (EnqueueResult.OK, later.job_id)


@pytest.mark.usefixtures("enqueue_path")
def test_within_a_batch_a_later_member_is_a_duplicate_of_the_first():
    from backwave_django import enqueue_many

    receipts = enqueue_many([jobs.echo.using(unique=Unique()).prepare(1) for _ in range(3)])
    assert [r.enqueue_result for r in receipts] == [EnqueueResult.OK, *[EnqueueResult.DUPLICATE] * 2]
    assert len({r.job_id for r in receipts}) == 1
    assert JobRecord.objects.count() == 1


@pytest.mark.parametrize(
    ("make", "error", "message"),
    [
        (lambda: Unique(keys=["nope"]), None, None),
        (lambda: Unique(period=timedelta(0)), ValueError, "period"),
        (lambda: Unique(period=timedelta(seconds=-1)), ValueError, "period"),
        (lambda: Unique(period=5), TypeError, "period"),  # type: ignore[arg-type]
        (lambda: Unique(keys="args"), TypeError, "keys"),
        (lambda: Unique(states=[99]), ValueError, "unknown state"),  # type: ignore[list-item]
        (lambda: Unique(states=[]), ValueError, "at least one"),
    ],
)
def test_bad_unique_options_are_refused(make: Any, error: Any, message: Any):
    if error is not None:
        with pytest.raises(error, match=message):
            make()
        return
    with pytest.raises(
        ValueError, match=r"Unique\(keys=...\) names 'nope', which job 'test.echo' does not take"
    ):
        jobs.echo.using(unique=make())
    assert not JobRecord.objects.exists()


def _mixed_batch(existing: uuid.UUID, run: str) -> list[Any]:
    """A batch with every way a job is judged: unique and plain, a key repeated in the batch, a
    key held by a stored job, a stored id, an id repeated in the batch. (``run`` names the keys
    that the batch stores, so that a second run meets only the stored job's key.)"""
    plain, unique_a = uuid.uuid4(), uuid.uuid4()
    key = UniqueKey(key=f"batch-key-{run}")
    return [
        new_job(job_id=unique_a, unique=key),
        new_job(job_id=plain),
        new_job(unique=key),  # DUPLICATE of unique_a
        new_job(job_id=existing, unique=UniqueKey(key=f"other-key-{run}")),  # DUPLICATE: the id is stored
        new_job(unique=UniqueKey(key="held-key")),  # DUPLICATE of held
        new_job(job_id=plain),  # DUPLICATE: the id came earlier
        new_job(unique=UniqueKey(key=f"other-key-{run}")),  # OK: the stored id's key was not stored with it
        new_job(unique=UniqueKey(key="held-key", period=timedelta(microseconds=1))),  # DUPLICATE of held too
    ]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("in_transaction", [False, True], ids=["own-transaction", "callers-transaction"])
def test_both_paths_judge_and_store_a_mixed_unique_batch_alike(
    monkeypatch: pytest.MonkeyPatch, in_transaction: bool
) -> None:
    held = enqueue(unique=UniqueKey(key="held-key"))
    existing = enqueue()

    def run(name: str) -> tuple[list[Any], list[Any]]:
        batch = _mixed_batch(existing, name)
        if in_transaction:
            with transaction.atomic():
                entries = store.enqueue_batch(batch, now=T0)
        else:
            entries = store.enqueue_batch(batch, now=T0)
        stands_for: dict[uuid.UUID, Any] = {held: "held", existing: "existing"}
        for index, job in enumerate(batch):
            stands_for.setdefault(job.job_id, index)
        judged = [(e.result, stands_for[e.job_id]) for e in entries]
        stored = [
            (
                stands_for[job_id],
                key,
                list(JobTransition.objects.filter(job__job_id=job_id).values_list("state", "actor")),
            )
            for job_id, key in JobRecord.objects.filter(job_id__in=[j.job_id for j in batch])
            .exclude(job_id__in=[held, existing])
            .order_by("sequence")
            .values_list("job_id", "unique_key")
        ]
        return judged, stored

    ok, duplicate = EnqueueResult.OK, EnqueueResult.DUPLICATE
    expected = [
        (ok, 0),
        (ok, 1),
        (duplicate, 0),
        (duplicate, "existing"),
        (duplicate, "held"),
        (duplicate, 1),
        (ok, 6),
        (duplicate, "held"),
    ]
    fast = run("fast")
    assert fast[0] == expected
    assert [at for at, _, _ in fast[1]] == [0, 1, 6]
    assert [key for _, key, _ in fast[1]] == ["batch-key-fast", None, "other-key-fast"]
    assert all(log == [(int(JobState.SCHEDULED), "enqueue")] for _, _, log in fast[1])
    force_portable(monkeypatch)
    portable = run("orm")
    assert portable[0] == expected
    assert [(at, log) for at, _, log in portable[1]] == [(at, log) for at, _, log in fast[1]]
    assert [key for _, key, _ in portable[1]] == ["batch-key-orm", None, "other-key-orm"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("enqueue_path")
def test_a_batch_whose_only_unique_job_is_refused_stores_the_rest() -> None:
    refused = new_job(wire_name="w" * 500, unique=UniqueKey(key="never-looked-up"))
    plain = new_job()
    entries = store.enqueue_batch([refused, plain], now=T0)
    assert [e.result for e in entries] == [EnqueueResult.WIRE_NAME_TOO_LONG, EnqueueResult.OK]
    assert list(JobRecord.objects.values_list("job_id", "unique_key")) == [(plain.job_id, None)]


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("enqueue_path")
def test_concurrent_enqueuers_of_one_unique_job_store_exactly_one(vendor: str):
    results: list[Any] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)

    def enqueuer() -> None:
        try:
            barrier.wait(timeout=30)
            for _ in range(5):
                results.append(jobs.echo.using(unique=Unique()).enqueue("race"))
        except BaseException as exc:  # pragma: no cover (reported below)
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=enqueuer) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors, errors
    assert JobRecord.objects.filter(wire_name="test.echo").count() == 1
    stored = JobRecord.objects.get(wire_name="test.echo").job_id
    assert sum(r.enqueue_result is EnqueueResult.OK for r in results) == 1
    assert {r.job_id for r in results} == {stored}


# --- Receipts, results and async callers -----------------------------------------------------------


async def _close_thread_connections() -> None:
    """Close the connection of Django's thread for synchronous code (where the ORM calls ran)."""
    from asgiref.sync import sync_to_async
    from django.db import connections

    await sync_to_async(connections.close_all, thread_sensitive=True)()


def test_the_deprecated_result_name_still_answers_and_says_so():
    receipt = jobs.echo.enqueue()
    with pytest.warns(DeprecationWarning, match="enqueue_result"):
        assert receipt.result is EnqueueResult.OK


def test_get_job_reads_state_output_progress_and_tags():
    job_id = enqueue(tags=["vip", ("tenant", "acme")], priority=3)
    lease()
    assert get_job(job_id) is not None
    report(job_id, output={"sent": True}, progress={"done": 1, "total": 1, "note": "", "at": "x"})
    snapshot = get_job(job_id)
    assert snapshot is not None
    assert (snapshot.state, snapshot.output, snapshot.priority, snapshot.tags) == (
        JobState.SUCCEEDED,
        {"sent": True},
        3,
        ("vip", ("tenant", "acme")),
    )
    assert snapshot.progress["done"] == 1
    assert get_job(uuid.uuid4()) is None


def test_wait_for_returns_a_terminal_job_and_times_out_on_a_live_one():
    done = enqueue()
    lease()
    report(done)
    assert wait_for(done, timeout=1).state == JobState.SUCCEEDED
    waiting = enqueue()
    with pytest.raises(TimeoutError, match=f"job {waiting} is Scheduled"):
        wait_for(waiting, timeout=timedelta(milliseconds=50))
    with pytest.raises(ValueError, match="must not be negative, got -1"):
        wait_for(waiting, timeout=-1)


@pytest.mark.django_db(transaction=True)
def test_aenqueue_from_a_running_event_loop_and_await_the_job():
    async def scenario() -> tuple[Any, Any, Any]:
        receipt = await jobs.echo.aenqueue("from-async")
        options = await jobs.echo.using(queue="elsewhere").aenqueue(2)
        many = await aenqueue_many([jobs.echo.prepare(n) for n in range(3)])
        await _close_thread_connections()
        return receipt, options, many

    receipt, options, many = asyncio.run(scenario())
    assert receipt.enqueue_result is EnqueueResult.OK
    assert JobRecord.objects.get(job_id=options.job_id).queue == "elsewhere"
    assert len(many) == 3
    assert JobRecord.objects.count() == 5
    lease(now=timezone.now())
    report(receipt.job_id, now=timezone.now(), output="done")

    async def waiting() -> Any:
        try:
            return await await_job(receipt.job_id, timeout=5)
        finally:
            await _close_thread_connections()

    assert asyncio.run(waiting()).output == "done"


@pytest.mark.django_db(transaction=True)
def test_an_async_enqueue_inside_a_synchronous_atomic_block_rolls_back_with_it():
    from asgiref.sync import async_to_sync, sync_to_async

    def enqueue_and_fail() -> None:
        with transaction.atomic():
            jobs.echo.enqueue("inside")
            raise RuntimeError("roll back")

    async def scenario() -> None:
        with pytest.raises(RuntimeError):
            await sync_to_async(enqueue_and_fail)()
        await _close_thread_connections()

    async_to_sync(scenario)()
    assert not JobRecord.objects.exists()
