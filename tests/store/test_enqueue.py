import uuid
from datetime import timedelta

import pytest
from django.db import transaction

from backwave_django import DependencyMode, EnqueueResult, Failure, JobState, Unroutable, store
from backwave_django.models import JobDependency, JobRecord, JobTag, JobTransition

from ..conftest import T0, enqueue, history, lease, new_job, report, row

pytestmark = pytest.mark.django_db


def _counts():
    return (
        JobRecord.objects.count(),
        JobTransition.objects.count(),
        JobDependency.objects.count(),
        JobTag.objects.count(),
    )


def _failed_parent():
    """A parent that has already Dead-Lettered."""
    parent = enqueue(queue="failing")
    lease(queue="failing")
    report(parent, Failure(next_due_time=None, error="boom"))
    return parent


def test_enqueue_inserts_a_scheduled_job_with_one_transition():
    job_id = enqueue(now=T0, due_time=T0 + timedelta(hours=1), queue="billing")
    record = row(job_id)
    assert record.state == JobState.SCHEDULED
    assert record.due_time == T0 + timedelta(hours=1)  # stored as given, never clamped
    assert record.enqueued_at == T0
    assert (record.attempt, record.lease_owner, record.terminal_at) == (0, None, None)
    assert history(job_id) == [(0, "SCHEDULED", 0, "enqueue")]


def test_duplicate_id_is_refused_and_the_original_is_untouched():
    job = new_job()
    assert store.enqueue(job, now=T0) is EnqueueResult.OK
    again = new_job(job_id=job.job_id, due_time=T0 + timedelta(days=1), wire_name="other")
    assert store.enqueue(again, now=T0) is EnqueueResult.DUPLICATE
    record = row(job.job_id)
    assert (record.wire_name, record.due_time) == ("send-invoice", T0)
    assert JobRecord.objects.count() == 1
    assert len(history(job.job_id)) == 1


def test_payload_exactly_at_the_limit_is_accepted_and_one_byte_more_is_refused():
    at_cap = "x" * (65_536 - 2)  # the JSON string's quotes count
    assert store.enqueue(new_job(payload=at_cap), now=T0) is EnqueueResult.OK
    before = _counts()
    assert store.enqueue(new_job(payload=at_cap + "x"), now=T0) is EnqueueResult.PAYLOAD_TOO_LARGE
    assert _counts() == before


def test_payload_size_counts_utf8_bytes(backwave_settings):
    backwave_settings(MAX_PAYLOAD_BYTES=10)
    assert store.enqueue(new_job(payload="éééé"), now=T0) is EnqueueResult.OK  # 8 + 2 bytes
    assert store.enqueue(new_job(payload="ééééé"), now=T0) is EnqueueResult.PAYLOAD_TOO_LARGE


def test_wire_name_limit_counts_characters():
    assert store.enqueue(new_job(wire_name="é" * 128), now=T0) is EnqueueResult.OK
    assert store.enqueue(new_job(wire_name="w" * 129), now=T0) is EnqueueResult.WIRE_NAME_TOO_LONG
    assert JobRecord.objects.count() == 1


def test_sixteen_parents_are_accepted_and_seventeen_refused():
    parents = [enqueue() for _ in range(17)]
    assert store.enqueue(new_job(parents=parents[:16]), now=T0) is EnqueueResult.OK
    before = _counts()
    assert store.enqueue(new_job(parents=parents), now=T0) is EnqueueResult.TOO_MANY_PARENTS
    assert _counts() == before


def test_duplicate_parent_ids_collapse_before_the_bound():
    parents = [enqueue() for _ in range(16)]
    child = enqueue(parents=parents + parents[:3])
    assert row(child).parents_remaining == 16
    assert JobDependency.objects.filter(child__job_id=child).count() == 16


def test_bounds_are_checked_before_duplicates_and_parents():
    existing = enqueue()
    big = "x" * 70_000
    assert store.enqueue(new_job(job_id=existing, payload=big), now=T0) is EnqueueResult.PAYLOAD_TOO_LARGE
    assert (
        store.enqueue(new_job(job_id=existing, wire_name="w" * 200), now=T0)
        is EnqueueResult.WIRE_NAME_TOO_LONG
    )
    many = [uuid.uuid4() for _ in range(17)]
    assert store.enqueue(new_job(job_id=existing, parents=many), now=T0) is EnqueueResult.TOO_MANY_PARENTS


def test_duplicate_wins_over_unknown_parent():
    existing = enqueue()
    result = store.enqueue(new_job(job_id=existing, parents=[uuid.uuid4()]), now=T0)
    assert result is EnqueueResult.DUPLICATE


def test_unknown_parent_is_refused_and_nothing_is_stored():
    known = enqueue()
    before = _counts()
    result = store.enqueue(new_job(parents=[known, uuid.uuid4()], tags=["x"]), now=T0)
    assert result is EnqueueResult.UNKNOWN_PARENT
    assert _counts() == before


