from datetime import timedelta

import pytest

from backwave_django import CancelResult, DependencyMode, Failure, JobState, RetryPolicy, Unroutable, store
from backwave_django.models import JobDependency

from ..conftest import LEASE, T0, enqueue, history, lease, report, row

pytestmark = pytest.mark.django_db

ANY = DependencyMode.ON_ANY_TERMINAL
LATER = T0 + timedelta(minutes=10)


def _finish(job_id, outcome=None, queue="p", now=LATER):
    """Lease ``job_id`` (unless an earlier claim already did) and report ``outcome`` for it."""
    if row(job_id).state != JobState.LEASED:
        lease(queue=queue, now=now)
    record = row(job_id)
    assert record.state == JobState.LEASED
    report(job_id, outcome, now=now, attempt=record.attempt)


def test_a_failed_chain_cancels_each_generation_with_its_parents_state():
    a = enqueue(queue="p")
    b = enqueue(parents=[a])
    c = enqueue(parents=[b])
    _finish(a, Failure(next_due_time=None, error="boom"))
    assert (row(b).state, row(b).terminal_cause) == (JobState.CANCELLED, "parent-failure:DeadLettered")
    assert (row(c).state, row(c).terminal_cause) == (JobState.CANCELLED, "parent-failure:Cancelled")
    assert row(c).terminal_at == LATER
    assert history(b)[-1] == (1, "CANCELLED", 0, f"cascade:{a}")
    assert history(c)[-1] == (1, "CANCELLED", 0, f"cascade:{b}")
    assert row(b).parents_remaining == 0
    assert not JobDependency.objects.exists()


def test_the_last_successful_parent_releases_the_child_due_no_earlier_than_now():
    a, b = enqueue(queue="p"), enqueue(queue="p")
    child = enqueue(parents=[a, b], due_time=T0 - timedelta(days=1))
    _finish(a)
    record = row(child)
    assert (record.state, record.parents_remaining) == (JobState.AWAITING_PARENT, 1)
    assert len(history(child)) == 1  # a decrement logs nothing
    _finish(b, now=LATER + timedelta(seconds=1))
    record = row(child)
    assert (record.state, record.parents_remaining) == (JobState.SCHEDULED, 0)
    assert record.due_time == LATER + timedelta(seconds=1)
    assert history(child)[-1] == (1, "SCHEDULED", 0, f"cascade:{b}")


def test_a_release_keeps_a_due_time_in_the_future():
    parent = enqueue(queue="p")
    child = enqueue(parents=[parent], due_time=LATER + timedelta(hours=1))
    _finish(parent)
    assert row(child).due_time == LATER + timedelta(hours=1)


@pytest.mark.parametrize(
    ("outcome", "cause"),
    [
        (Failure(next_due_time=None, error="x"), "parent-failure:DeadLettered"),
        (Unroutable(reason="x"), "parent-failure:Quarantined"),
    ],
)
def test_on_success_children_are_cancelled_and_on_any_terminal_children_released(outcome, cause):
    parent = enqueue(queue="p")
    strict = enqueue(parents=[parent])
    lenient = enqueue(parents=[parent], mode=ANY)
    _finish(parent, outcome)
    assert (row(strict).state, row(strict).terminal_cause) == (JobState.CANCELLED, cause)
    assert row(lenient).state == JobState.SCHEDULED


def test_a_retry_does_not_resolve_the_latch():
    parent = enqueue(queue="p")
    child = enqueue(parents=[parent])
    _finish(parent, Failure(next_due_time=LATER, error="x"))
    assert row(child).state == JobState.AWAITING_PARENT


def test_a_child_of_two_failing_parents_is_cancelled_once_by_the_first():
    a, b = enqueue(queue="p"), enqueue(queue="p")
    child = enqueue(parents=[a, b])
    _finish(a, Failure(next_due_time=None, error="x"))
    _finish(b, Unroutable(reason="y"))
    assert row(child).terminal_cause == "parent-failure:DeadLettered"
    assert [h[1] for h in history(child)] == ["AWAITING_PARENT", "CANCELLED"]


def test_a_child_reached_twice_in_one_cascade_is_resolved_once():
    a = enqueue(queue="p")
    b = enqueue(parents=[a])
    c = enqueue(parents=[a, b])  # cancelled via a, then reached again via b in the same transaction
    _finish(a, Failure(next_due_time=None, error="x"))
    assert [h[1:] for h in history(c)] == [
        ("AWAITING_PARENT", 0, "enqueue"),
        ("CANCELLED", 0, f"cascade:{a}"),
    ]
    assert row(c).terminal_cause == "parent-failure:DeadLettered"


def test_a_diamond_releases_its_sink_once():
    a = enqueue(queue="p")
    b = enqueue(queue="p", parents=[a])
    c = enqueue(queue="p", parents=[a])
    d = enqueue(parents=[b, c], mode=ANY)
    _finish(a)
    _finish(b)
    assert row(d).state == JobState.AWAITING_PARENT
    _finish(c)
    assert [h[1] for h in history(d)] == ["AWAITING_PARENT", "SCHEDULED"]


def test_operator_cancel_of_a_pending_parent_cascades():
    parent = enqueue(queue="p", due_time=LATER)
    strict = enqueue(parents=[parent])
    lenient = enqueue(parents=[parent], mode=ANY)
    assert store.cancel_job(parent, actor="alice", now=T0) is CancelResult.CANCELLED_IMMEDIATELY
    assert row(strict).terminal_cause == "parent-failure:Cancelled"
    assert row(lenient).state == JobState.SCHEDULED


def test_cancel_of_a_running_parent_waits_for_its_outcome():
    parent = enqueue(queue="p")
    child = enqueue(parents=[parent])
    lease(queue="p")
    store.cancel_job(parent, actor="alice", now=T0)
    assert row(child).state == JobState.AWAITING_PARENT
    from backwave_django import Cancelled

    report(parent, Cancelled(cause="operator-cancel"))
    assert row(child).terminal_cause == "parent-failure:Cancelled"


def test_lease_expiry_at_the_ceiling_cascades():
    parent = enqueue(queue="p", max_attempts=1)
    child = enqueue(parents=[parent])
    lease(queue="p")
    store.expire_leases(now=T0 + LEASE, queues=["p"], retry=RetryPolicy())
    assert row(child).terminal_cause == "parent-failure:DeadLettered"


def test_a_fan_out_releases_every_child():
    parent = enqueue(queue="p")
    children = [enqueue(parents=[parent]) for _ in range(50)]
    _finish(parent)
    assert {row(c).state for c in children} == {JobState.SCHEDULED}
    assert len(lease(max_jobs=100, now=LATER)) == 32
