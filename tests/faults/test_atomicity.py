"""Every store operation is all-or-nothing, proven with faults raised inside the database.

Each test sets up rows, snapshots every backwave table, arms a failpoint that raises part-way
through one operation (after some of its statements or rows were already written), runs the
operation and asserts it raised the failpoint's error and left the database exactly as before.
The operations run in real transactions (``transaction=True``), as a worker runs them.

On PostgreSQL this covers the fast paths (claim, enqueue and outcome CTEs, plus the cascade that
follows them); on SQLite and MariaDB the ORM paths.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.db import DatabaseError, connection

from backwave_django import (
    CatchUp,
    Failure,
    JobState,
    OutcomeReport,
    OutcomeResult,
    RetryPolicy,
    ScheduleSpec,
    Success,
    store,
)
from backwave_django.models import (
    JobDependency,
    JobRecord,
    JobTag,
    JobTransition,
    OperatorAudit,
    QueueSettings,
    RecurringSchedule,
)

from ..conftest import LEASE, T0, WORKER, enqueue, lease, new_job, report, row
from .conftest import FAILPOINT_MESSAGE, failpoint, snapshot

pytestmark = pytest.mark.django_db(transaction=True)

LATER = T0 + timedelta(minutes=10)
RETRY_NOW = RetryPolicy(max_attempts=2, backoff=[0])


def _seq(job_id: uuid.UUID) -> int:
    return int(row(job_id).sequence)


def _fails_and_changes_nothing(operation, *args, **kwargs):
    """Run ``operation``; it must raise the failpoint's error and leave every table as it was."""
    before = snapshot()
    with pytest.raises(DatabaseError, match=FAILPOINT_MESSAGE):
        operation(*args, **kwargs)
    assert snapshot() == before


# --- Claim ------------------------------------------------------------------------------------


def test_a_claim_that_fails_on_its_last_transition_leases_nothing():
    first, second, third = (enqueue(due_time=T0 + timedelta(seconds=i)) for i in range(3))
    # The third job's log entry is the last row written: its UPDATE and the others' are done.
    with failpoint(JobTransition, when=f"NEW.job_id = {_seq(third)}"):
        _fails_and_changes_nothing(lease, now=LATER)
    assert [row(j).state for j in (first, second, third)] == [JobState.SCHEDULED] * 3
    assert [c.job_id for c in lease(now=LATER)] == [first, second, third]  # and the claim works again


def test_a_claim_over_two_queues_that_fails_in_the_second_keeps_the_first_unleased():
    urgent = enqueue(queue="urgent")
    bulk = enqueue(queue="bulk")
    # On PostgreSQL each queue is its own statement: the first one has already leased `urgent`.
    with failpoint(JobRecord, "UPDATE", when=f"NEW.sequence = {_seq(bulk)}"):
        _fails_and_changes_nothing(
            store.claim, worker_id=WORKER, queues=["urgent", "bulk"], max_jobs=2, lease_duration=LEASE, now=T0
        )
    claimed = store.claim(
        worker_id=WORKER, queues=["urgent", "bulk"], max_jobs=2, lease_duration=LEASE, now=T0
    )
    assert [c.job_id for c in claimed] == [urgent, bulk]


def test_a_claim_of_a_concurrency_limited_queue_that_fails_keeps_its_slot_free():
    store.set_concurrency_limit("limited", 1, actor="ops", now=T0)
    job = enqueue(queue="limited")
    with failpoint(JobTransition, when=f"NEW.job_id = {_seq(job)}"):
        _fails_and_changes_nothing(lease, queue="limited", now=T0)
    assert [c.job_id for c in lease(queue="limited", now=T0)] == [job]


# --- Enqueue ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "what"),
    [
        (JobRecord, "the job row itself"),
        (JobDependency, "the dependency edge, after the job row"),
        (JobTag, "the second tag, after the row, the edge and the first tag"),
        (JobTransition, "the log entry, after everything else"),
    ],
)
def test_an_enqueue_with_parents_and_tags_is_all_or_nothing(model, what):
    parent = enqueue(queue="p")
    child = new_job(parents=(parent,), tags=("vip", ("tenant", "acme")))
    nth = 2 if model is JobTag else 1
    with failpoint(model, nth=nth):
        _fails_and_changes_nothing(store.enqueue, child, now=T0)
    assert store.enqueue(child, now=T0).name == "OK"
    assert row(child.job_id).state == JobState.AWAITING_PARENT


@pytest.mark.parametrize("model", [JobTag, JobTransition])
def test_an_enqueue_without_parents_is_all_or_nothing(model):
    # PostgreSQL's one-statement path: the job row is inserted before its tag and log rows.
    job = new_job(tags=("vip",))
    with failpoint(model):
        _fails_and_changes_nothing(store.enqueue, job, now=T0)
    assert not JobRecord.objects.exists()


