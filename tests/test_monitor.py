"""The console's read models: counts, health facts, the throughput series and the previews."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from backwave_django import (
    Cancelled,
    Failure,
    HistoryPolicy,
    JobState,
    RetryPolicy,
    Unroutable,
    monitor,
    store,
)
from backwave_django.models import RecurringSchedule, WorkerNode

from .conftest import LEASE, T0, enqueue, lease, lease_one, report

pytestmark = pytest.mark.django_db

OPERATOR = "op"


def _in_state(state: JobState, *, queue: str = "default", now: datetime = T0, **kw):
    """A job in ``state``, reached through the store as in production.

    Claiming takes every due job of the queue, so create Scheduled and Awaiting Parent jobs last.
    """
    job_id = enqueue(now=now, queue=queue, **kw)
    if state is JobState.SCHEDULED:
        return job_id
    if state is JobState.AWAITING_PARENT:
        child = enqueue(now=now, queue=queue, parents=(job_id,))
        return child
    lease_one(job_id, now=now)
    outcome = {
        JobState.LEASED: None,
        JobState.SUCCEEDED: "success",
        JobState.CANCELLED: Cancelled(cause="operator-cancel"),
        JobState.DEAD_LETTERED: Failure(next_due_time=None, error="boom"),
        JobState.QUARANTINED: Unroutable(reason="no handler"),
    }[state]
    if outcome is not None:
        report(job_id, None if outcome == "success" else outcome, now=now)
    return job_id


def test_queue_depths_count_every_state_including_awaiting_parent_with_zeros():
    for state in sorted(JobState, key=lambda s: s in (JobState.SCHEDULED, JobState.AWAITING_PARENT)):
        _in_state(state, queue="alpha")
    _in_state(JobState.DEAD_LETTERED, queue="beta")

    depths = {depth.queue: depth for depth in monitor.queue_depths()}

    # Awaiting Parent needs a parent: its Scheduled parent is counted too.
    assert depths["alpha"].counts == (2, 1, 1, 1, 1, 1, 1)
    assert depths["beta"].counts == (0, 0, 0, 0, 0, 1, 0)
    assert depths["beta"].count(JobState.DEAD_LETTERED) == 1
    assert monitor.state_totals(list(depths.values())) == (2, 1, 1, 1, 1, 2, 1)
    assert [depth.queue for depth in monitor.queue_depths()] == ["alpha", "beta"]


def test_queue_statuses_flag_paused_queues_and_queues_at_their_limit():
    _in_state(JobState.LEASED, queue="capped")
    _in_state(JobState.LEASED, queue="roomy")
    store.set_concurrency_limit("capped", 1, actor=OPERATOR, now=T0)
    store.set_concurrency_limit("roomy", 5, actor=OPERATOR, now=T0)
    store.set_concurrency_limit("blocked", 0, actor=OPERATOR, now=T0)
    store.pause_queue("held", actor=OPERATOR, now=T0)

    statuses = {s.queue: s for s in monitor.queue_statuses(monitor.queue_depths())}

    assert sorted(statuses) == ["blocked", "capped", "held", "roomy"]
    assert [q for q, s in statuses.items() if s.at_limit] == ["blocked", "capped"]
    assert [q for q, s in statuses.items() if s.paused] == ["held"]
    assert (statuses["roomy"].leased, statuses["roomy"].concurrency_limit) == (1, 5)


def test_queue_latency_is_the_age_of_the_oldest_due_unclaimed_job_per_queue_worst_first():
    enqueue(queue="slow", due_time=T0 - timedelta(minutes=5))
    enqueue(queue="slow", due_time=T0 - timedelta(minutes=1))
    enqueue(queue="fast", due_time=T0 - timedelta(seconds=10))
    enqueue(queue="later", due_time=T0 + timedelta(minutes=1))  # not due yet
    _in_state(JobState.LEASED, queue="busy", due_time=T0 - timedelta(hours=1))  # claimed already

    latency = monitor.queue_latency(now=T0)

    assert [(entry.queue, entry.age) for entry in latency] == [
        ("slow", timedelta(minutes=5)),
        ("fast", timedelta(seconds=10)),
    ]
    assert latency[0].oldest_due == T0 - timedelta(minutes=5)


def test_schedule_health_reports_unresolvable_schedules_and_skipped_ticks():
    def schedule(schedule_id, cron="0 0 2 * * *", time_zone=None, skipped=()):
        RecurringSchedule.objects.create(
            schedule_id=schedule_id,
            cron=cron,
            time_zone=time_zone,
            wire_name="send-invoice",
            payload={"args": [], "kwargs": {}},
            cursor=T0,
            skipped_ticks=list(skipped),
        )

    schedule("healthy")
    schedule("lost-zone", time_zone="Mars/Olympus")
    schedule("skipping", skipped=["2026-01-01T01:00:00Z", "2026-01-01T02:00:00Z"])

    health = monitor.schedule_health()

    assert health.total == 3
    assert [p.schedule_id for p in health.problems] == ["lost-zone", "skipping"]
    assert "Mars/Olympus" in (health.problems[0].error or "")
    assert (health.errored, health.skipped_ticks) == (1, 2)
    assert health.problems[1].last_skipped == "2026-01-01T02:00:00Z"


def test_a_worker_is_stale_once_it_missed_five_heartbeats(backwave_settings):
    backwave_settings(LEASE_DURATION=30)  # heartbeat 10 s: stale after 50 s
    stale_after = monitor.worker_stale_after()
    assert stale_after == timedelta(seconds=50)
    for name, seen in (
        ("fresh", T0),
        ("edge", T0 - stale_after),
        ("gone", T0 - stale_after - timedelta(seconds=1)),
    ):
        WorkerNode.objects.create(
            worker_id=name,
            hostname="h",
            pid=1,
            queues=["default"],
            concurrency=4,
            started_at=T0,
            last_seen_at=seen,
        )

    workers = monitor.worker_statuses(now=T0)

    assert [(w.worker_id, w.live) for w in workers] == [("fresh", True), ("edge", True), ("gone", False)]
    assert monitor.is_worker_live(T0 - stale_after, now=T0)
    assert not monitor.is_worker_live(T0 - stale_after - timedelta(microseconds=1), now=T0)


def _minute(offset: int) -> datetime:
    return T0 + timedelta(minutes=offset)


def test_throughput_buckets_succeeded_retried_failures_and_dead_letters_per_minute():
    now = _minute(59) + timedelta(seconds=30)
    # Minute 10: one success and one failure with a retry left (reported by the worker).
    ok = enqueue(now=_minute(10))
    lease_one(ok, now=_minute(10))
    report(ok, now=_minute(10) + timedelta(seconds=5))
    flaky = enqueue(now=_minute(10), queue="flaky", max_attempts=3)
    lease_one(flaky, now=_minute(10))
    report(
        flaky, Failure(next_due_time=_minute(20), error="try again"), now=_minute(10) + timedelta(seconds=59)
    )
    # Minute 20: the retry's lease expires with a retry left (a failed attempt too), and minute 30
    # the third attempt dead-letters.
    lease_one(flaky, now=_minute(20))
    store.expire_leases(
        now=_minute(21) + timedelta(seconds=1), queues=["flaky"], retry=RetryPolicy(max_attempts=3)
    )
    lease(queue="flaky", now=_minute(30))
    report(flaky, Failure(next_due_time=None, error="gave up"), now=_minute(30), attempt=3)
    # Not throughput: a requeue back to Scheduled (attempt reset to 0), and a success outside the hour.
    store.requeue(flaky, actor=OPERATOR, now=_minute(40))
    old = enqueue(now=_minute(-5), due_time=_minute(-5))
    lease_one(old, now=_minute(-5))
    report(old, now=_minute(-5))

    series = monitor.throughput(now=now)

    assert len(series.minutes) == 60
    assert series.minutes[0] == _minute(0)
    assert series.minutes[-1] == _minute(59)
    nonzero = {name: {i: n for i, n in enumerate(values) if n} for name, values in series.series.items()}
    assert nonzero == {"succeeded": {10: 1}, "failed": {10: 1, 21: 1}, "dead_lettered": {30: 1}}
    assert series.complete
    assert series.recording
    assert (series.total("succeeded"), series.total("failed"), series.total("dead_lettered")) == (1, 2, 1)
    assert series.peak == 1


def test_throughput_marks_minutes_beyond_the_scan_limit_as_not_counted():
    for offset in (10, 20, 30):
        job_id = enqueue(now=_minute(offset))
        lease_one(job_id, now=_minute(offset))
        report(job_id, now=_minute(offset))
    # The newest 3 ids are the last job's enqueue, lease and success (minute 30); the newest entry
    # left out is the second job's success (minute 20): minutes up to 20 may be incomplete.
    series = monitor.throughput(now=_minute(59), scan_limit=3)

    assert series.counted_from == _minute(21)
    assert series.series["succeeded"][:21] == [None] * 21
    assert series.series["succeeded"][21:] == [0] * 9 + [1] + [0] * 29
    assert not series.complete
    assert monitor.throughput(now=_minute(59), scan_limit=9).complete


def test_throughput_says_when_the_transition_log_is_not_recorded(backwave_settings):
    backwave_settings(HISTORY=HistoryPolicy.OFF)
    assert monitor.throughput(now=T0).recording is False


def test_throughput_refuses_a_naive_now_and_an_empty_window():
    with pytest.raises(ValueError, match="timezone-aware"):
        monitor.throughput(now=datetime(2026, 1, 1))
    with pytest.raises(ValueError, match="at least 1"):
        monitor.throughput(now=T0, minutes=0)


def test_queue_throughput_counts_each_queues_finished_attempts_as_the_chart_does():
    now = _minute(59) + timedelta(seconds=30)
    for queue, outcomes in (("billing", ["ok", "ok", "retry"]), ("emails", ["dead"])):
        for outcome in outcomes:
            job_id = enqueue(now=_minute(10), queue=queue, max_attempts=1 if outcome == "dead" else 3)
            lease_one(job_id, now=_minute(10))
            if outcome == "ok":
                report(job_id, now=_minute(10) + timedelta(seconds=30))
            else:
                retry_at = _minute(50) if outcome == "retry" else None
                report(job_id, Failure(next_due_time=retry_at, error="no"), now=_minute(10) + timedelta(seconds=30))
    old = enqueue(now=_minute(-5), due_time=_minute(-5), queue="billing")
    lease_one(old, now=_minute(-5))
    report(old, now=_minute(-5))  # before the hour: not counted

    done = monitor.queue_throughput(now=now)

    assert done.recording
    assert done.counted_from is None
    assert (done.minutes, set(done.by_queue)) == (60, {"billing", "emails"})
    billing, emails = done.get("billing"), done.get("emails")
    assert (billing.succeeded, billing.failed, billing.dead_lettered, billing.total) == (2, 1, 0, 3)
    assert (emails.succeeded, emails.failed, emails.dead_lettered) == (0, 0, 1)
    assert done.get("quiet").total == 0  # a queue with nothing finished
    # The same bounded scan as the chart: the newest entries only, the rest said to be uncounted.
    assert monitor.queue_throughput(now=now, scan_limit=3).counted_from is not None


def test_queue_throughput_reads_a_bounded_slice_of_the_log_in_three_queries():
    job_id = enqueue(now=_minute(10))
    lease_one(job_id, now=_minute(10))
    report(job_id, now=_minute(10) + timedelta(seconds=30))
    with CaptureQueriesContext(connection) as queries:
        monitor.queue_throughput(now=_minute(59))
    assert len(queries) <= 3


def test_running_by_worker_groups_leased_jobs_by_their_worker_lease_ending_first():
    jobs = [enqueue(queue=f"q{n}", due_time=T0 - timedelta(seconds=n)) for n in range(4)]
    for n, job_id in enumerate(jobs):
        lease_one(job_id, now=T0 - timedelta(seconds=n), worker="w-1" if n < 3 else "w-2")
    enqueue(queue="waiting")  # not running: not listed

    with CaptureQueriesContext(connection) as queries:
        running = monitor.running_by_worker(limit=2)

    assert len(queries) == 1
    assert set(running) == {"w-1", "w-2"}
    assert running["w-1"].count == 3
    assert [job.job_id for job in running["w-1"].jobs] == [jobs[2], jobs[1]]  # soonest expiry first
    assert [(job.job_id, job.queue) for job in running["w-2"].jobs] == [(jobs[3], "q3")]


def test_executing_lists_leased_jobs_with_owner_soonest_expiry_first():
    first = enqueue(queue="a")
    lease_one(first, now=T0, worker="w-1")
    second = enqueue(queue="b", due_time=T0 - timedelta(seconds=30))
    lease_one(second, now=T0 - timedelta(seconds=30), worker="w-2")

    rows = monitor.executing(now=T0)

    assert [(r.job_id, r.lease_owner, r.lease_left) for r in rows] == [
        (second, "w-2", LEASE - timedelta(seconds=30)),
        (first, "w-1", LEASE),
    ]


def test_needs_attention_merges_dead_lettered_and_quarantined_most_recent_first():
    dead = _in_state(JobState.DEAD_LETTERED, now=_minute(1))
    quarantined = _in_state(JobState.QUARANTINED, now=_minute(2))
    newest_dead = _in_state(JobState.DEAD_LETTERED, now=_minute(3))
    _in_state(JobState.SUCCEEDED, now=_minute(4))

    rows = monitor.needs_attention(limit=2)

    assert [(r.job_id, r.state) for r in rows] == [
        (newest_dead, JobState.DEAD_LETTERED),
        (quarantined, JobState.QUARANTINED),
    ]
    assert dead not in [r.job_id for r in monitor.needs_attention(limit=2)]
    assert rows[0].terminal_cause == "boom"


def test_the_overview_costs_the_same_few_queries_however_many_rows_and_queues():
    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            monitor.overview(now=_minute(5))
        return len(captured.captured_queries)

    _in_state(JobState.LEASED, queue="q0")
    few = queries()
    for i in range(6):
        for state in (JobState.LEASED, JobState.DEAD_LETTERED, JobState.QUARANTINED, JobState.SCHEDULED):
            _in_state(state, queue=f"q{i}")
        WorkerNode.objects.create(
            worker_id=f"w{i}", hostname="h", pid=i, queues=[], concurrency=1, started_at=T0, last_seen_at=T0
        )
    assert queries() == few == 10


def test_overview_requires_an_aware_now():
    with pytest.raises(ValueError, match="timezone-aware"):
        monitor.overview(now=datetime(2026, 1, 1))
    assert monitor.overview(now=datetime(2026, 1, 1, tzinfo=UTC)).total_jobs == 0
