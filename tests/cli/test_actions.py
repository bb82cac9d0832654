"""``backwave cancel``, ``requeue`` and ``retry-now``: results, exit statuses and audit rows."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from backwave_django import Failure, JobState
from backwave_django.models import OperatorAudit

from ..conftest import T0, enqueue, lease_one, report, row
from .conftest import ACTOR

pytestmark = pytest.mark.django_db(transaction=True)


def audit_rows():
    return list(OperatorAudit.objects.order_by("id").values_list("actor", "action", "target"))


def test_cancel_acts_on_each_job_and_exits_1_when_any_was_refused(cli):
    pending = enqueue(queue="q1")
    running = enqueue(queue="q2")
    lease_one(running)
    ended = enqueue(queue="q3")
    lease_one(ended)
    report(ended)
    missing = uuid.uuid4()

    done = cli("cancel", str(pending), "--json")
    assert done.returncode == 0
    assert done.json() == [
        {
            "job_id": str(pending),
            "wire_name": "send-invoice",
            "queue": "q1",
            "state": "cancelled",
            "result": "cancelled_immediately",
            "done": True,
        }
    ]

    mixed = cli("cancel", str(running), str(ended), str(missing))
    assert mixed.returncode == 1
    assert mixed.lines == [
        f"{running}  cancellation requested (running: its handler is told to stop) [Leased]",
        f"{ended}  not cancellable (already ended) [Succeeded]",
        f"{missing}  not found",
    ]
    assert row(running).cancel_requested
    assert row(ended).state == JobState.SUCCEEDED
    # One audit row per action that acted, with the OS user as actor; refusals are not audited.
    assert audit_rows() == [(ACTOR, "cancel", str(pending)), (ACTOR, "cancel", str(running))]


def test_requeue_and_retry_now_go_through_the_operator_audited(cli):
    dead = enqueue(queue="q1", max_attempts=1)
    lease_one(dead)
    report(dead, Failure(next_due_time=None, error="boom"))
    retrying = enqueue(queue="q2")
    lease_one(retrying)
    report(retrying, Failure(next_due_time=T0 + timedelta(days=3650), error="later"))
    fresh = enqueue(queue="q3")

    requeued = cli("requeue", str(dead), str(dead), "--json")
    assert requeued.json() == [
        {
            "job_id": str(dead),
            "wire_name": "send-invoice",
            "queue": "q1",
            "state": "scheduled",
            "result": "requeued",
            "done": True,
        }
    ]
    assert row(dead).attempt == 0

    retried = cli("retry-now", str(retrying))
    assert retried.returncode == 0
    assert retried.lines == [f"{retrying}  due now [Scheduled]"]
    assert row(retrying).due_time < T0 + timedelta(days=3650)

    refused = cli("requeue", str(fresh), "--json")
    assert [entry["result"] for entry in refused.json(status=1)] == ["not_requeueable"]
    not_retrying = cli("retry-now", str(fresh))
    assert not_retrying.returncode == 1
    assert "not waiting for a retry" in not_retrying.stdout

    assert audit_rows() == [(ACTOR, "requeue", str(dead)), (ACTOR, "retry_now", str(retrying))]


def test_a_job_id_that_is_not_a_uuid_is_a_usage_error_and_nothing_acts(cli):
    job = enqueue()
    bad = cli("cancel", str(job), "not-a-uuid")
    assert bad.returncode == 2
    assert bad.stdout == ""
    assert bad.stderr.strip() == (
        "backwave cancel: 'not-a-uuid' is not a job id: expected a UUID such as 3f2b8c1e-6a4d-4f0e-9b1a-2c7d5e8f9a01"
    )
    assert row(job).state == JobState.SCHEDULED
    assert audit_rows() == []
