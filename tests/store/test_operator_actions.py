import uuid
from datetime import timedelta

import pytest

from backwave_django import CancelResult, Failure, JobState, RequeueResult, Unroutable, store
from backwave_django.models import JobDependency, OperatorAudit, QueueSettings

from ..conftest import T0, enqueue, history, lease, report, row

pytestmark = pytest.mark.django_db

LATER = T0 + timedelta(minutes=3)


def _audit():
    return list(OperatorAudit.objects.order_by("id").values_list("actor", "action", "target", "recorded_at"))


def test_cancelling_a_scheduled_job_ends_it_with_the_actor_as_cause():
    job_id = enqueue()
    assert store.cancel_job(job_id, actor="alice", now=LATER) is CancelResult.CANCELLED_IMMEDIATELY
    record = row(job_id)
    assert (record.state, record.terminal_cause, record.terminal_at) == (JobState.CANCELLED, "alice", LATER)
    assert history(job_id)[-1] == (1, "CANCELLED", 0, "alice")
    assert _audit() == [("alice", "cancel", str(job_id), LATER)]


def test_cancelling_an_awaiting_job_keeps_its_latch_and_edges():
    parent = enqueue(queue="p")
    child = enqueue(parents=[parent])
    assert store.cancel_job(child, actor="bob", now=T0) is CancelResult.CANCELLED_IMMEDIATELY
    record = row(child)
    assert (record.state, record.parents_remaining) == (JobState.CANCELLED, 1)
    assert JobDependency.objects.count() == 1
    lease(queue="p")
    report(parent)  # resolution skips the already-terminal child
    assert row(child).state == JobState.CANCELLED


def test_cancelling_a_leased_job_only_raises_the_flag_each_time_audited():
    job_id = enqueue()
    lease()
    for _ in range(2):
        assert store.cancel_job(job_id, actor="alice", now=T0) is CancelResult.CANCELLATION_REQUESTED
    record = row(job_id)
    assert (record.state, record.cancel_requested) == (JobState.LEASED, True)
    assert len(history(job_id)) == 2
    assert len(_audit()) == 2


def test_the_cancel_flag_survives_success_and_a_retry():
    job_id = enqueue()
    lease()
    store.cancel_job(job_id, actor="alice", now=T0)
    report(job_id, Failure(next_due_time=T0, error="x"))
    assert row(job_id).cancel_requested
    lease()
    report(job_id, attempt=2)
    assert row(job_id).cancel_requested


def test_terminal_and_unknown_jobs_are_not_cancellable_and_not_audited():
    job_id = enqueue()
    lease()
    report(job_id)
    assert store.cancel_job(job_id, actor="alice", now=T0) is CancelResult.NOT_CANCELLABLE
    assert store.cancel_job(uuid.uuid4(), actor="alice", now=T0) is CancelResult.NOT_CANCELLABLE
    assert _audit() == []


@pytest.mark.parametrize("outcome", [Failure(next_due_time=None, error="boom"), Unroutable(reason="nope")])
def test_requeue_gives_a_failed_job_a_fresh_start(outcome):
    job_id = enqueue(tags=["vip"], due_time=T0 - timedelta(hours=1))
    lease()
    store.cancel_job(job_id, actor="alice", now=T0)
    report(job_id, outcome)
    assert store.requeue(job_id, actor="ops", now=LATER) is RequeueResult.REQUEUED
    record = row(job_id)
    assert (record.state, record.attempt, record.due_time) == (JobState.SCHEDULED, 0, LATER)
    assert (record.terminal_at, record.terminal_cause, record.cancel_requested) == (None, None, False)
    assert (record.lease_owner, record.lease_expiry) == (None, None)
    assert history(job_id)[-1] == (3, "SCHEDULED", 0, "ops")
    assert _audit()[-1] == ("ops", "requeue", str(job_id), LATER)
    [claimed] = lease(now=LATER)
    assert (claimed.attempt, claimed.tags) == (1, ("vip",))


def test_requeue_keeps_the_output():
    job_id = enqueue()
    lease()
    report(job_id, Unroutable(reason="x"), output="ignored")
    store.requeue(job_id, actor="ops", now=T0)
    assert row(job_id).output is None