def test_live_parents_make_the_job_await_them():
    a, b = enqueue(), enqueue()
    child = enqueue(parents=[a, b])
    record = row(child)
    assert record.state == JobState.AWAITING_PARENT
    assert record.parents_remaining == 2
    assert history(child) == [(0, "AWAITING_PARENT", 0, "enqueue")]
    edges = set(JobDependency.objects.values_list("parent__job_id", "child__job_id"))
    assert edges == {(a, child), (b, child)}


def test_already_succeeded_parents_count_as_satisfied():
    parent = enqueue()
    lease()
    report(parent)
    child = enqueue(parents=[parent], due_time=T0 - timedelta(hours=1), now=T0 + timedelta(minutes=5))
    record = row(child)
    assert record.state == JobState.SCHEDULED
    assert record.due_time == T0 - timedelta(hours=1)  # as given: clamping only happens at release
    assert not JobDependency.objects.exists()


def test_on_success_child_of_a_failed_parent_is_inserted_cancelled():
    parent = _failed_parent()
    live = enqueue(queue="other")
    child = enqueue(parents=[live, parent], now=T0 + timedelta(seconds=7))
    record = row(child)
    assert record.state == JobState.CANCELLED
    assert record.terminal_cause == "parent-failure:DeadLettered"
    assert record.terminal_at == T0 + timedelta(seconds=7)
    assert history(child) == [(0, "CANCELLED", 0, "enqueue")]
    # Edges to the still-live parents are written even so; resolution skips them (docs/store.md).
    assert JobDependency.objects.filter(child__job_id=child).count() == 1
    lease(queue="other")
    report(live)
    assert row(child).state == JobState.CANCELLED


def test_the_last_failed_parent_in_declared_order_names_the_cause():
    dead = _failed_parent()
    quarantined = enqueue(queue="q2")
    lease(queue="q2")
    report(quarantined, Unroutable(reason="nope"))
    child = enqueue(parents=[dead, quarantined])
    assert row(child).terminal_cause == "parent-failure:Quarantined"
    child2 = enqueue(parents=[quarantined, dead])
    assert row(child2).terminal_cause == "parent-failure:DeadLettered"


def test_on_any_terminal_child_of_a_failed_parent_is_scheduled():
    parent = _failed_parent()
    child = enqueue(parents=[parent], mode=DependencyMode.ON_ANY_TERMINAL)
    assert row(child).state == JobState.SCHEDULED


def test_tags_are_stored_as_a_set():
    job_id = enqueue(tags=["vip", ("tenant", "acme"), "vip", ("tenant", "beta")])
    assert set(JobTag.objects.filter(job__job_id=job_id).values_list("key", "value")) == {
        ("", "vip"),
        ("tenant", "acme"),
        ("tenant", "beta"),
    }


def test_enqueue_inside_a_rolled_back_transaction_never_existed():
    job = new_job(tags=["x"])

    class Rollback(Exception):
        pass

    with pytest.raises(Rollback), transaction.atomic():
        assert store.enqueue(job, now=T0) is EnqueueResult.OK
        assert JobRecord.objects.filter(job_id=job.job_id).exists()
        raise Rollback
    assert _counts() == (0, 0, 0, 0)
    assert lease() == []


def test_duplicate_inside_the_callers_transaction_leaves_it_usable():
    existing = enqueue()
    with transaction.atomic():
        assert store.enqueue(new_job(job_id=existing), now=T0) is EnqueueResult.DUPLICATE
        fresh = enqueue()
    assert row(fresh).state == JobState.SCHEDULED


def test_malformed_calls_raise_naming_the_argument():
    from datetime import datetime

    with pytest.raises(ValueError, match="now must be timezone-aware"):
        store.enqueue(new_job(), now=datetime(2026, 1, 1))
    with pytest.raises(TypeError, match="new_job must be a NewJob"):
        store.enqueue({"job_id": uuid.uuid4()}, now=T0)  # type: ignore[arg-type]
    assert JobRecord.objects.count() == 0


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_due_enqueue_sends_a_hint_on_commit_only():
    import psycopg
    from django.db import connections

    from backwave_django.database import listen_database

    params = connections[listen_database()].get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    with psycopg.connect(**params, autocommit=True) as listener:
        listener.execute(f"LISTEN {store.HINT_CHANNEL}")
        enqueue(queue="billing")
        enqueue(queue="later", due_time=T0 + timedelta(hours=1))
        with pytest.raises(RuntimeError), transaction.atomic():
            enqueue(queue="rolled-back")
            raise RuntimeError
        received = [store.read_hint(n.payload) for n in listener.notifies(timeout=0.5)]
    # The queue, and the earliest due time of its jobs (a worker reads the queue from there).
    assert [queue for queue, _ in received] == ["billing"]
    due = received[0][1]
    assert due is not None
    assert T0 - timedelta(milliseconds=2) < due <= T0
