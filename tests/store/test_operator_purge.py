"""``operator.purge``: the retention purge on demand (the CLI's ``purge``), its dry run
(``store.count_purgeable``) and its one audit row (``store.record_purge``)."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from backwave_django import (
    TerminalStateClass,
    WorkflowDefinition,
    WorkflowEnqueueResult,
    clock,
    operator,
    store,
)
from backwave_django.models import JobRecord, OperatorAudit

from ..conftest import T0, enqueue, lease_one, new_job, report

pytestmark = pytest.mark.django_db

OK_CLASS = TerminalStateClass.SUCCEEDED_OR_CANCELLED
MINUTE = timedelta(minutes=1)
LATER = T0 + timedelta(days=2)


def finish(job_id: uuid.UUID, now=T0) -> None:
    lease_one(job_id, now=now)
    report(job_id, now=now)


def test_the_dry_run_count_is_what_purging_deletes_workflows_as_units():
    early = new_job(queue="early")
    late = new_job(queue="late", parents=[early.job_id])
    definition = WorkflowDefinition(workflow_id=uuid.uuid4(), members=(early, late))
    assert store.enqueue_workflow(definition, now=T0) is WorkflowEnqueueResult.OK
    finish(early.job_id, now=T0 + MINUTE)
    finish(late.job_id, now=T0 + 10 * MINUTE)
    finish(enqueue(queue="standalone"), now=T0 + MINUTE)

    for cutoff, expected in ((T0, 0), (T0 + 5 * MINUTE, 1), (T0 + 10 * MINUTE, 2)):
        counted = store.count_purgeable(OK_CLASS, terminal_before=cutoff)
        assert counted == expected
        assert store.purge_terminal(OK_CLASS, terminal_before=cutoff) == counted
    assert not JobRecord.objects.exists()


def test_purge_runs_batches_until_done_with_the_settings_retention_and_audits_once(
    monkeypatch, backwave_settings
):
    backwave_settings(
        RETENTION={"SUCCEEDED_OR_CANCELLED": 3600, "DEAD_LETTERED_OR_QUARANTINED": None}, MAX_PURGE_BATCH=2
    )
    monkeypatch.setattr(clock, "now", lambda: LATER)
    for n in range(5):
        finish(enqueue(queue=f"q{n}"))
    recent = enqueue(queue="recent")
    finish(recent, now=LATER - MINUTE)

    dry = operator.purge(actor="alice", dry_run=True)
    assert (dry.dry_run, dry.jobs, dry.now) == (True, 5, LATER)
    assert dry.classes[0].terminal_before == LATER - timedelta(hours=1)
    assert (dry.classes[1].retention, dry.classes[1].terminal_before, dry.classes[1].jobs) == (None, None, 0)
    assert JobRecord.objects.count() == 6
    assert not OperatorAudit.objects.exists()

    batches: list[tuple[TerminalStateClass, int]] = []
    done = operator.purge(actor="alice", on_batch=lambda state_class, n: batches.append((state_class, n)))
    assert done.jobs == 5
    assert batches == [(OK_CLASS, 2), (OK_CLASS, 4), (OK_CLASS, 5)]
    assert list(JobRecord.objects.values_list("job_id", flat=True)) == [recent]
    assert list(OperatorAudit.objects.values_list("actor", "action", "target", "recorded_at")) == [
        ("alice", "purge", "5 jobs (succeeded_or_cancelled 5, dead_lettered_or_quarantined 0)", LATER)
    ]


def test_purge_needs_an_actor_before_it_deletes_anything(backwave_settings):
    backwave_settings(RETENTION={"SUCCEEDED_OR_CANCELLED": 0})
    finish(enqueue())
    with pytest.raises(ValueError, match="actor"):
        operator.purge(actor="")
    assert JobRecord.objects.count() == 1
    assert not OperatorAudit.objects.exists()


def test_the_audit_page_shows_a_purge_summary_as_text(admin_client, backwave_settings):
    backwave_settings(RETENTION={"SUCCEEDED_OR_CANCELLED": None, "DEAD_LETTERED_OR_QUARANTINED": None})
    operator.purge(actor="cli:alice")
    html = admin_client.get("/admin/backwave_django/operatoraudit/").content.decode()
    assert "0 jobs (succeeded_or_cancelled 0, dead_lettered_or_quarantined 0)" in html
    assert "?q=0+jobs" not in html
