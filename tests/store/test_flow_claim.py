"""The flow claim (docs/store.md, "The flow claim"): limits per bucket, shared buckets, sliding
rate windows, several limits per job, held jobs left alone, overrides, undeclared limits, slots
freed by every way a lease ends, and fair dispatch across lanes."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from backwave_django import store
from backwave_django.conf import get_settings
from backwave_django.core.limits import CLOCK_MARGIN_SECONDS, LimitValues
from backwave_django.core.outcomes import Cancelled, Failure, OutcomeReport, Snoozed, Success
from backwave_django.core.states import JobState
from backwave_django.models import JobRecord, JobTransition, LimitLease, LimitSettings, LimitStart

from ..conftest import LEASE, T0, WORKER, enqueue, lease, report, row
from .flow_jobs import declare, enqueue_flow, override

pytestmark = pytest.mark.django_db

API = "api"


def keyed(bucket: str, name: str = API) -> tuple[tuple[str, str], ...]:
    return ((name, bucket),)


def claimed_ids(queue: str = "default", now: object = T0, max_jobs: int = 32) -> list[uuid.UUID]:
    return [c.job_id for c in lease(queue=queue, now=now, max_jobs=max_jobs)]  # type: ignore[arg-type]


def assert_untouched(job_id: uuid.UUID) -> None:
    """A held job: still Scheduled, no attempt spent, no transition beyond its enqueue."""
    record = row(job_id)
    assert record.state == JobState.SCHEDULED
    assert record.attempt == 0
    assert list(JobTransition.objects.filter(job__job_id=job_id).values_list("state", flat=True)) == [
        JobState.SCHEDULED
    ]


def test_concurrency_is_per_bucket_and_buckets_are_independent() -> None:
    declare(api=LimitValues(2, None, 1.0))
    a = [enqueue_flow(keys=keyed("a")) for _ in range(3)]
    b = [enqueue_flow(keys=keyed("b")) for _ in range(3)]
    got = set(claimed_ids())
    assert got == {a[0], a[1], b[0], b[1]}
    assert_untouched(a[2])
    assert_untouched(b[2])
    assert LimitLease.objects.count() == 4
    assert claimed_ids() == []


def test_a_whole_limit_bucket_is_shared_across_queues() -> None:
    declare(api=LimitValues(1, None, 1.0))
    first = enqueue_flow(keys=keyed(""), queue="q1")
    second = enqueue_flow(keys=keyed(""), queue="q2")
    assert claimed_ids("q1") == [first]
    assert claimed_ids("q2") == []
    assert report(first) is not None
    assert claimed_ids("q2") == [second]


def test_a_rate_window_slides_and_counts_started_at_after_now_minus_period() -> None:
    declare(api=LimitValues(None, 2, 10.0))
    jobs = [enqueue_flow(keys=keyed("a")) for _ in range(5)]
    assert claimed_ids(now=T0) == jobs[:2]
    for job in jobs[:2]:
        report(job, now=T0)
    just_before = T0 + timedelta(seconds=10) - timedelta(microseconds=1)
    assert claimed_ids(now=just_before) == []
    assert store.held_until(queues=["default"], now=just_before) == T0 + timedelta(seconds=10)
    assert claimed_ids(now=T0 + timedelta(seconds=10)) == jobs[2:4]
    # The first two starts count in no window any more, but are kept for the clocks' margin.
    assert LimitStart.objects.count() == 4


def test_old_starts_beyond_the_longest_period_and_the_clocks_margin_are_dropped() -> None:
    declare(api=LimitValues(None, 1, 5.0))
    jobs = [enqueue_flow(keys=keyed("a")) for _ in range(3)]
    kept_for = timedelta(seconds=5 + CLOCK_MARGIN_SECONDS)
    assert claimed_ids(now=T0) == jobs[:1]
    assert claimed_ids(now=T0 + timedelta(seconds=5)) == jobs[1:2]
    # At exactly the longest period plus the margin after the first start, it goes; the second stays.
    assert claimed_ids(now=T0 + kept_for) == jobs[2:3]
    assert sorted(LimitStart.objects.values_list("started_at", flat=True)) == [
        T0 + timedelta(seconds=5),
        T0 + kept_for,
    ]


def test_a_job_under_several_limits_is_claimed_only_when_every_one_admits_it() -> None:
    declare(api=LimitValues(1, None, 1.0), mail=LimitValues(5, None, 1.0))
    first = enqueue_flow(keys=(("api", "x"), ("mail", "y")))
    both = enqueue_flow(keys=(("api", "x"), ("mail", "y")))
    mail_only = enqueue_flow(keys=keyed("y", "mail"))
    assert set(claimed_ids()) == {first, mail_only}
    assert_untouched(both)
    assert LimitLease.objects.filter(name="mail").count() == 2
    report(first)
    assert claimed_ids() == [both]


def test_held_jobs_never_hold_back_other_buckets_or_plain_jobs() -> None:
    declare(api=LimitValues(1, None, 1.0))
    busy = [enqueue_flow(keys=keyed("busy"), priority=10) for _ in range(5)]
    plain = [enqueue() for _ in range(2)]
    other = enqueue_flow(keys=keyed("other"))
    got = claimed_ids()
    assert got[0] == busy[0]  # the highest priority first
    assert set(got[1:]) == {*plain, other}
    assert claimed_ids() == []
    for job in busy[1:]:
        assert_untouched(job)


def test_an_override_is_obeyed_at_the_next_claim() -> None:
    declare(api=LimitValues(1, None, 1.0))
    jobs = [enqueue_flow(keys=keyed("a")) for _ in range(5)]
    assert len(claimed_ids()) == 1
    override(API, concurrency=3)
    assert len(claimed_ids()) == 2
    declare(api=LimitValues(1, None, 1.0))  # a worker declaring again leaves the override alone
    assert LimitSettings.objects.get(name=API).overridden
    assert claimed_ids() == []
    assert_untouched(jobs[4])


def test_a_limit_nobody_declared_holds_its_jobs() -> None:
    held = enqueue_flow(keys=keyed("a", "nobody"))
    plain = enqueue()
    assert claimed_ids() == [plain]
    assert_untouched(held)
    declare(nobody=LimitValues(1, None, 1.0))
    assert claimed_ids() == [held]


def test_declare_limits_writes_the_declared_bounds() -> None:
    declare(api=LimitValues(2, 10, 5.0))
    declare(api=LimitValues(3, None, 1.0), now=T0 + timedelta(seconds=1))
    stored = LimitSettings.objects.get(name=API)
    assert (stored.declared_concurrency, stored.declared_rate, stored.declared_period) == (3, None, 1.0)
    assert stored.declared_at == T0 + timedelta(seconds=1)
    with pytest.raises(TypeError):
        store.declare_limits({"api": 3}, now=T0)  # type: ignore[dict-item]


ENDINGS = ["success", "retry", "dead-letter", "snooze", "cancelled", "release", "expiry"]


@pytest.mark.parametrize("ending", ENDINGS)
def test_every_way_a_lease_ends_frees_its_slot(ending: str) -> None:
    declare(api=LimitValues(1, None, 1.0))
    first = enqueue_flow(keys=keyed("a"), max_attempts=1 if ending == "dead-letter" else None)
    waiting = enqueue_flow(keys=keyed("a"))
    assert claimed_ids() == [first]
    assert claimed_ids() == []
    later = T0 + timedelta(hours=1)
    if ending == "release":
        assert store.release_leases(worker_id=WORKER, job_ids=[first], now=T0) == 1
    elif ending == "expiry":
        swept = store.sweep_expired_leases(now=T0 + LEASE, queues=["default"], retry=get_settings().retry)
        assert swept.disposed == 1
    else:
        outcome = {
            "success": Success(),
            "retry": Failure(next_due_time=later, error="boom"),
            "dead-letter": Failure(next_due_time=None, error="boom"),
            "snooze": Snoozed(next_due_time=later),
            "cancelled": Cancelled(cause="stopped"),
        }[ending]
        report(first, outcome)
    assert not LimitLease.objects.filter(job=row(first).sequence).exists()
    now = T0 + LEASE if ending == "expiry" else T0
    got = claimed_ids(now=now)
    # The slot is free: the waiting job is claimed (a released job, due again at once, comes first).
    assert got == ([first] if ending == "release" else [waiting])


def test_a_batch_of_outcomes_frees_only_its_flow_jobs_slots() -> None:
    declare(api=LimitValues(2, None, 1.0))
    flow = [enqueue_flow(keys=keyed("a")) for _ in range(2)]
    plain = enqueue()
    assert set(claimed_ids()) == {*flow, plain}
    store.report_outcomes(
        [OutcomeReport(job_id=j, worker_id=WORKER, attempt=1, outcome=Success()) for j in (flow[0], plain)],
        now=T0,
    )
    assert list(LimitLease.objects.values_list("job", flat=True)) == [row(flow[1]).sequence]


def test_partitions_take_turns_among_equal_priority() -> None:
    a = [enqueue_flow(partition="a", due_time=T0 - timedelta(seconds=10 - n)) for n in range(4)]
    b = [enqueue_flow(partition="b", due_time=T0) for _ in range(4)]
    plain = [enqueue(due_time=T0 - timedelta(seconds=20)) for _ in range(2)]
    got = claimed_ids(max_jobs=6)
    assert got == [plain[0], a[0], b[0], plain[1], a[1], b[1]]


def test_priority_comes_before_taking_turns() -> None:
    a = [enqueue_flow(partition="a") for _ in range(3)]
    urgent = enqueue_flow(partition="b", priority=5)
    b = enqueue_flow(partition="b")
    got = claimed_ids(max_jobs=3)
    assert got[0] == urgent
    assert set(got[1:]) == {a[0], b}


def test_a_backlog_in_one_partition_delays_another_by_one_batch_at_most() -> None:
    backlog = [enqueue_flow(partition="big") for _ in range(50)]
    late = enqueue_flow(partition="small", due_time=T0 + timedelta(seconds=1))
    now = T0 + timedelta(seconds=1)
    assert late in claimed_ids(now=now, max_jobs=2)
    assert row(backlog[-1]).state == JobState.SCHEDULED


def test_a_paused_flow_queue_yields_nothing() -> None:
    declare(api=LimitValues(1, None, 1.0))
    held = enqueue_flow(keys=keyed("a"))
    store.pause_queue("default", actor="op", now=T0)
    assert claimed_ids() == []
    assert_untouched(held)


def test_the_queue_concurrency_limit_still_bounds_a_flow_queue() -> None:
    store.set_concurrency_limit("default", 1, actor="op", now=T0)
    jobs = [enqueue_flow(partition="p") for _ in range(3)]
    assert claimed_ids() == jobs[:1]
    assert claimed_ids() == []


def test_claimed_flow_jobs_are_leased_like_any_other() -> None:
    declare(api=LimitValues(2, None, 1.0))
    job = enqueue_flow(keys=keyed("a"), tags=("red",))
    (claimed,) = lease()
    assert (claimed.job_id, claimed.attempt, claimed.lease_owner) == (job, 1, WORKER)
    assert claimed.tags == ("red",)
    record = row(job)
    assert (record.state, record.attempt, record.lease_owner) == (JobState.LEASED, 1, WORKER)
    assert JobTransition.objects.filter(job__job_id=job, state=JobState.LEASED).count() == 1
    assert JobRecord.objects.filter(state=JobState.LEASED).count() == 1