def test_only_dead_lettered_or_quarantined_jobs_are_requeueable():
    scheduled, succeeded = enqueue(), enqueue(queue="s")
    lease(queue="s")
    report(succeeded)
    for job_id in (scheduled, succeeded, uuid.uuid4()):
        assert store.requeue(job_id, actor="ops", now=T0) is RequeueResult.NOT_REQUEUEABLE
    assert _audit() == []


def test_requeue_does_not_revive_cascade_cancelled_children():
    parent = enqueue(queue="p")
    child = enqueue(parents=[parent])
    lease(queue="p")
    report(parent, Failure(next_due_time=None, error="boom"))
    store.requeue(parent, actor="ops", now=T0)
    assert row(child).state == JobState.CANCELLED


def test_pause_resume_and_limits_always_audit_and_keep_each_other():
    store.pause_queue("billing", actor="ops", now=T0)
    store.pause_queue("billing", actor="ops", now=T0)
    store.set_concurrency_limit("billing", 5, actor="ops", now=T0)
    settings = QueueSettings.objects.get(queue="billing")
    assert (settings.paused, settings.concurrency_limit) == (True, 5)
    store.resume_queue("billing", actor="ops", now=T0)
    store.set_concurrency_limit("billing", None, actor="ops", now=T0)
    settings.refresh_from_db()
    assert (settings.paused, settings.concurrency_limit) == (False, None)
    assert [a[1] for a in _audit()] == [
        "pause_queue",
        "pause_queue",
        "set_concurrency_limit",
        "resume_queue",
        "set_concurrency_limit",
    ]
    assert {a[2] for a in _audit()} == {"billing"}


def test_resuming_an_unknown_queue_creates_its_settings_row():
    store.resume_queue("fresh", actor="ops", now=T0)
    assert QueueSettings.objects.filter(queue="fresh", paused=False).exists()


@pytest.mark.parametrize("limit", [-1, "3", True, 2.5])
def test_invalid_limits_are_refused(limit):
    with pytest.raises(ValueError, match="limit must be None or an int >= 0"):
        store.set_concurrency_limit("q", limit, actor="ops", now=T0)
    assert _audit() == []


def test_operator_actions_need_an_actor():
    with pytest.raises(ValueError, match="actor must be a non-empty string"):
        store.cancel_job(uuid.uuid4(), actor="", now=T0)
    with pytest.raises(ValueError, match="actor must be a non-empty string"):
        store.pause_queue("q", actor="", now=T0)
    with pytest.raises(TypeError, match=r"job_id must be a uuid\.UUID"):
        store.requeue("not-a-uuid", actor="ops", now=T0)  # type: ignore[arg-type]


def _spec(cron="0 * * * *"):
    from backwave_django import ScheduleSpec

    return ScheduleSpec(schedule_id="hourly", cron=cron, wire_name="report", payload={"args": [], "kwargs": {}})


def test_saving_and_removing_a_schedule_with_an_actor_is_audited_in_the_same_transaction():
    store.upsert_schedule(_spec(), now=T0, actor="alice")
    store.upsert_schedule(_spec("30 * * * *"), now=LATER, actor="bob")
    assert store.remove_schedule("hourly", actor="carol", now=LATER) is True
    assert store.remove_schedule("hourly", actor="carol", now=LATER) is False  # nothing left: not audited
    assert _audit() == [
        ("alice", "save_schedule", "hourly", T0),
        ("bob", "save_schedule", "hourly", LATER),
        ("carol", "remove_schedule", "hourly", LATER),
    ]


def test_an_invalid_schedule_is_neither_stored_nor_audited():
    with pytest.raises(ValueError, match="cron"):
        store.upsert_schedule(_spec("not a cron"), now=T0, actor="alice")
    assert _audit() == []


def test_settings_sync_and_code_without_an_actor_write_no_audit():
    store.upsert_schedule(_spec(), now=T0)
    assert store.remove_schedule("hourly") is True
    assert _audit() == []


def test_removing_with_an_actor_needs_an_instant():
    with pytest.raises(ValueError, match="now="):
        store.remove_schedule("hourly", actor="alice")


def test_operator_schedule_actions_take_the_clock_and_audit(monkeypatch):
    from backwave_django import clock, operator

    monkeypatch.setattr(clock, "now", lambda: LATER)
    operator.save_schedule(_spec(), actor="alice")
    assert operator.remove_schedule("hourly", actor="alice") is True
    assert _audit() == [("alice", "save_schedule", "hourly", LATER), ("alice", "remove_schedule", "hourly", LATER)]