@pytest.mark.parametrize("with_parents", [False, True], ids=["no-parents", "parents"])
def test_enqueue_many_that_fails_on_the_last_job_stores_none_of_the_batch(with_parents):
    parent = enqueue(queue="p")
    batch = [new_job(tags=(f"n{i}",), parents=(parent,) if with_parents else ()) for i in range(5)]
    # Fail on the last job's log entry: the earlier four are fully written by then.
    with failpoint(JobTransition, nth=5):
        _fails_and_changes_nothing(store.enqueue_many, batch, now=T0)
    assert JobRecord.objects.count() == 1


def test_a_batch_child_naming_an_earlier_batch_job_as_parent_is_rolled_back_with_it():
    parent = new_job()
    child = new_job(parents=(parent.job_id,))
    with failpoint(JobDependency):
        _fails_and_changes_nothing(store.enqueue_many, [parent, child], now=T0)


# --- Outcomes ---------------------------------------------------------------------------------


def _three_leased():
    jobs = [enqueue(due_time=T0 + timedelta(seconds=i)) for i in range(3)]
    assert len(lease(now=LATER)) == 3
    return jobs


def _reports(jobs):
    first, middle, last = jobs
    return [
        OutcomeReport(job_id=first, worker_id=WORKER, attempt=1, outcome=Success(), output={"n": 1}),
        OutcomeReport(
            job_id=middle,
            worker_id=WORKER,
            attempt=1,
            outcome=Failure(next_due_time=LATER + timedelta(minutes=1), error="boom"),
            failure_detail="RuntimeError: boom",
            added_tags=("retried",),
        ),
        OutcomeReport(
            job_id=last, worker_id=WORKER, attempt=1, outcome=Success(), output=[3], added_tags=("done",)
        ),
    ]


@pytest.mark.parametrize(
    ("model", "event"),
    [
        (JobRecord, "UPDATE"),
        (JobTransition, "INSERT"),
    ],
)
def test_a_failure_on_the_middle_report_of_a_batch_leaves_every_row_untouched(model, event):
    jobs = _three_leased()
    column = "sequence" if model is JobRecord else "job_id"
    with failpoint(model, event, when=f"NEW.{column} = {_seq(jobs[1])}"):
        _fails_and_changes_nothing(store.report_outcomes, _reports(jobs), now=LATER)
    assert store.report_outcomes(_reports(jobs), now=LATER) == [OutcomeResult.APPLIED] * 3


def test_a_failure_on_the_last_tag_of_a_batch_leaves_every_row_untouched():
    jobs = _three_leased()
    with failpoint(JobTag, when="NEW.value = 'done'"):
        _fails_and_changes_nothing(store.report_outcomes, _reports(jobs), now=LATER)


def test_a_failure_in_the_cascade_after_an_outcome_rolls_the_outcome_back():
    parent = enqueue(queue="p")
    child = enqueue(parents=[parent])
    grandchild = enqueue(parents=[child])
    lease(queue="p", now=T0)
    # The outcome itself is written first (on PostgreSQL by its own statement); the cascade
    # cancelling the grandchild comes last.
    with failpoint(JobTransition, when=f"NEW.job_id = {_seq(grandchild)}"):
        _fails_and_changes_nothing(report, parent, Failure(next_due_time=None, error="boom"), now=T0)
    assert row(parent).state == JobState.LEASED
    report(parent, Failure(next_due_time=None, error="boom"), now=T0)
    assert row(grandchild).terminal_cause == "parent-failure:Cancelled"


# --- Lease expiry -----------------------------------------------------------------------------


def test_a_lease_expiry_sweep_that_fails_part_way_disposes_of_nothing():
    parent = enqueue(queue="p", due_time=T0)
    retried = enqueue(queue="p", due_time=T0 + timedelta(seconds=1))
    child = enqueue(parents=[parent])
    assert len(lease(queue="p", now=T0 + timedelta(seconds=1))) == 2
    # Give `parent` its last attempt so the sweep dead-letters it and cancels its child.
    JobRecord.objects.filter(job_id=parent).update(attempt=row(parent).max_attempts)
    expired = T0 + timedelta(seconds=1) + LEASE
    with failpoint(JobTransition, when=f"NEW.job_id = {_seq(child)}"):
        _fails_and_changes_nothing(store.expire_leases, now=expired, queues=["p"], retry=RETRY_NOW)
    assert store.expire_leases(now=expired, queues=["p"], retry=RETRY_NOW) == 2
    assert [row(j).state for j in (parent, retried, child)] == [
        JobState.DEAD_LETTERED,
        JobState.SCHEDULED,
        JobState.CANCELLED,
    ]


# --- Schedules --------------------------------------------------------------------------------


def _schedule(schedule_id: str, **fields):
    spec = ScheduleSpec(
        schedule_id=schedule_id,
        cron="*/10 * * * * *",
        wire_name="test.echo",
        payload={"args": [], "kwargs": {}},
        **fields,
    )
    store.upsert_schedule(spec, now=T0)


