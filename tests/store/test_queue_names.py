"""Queues are names of real queues: the operator refuses a queue nothing uses unless asked to
create it, refuses a name that breaks the queue-name rule, and removes a settings row only from
a queue that holds no jobs (``operator.py``, ``monitor/queues.py``, ``store/actions.py``)."""

from __future__ import annotations

import pytest

from backwave_django import RemoveQueueResult, ScheduleSpec, job, monitor, operator, store
from backwave_django.models import OperatorAudit, QueueSettings

from ..conftest import T0, enqueue, lease, report

pytestmark = pytest.mark.django_db


def _audit() -> list[tuple[str, str, str]]:
    return list(OperatorAudit.objects.order_by("id").values_list("actor", "action", "target"))


@pytest.mark.parametrize(
    "change",
    [
        lambda queue, **kw: operator.pause_queue(queue, actor="ops", **kw),
        lambda queue, **kw: operator.resume_queue(queue, actor="ops", **kw),
        lambda queue, **kw: operator.set_concurrency_limit(queue, 3, actor="ops", **kw),
    ],
    ids=["pause", "resume", "limit"],
)
def test_a_queue_nothing_uses_is_refused_with_a_suggestion_and_nothing_changes(change):
    # "billing" is a declared job's queue (tests/jobsapp); "biling" is a typo of it.
    with pytest.raises(operator.UnknownQueueError) as refused:
        change("biling")
    assert (
        str(refused.value)
        == "no declared job, schedule or stored job uses queue 'biling'; did you mean 'billing'?"
    )
    assert refused.value.suggestions == ["billing"]
    assert not QueueSettings.objects.exists()
    assert _audit() == []
    change("biling", create=True)
    assert list(QueueSettings.objects.values_list("queue", flat=True)) == ["biling"]
    assert len(_audit()) == 1


def test_a_queue_far_from_every_name_in_use_gets_no_suggestion():
    with pytest.raises(
        operator.UnknownQueueError, match=r"^no declared job, schedule or stored job uses queue 'zz9'$"
    ):
        operator.pause_queue("zz9", actor="ops")


@pytest.mark.parametrize("queue", ["bad queue!", "mail,billing", "a=6", "\tmail"])
def test_a_name_that_breaks_the_rule_is_refused_even_with_create(queue):
    with pytest.raises(ValueError, match="is not a valid queue name: a queue name is 1 to 128 characters"):
        operator.pause_queue(queue, actor="ops", create=True)
    with pytest.raises(ValueError, match="is not a valid queue name"):
        operator.remove_queue(queue, actor="ops")
    with pytest.raises(ValueError, match="is not a valid queue name"):
        store.pause_queue(queue, actor="ops", now=T0)
    assert not QueueSettings.objects.exists()
    assert _audit() == []


@pytest.mark.parametrize("queue", ["bad queue!", "mail,billing", "a=6"])
def test_a_name_that_breaks_the_rule_cannot_be_enqueued_or_declared(queue):
    with pytest.raises(ValueError, match="is not a valid queue name"):
        enqueue(queue=queue)
    with pytest.raises(ValueError, match="is not a valid queue name"):
        job("test.bad-queue", queue=queue)
    with pytest.raises(ValueError, match="is not a valid queue name"):
        ScheduleSpec(schedule_id="s", cron="* * * * *", wire_name="w", payload={}, queue=queue)


def test_stored_jobs_schedules_and_settings_each_make_a_queue_real(backwave_settings):
    enqueue(queue="stored-only")
    lease(queue="stored-only")  # any state counts, a Leased or a finished job alike
    store.upsert_schedule(
        ScheduleSpec(
            schedule_id="nightly", cron="0 2 * * *", wire_name="w", payload={}, queue="from-schedule"
        ),
        now=T0,
    )
    backwave_settings(QUEUES={"from-settings": {"concurrency_limit": 2}})
    for queue in ("stored-only", "from-schedule", "from-settings", "billing"):
        assert monitor.is_queue_in_use(queue), queue
        operator.pause_queue(queue, actor="ops")
    use = monitor.queue_use("from-schedule")
    assert (use.schedules, use.wire_names, use.in_settings, use.has_jobs) == (("nightly",), (), False, False)
    assert "billing.charge-card" in monitor.queue_use("billing").wire_names
    assert not monitor.is_queue_in_use("nowhere")


def test_a_settings_row_alone_does_not_make_a_queue_real():
    operator.pause_queue("typo", actor="ops", create=True)
    with pytest.raises(operator.UnknownQueueError):
        operator.resume_queue("typo", actor="ops")
    assert QueueSettings.objects.get(queue="typo").paused


def test_removing_the_settings_of_a_queue_that_holds_no_jobs_is_audited():
    operator.pause_queue("typo", actor="ops", create=True)
    operator.set_concurrency_limit("typo", 0, actor="ops", create=True)
    assert operator.remove_queue("typo", actor="alice") is RemoveQueueResult.REMOVED
    assert not QueueSettings.objects.exists()
    assert _audit()[-1] == ("alice", "remove_queue", "typo")
    # Again: nothing to remove, nothing audited.
    assert operator.remove_queue("typo", actor="alice") is RemoveQueueResult.NO_SETTINGS
    assert len(_audit()) == 3


def test_a_queue_that_holds_jobs_keeps_its_settings_whatever_their_state():
    job_id = enqueue(queue="mail")
    operator.pause_queue("mail", actor="ops")
    assert operator.remove_queue("mail", actor="alice") is RemoveQueueResult.HOLDS_JOBS
    store.resume_queue("mail", actor="ops", now=T0)
    lease(queue="mail")
    report(job_id)  # Succeeded: still a job of the queue
    assert store.remove_queue_settings("mail", actor="alice", now=T0) is RemoveQueueResult.HOLDS_JOBS
    assert QueueSettings.objects.filter(queue="mail").exists()
    assert [action for _, action, _ in _audit()] == ["pause_queue", "resume_queue"]