def test_a_mint_that_fails_after_moving_the_cursor_mints_nothing_and_keeps_the_cursor():
    _schedule("every-10s", catch_up=CatchUp.COALESCE)
    # The cursor UPDATE and the instance INSERT have run when the log entry fails.
    with failpoint(JobTransition):
        _fails_and_changes_nothing(store.mint_due, now=T0 + timedelta(seconds=30))
    assert RecurringSchedule.objects.get().cursor == T0
    assert store.mint_due(now=T0 + timedelta(seconds=30)) >= 1


def test_each_schedule_s_mint_is_all_or_nothing_on_its_own():
    _schedule("a")
    _schedule("b")
    # Whichever schedule is applied second fails (the first one's instances are its nth rows).
    with failpoint(JobTransition, nth=4), pytest.raises(DatabaseError, match=FAILPOINT_MESSAGE):
        store.mint_due(now=T0 + timedelta(seconds=30))
    for schedule in RecurringSchedule.objects.all():
        minted = JobRecord.objects.filter(schedule_id=schedule.schedule_id)
        logged = JobTransition.objects.filter(job__schedule_id=schedule.schedule_id)
        # Either the decision was applied whole (cursor moved, instances and their log) or not at all.
        assert (schedule.cursor != T0) == minted.exists() == logged.exists()
        assert minted.count() == logged.count()
    assert JobRecord.objects.values("schedule_id").distinct().count() == 1


def test_a_trigger_that_fails_on_its_audit_row_mints_nothing():
    _schedule("manual")
    with failpoint(OperatorAudit):
        _fails_and_changes_nothing(store.trigger_schedule, "manual", actor="ops", now=T0)


# --- Operator actions -------------------------------------------------------------------------


def test_a_cascading_cancel_that_fails_on_its_audit_row_cancels_nothing():
    parent = enqueue(queue="p", due_time=LATER)
    child = enqueue(parents=[parent])
    grandchild = enqueue(parents=[child])
    # The audit row is the operation's last statement: the parent, child and grandchild are
    # already Cancelled and logged when it fails.
    with failpoint(OperatorAudit):
        _fails_and_changes_nothing(store.cancel_job, parent, actor="ops", now=T0)
    assert [row(j).state for j in (parent, child, grandchild)] == [
        JobState.SCHEDULED,
        JobState.AWAITING_PARENT,
        JobState.AWAITING_PARENT,
    ]


def test_a_cascading_cancel_that_fails_deep_in_the_cascade_cancels_nothing():
    parent = enqueue(queue="p", due_time=LATER)
    child = enqueue(parents=[parent])
    grandchild = enqueue(parents=[child])
    with failpoint(JobTransition, when=f"NEW.job_id = {_seq(grandchild)}"):
        _fails_and_changes_nothing(store.cancel_job, parent, actor="ops", now=T0)


def test_a_cancel_request_for_a_running_job_that_fails_raises_no_flag():
    job = enqueue()
    lease(now=T0)
    with failpoint(OperatorAudit):
        _fails_and_changes_nothing(store.cancel_job, job, actor="ops", now=T0)
    assert row(job).cancel_requested is False


def test_a_requeue_that_fails_on_its_audit_row_leaves_the_job_dead_lettered():
    job = enqueue()
    lease(now=T0)
    report(job, Failure(next_due_time=None, error="boom"), now=T0)
    with failpoint(OperatorAudit):
        _fails_and_changes_nothing(store.requeue, job, actor="ops", now=LATER)
    assert (row(job).state, row(job).attempt) == (JobState.DEAD_LETTERED, 1)


@pytest.mark.parametrize(
    "action",
    [
        lambda: store.pause_queue("q", actor="ops", now=T0),
        lambda: store.resume_queue("q", actor="ops", now=T0),
        lambda: store.set_concurrency_limit("q", 3, actor="ops", now=T0),
    ],
    ids=["pause", "resume", "limit"],
)
def test_a_queue_setting_that_fails_on_its_audit_row_is_not_applied(action):
    QueueSettings.objects.create(queue="q", paused=False, concurrency_limit=None)
    with failpoint(OperatorAudit):
        _fails_and_changes_nothing(action)


def test_failpoints_are_gone_after_the_test():
    """The harness itself: a failpoint is dropped on exit, whatever happened inside."""
    with pytest.raises(DatabaseError), failpoint(JobRecord):
        enqueue()
    enqueue()
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT count(*) FROM pg_trigger WHERE tgname LIKE %s", ["bw_failpoint%"])
        elif connection.vendor == "mysql":
            cursor.execute(
                "SELECT count(*) FROM information_schema.triggers WHERE trigger_name LIKE %s",
                ["bw_failpoint%"],
            )
        else:
            cursor.execute("SELECT count(*) FROM sqlite_master WHERE name LIKE %s", ["bw_failpoint%"])
        assert cursor.fetchone()[0] == 0
