"""Retention treats a workflow as a unit: ``store.purge_terminal`` (docs/workflows.md, "Retention").

No member is purged before every member of its workflow is terminal, the window starts when the
workflow drained (its last member's ``terminal_at``), and the workflow's row and structural edges
go with its last member.
"""

from __future__ import annotations

import threading
import time
import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, transaction

from backwave_django import (
    Failure,
    TerminalStateClass,
    WorkflowDefinition,
    WorkflowEnqueueResult,
    WorkflowStatus,
    store,
)
from backwave_django.models import JobRecord, JobTransition, Workflow, WorkflowEdge

from ..conftest import T0, enqueue, lease_one, new_job, report

OK_CLASS = TerminalStateClass.SUCCEEDED_OR_CANCELLED
FAILED_CLASS = TerminalStateClass.DEAD_LETTERED_OR_QUARANTINED
MINUTE = timedelta(minutes=1)


def create(*members: Any, workflow_id: uuid.UUID | None = None) -> uuid.UUID:
    wf = WorkflowDefinition(workflow_id=workflow_id or uuid.uuid4(), members=members)
    assert store.enqueue_workflow(wf, now=T0) is WorkflowEnqueueResult.OK
    return wf.workflow_id


def finish(job_id: uuid.UUID, now: Any, outcome: Any = None) -> None:
    lease_one(job_id, now=now)
    assert report(job_id, outcome, now=now).name == "APPLIED"


def ids() -> set[uuid.UUID]:
    return set(JobRecord.objects.values_list("job_id", flat=True))


@pytest.mark.django_db
def test_a_drained_workflow_is_purged_only_once_its_drain_instant_is_old_enough():
    early = new_job(queue="early")
    late = new_job(queue="late", parents=[early.job_id])
    workflow_id = create(early, late)
    finish(early.job_id, now=T0 + MINUTE)
    finish(late.job_id, now=T0 + 10 * MINUTE)  # the drain instant
    standalone = enqueue(queue="standalone")
    finish(standalone, now=T0 + MINUTE)

    # ``early`` ended long enough ago by itself, but its workflow drained after the cutoff.
    assert store.purge_terminal(OK_CLASS, terminal_before=T0 + 5 * MINUTE) == 1
    assert ids() == {early.job_id, late.job_id}
    assert store.purge_terminal(OK_CLASS, terminal_before=T0 + 10 * MINUTE - timedelta(microseconds=1)) == 0
    assert Workflow.objects.filter(workflow_id=workflow_id).exists()

    assert store.purge_terminal(OK_CLASS, terminal_before=T0 + 10 * MINUTE) == 2
    assert ids() == set()
    assert not Workflow.objects.exists()
    assert not WorkflowEdge.objects.exists()
    assert not JobTransition.objects.exists()
    assert store.workflow_status(workflow_id) is None


@pytest.mark.django_db
def test_a_running_workflows_terminal_members_are_kept():
    done = new_job(queue="done")
    waiting = new_job(queue="waiting", due_time=T0 + timedelta(days=3650))
    workflow_id = create(done, waiting)
    finish(done.job_id, now=T0)
    assert store.purge_terminal(OK_CLASS, terminal_before=T0 + timedelta(days=365)) == 0
    assert ids() == {done.job_id, waiting.job_id}
    assert store.workflow_status(workflow_id) is WorkflowStatus.RUNNING


@pytest.mark.django_db
def test_the_workflow_row_and_edges_go_with_its_last_member():
    ok = new_job(queue="ok")
    failed = new_job(queue="failed", parents=[ok.job_id], max_attempts=1)
    workflow_id = create(ok, failed)
    finish(ok.job_id, now=T0)
    finish(failed.job_id, now=T0, outcome=Failure(next_due_time=None, error="boom"))

    # Each state class keeps its own window: the Succeeded member goes, the Dead-Lettered stays.
    assert store.purge_terminal(OK_CLASS, terminal_before=T0) == 1
    assert ids() == {failed.job_id}
    assert Workflow.objects.filter(workflow_id=workflow_id).exists()
    assert WorkflowEdge.objects.count() == 1
    assert store.workflow_status(workflow_id) is WorkflowStatus.FAILED
    graph = store.workflow_graph(workflow_id)
    assert graph is not None
    assert (graph.members, graph.edges) == ((failed.job_id,), ())

    assert store.purge_terminal(FAILED_CLASS, terminal_before=T0) == 1
    assert not Workflow.objects.exists()
    assert not WorkflowEdge.objects.exists()
    # Gone as a whole: the id can be used for a new workflow.
    assert create(new_job(), workflow_id=workflow_id) == workflow_id


@pytest.mark.django_db
def test_members_and_other_jobs_are_purged_oldest_first_within_the_batch_limit():
    first = new_job(queue="first")
    third = new_job(queue="third")
    workflow_id = create(first, third)
    finish(first.job_id, now=T0 + MINUTE)
    second = enqueue(queue="second")
    finish(second, now=T0 + 2 * MINUTE)
    finish(third.job_id, now=T0 + 3 * MINUTE)
    cutoff = T0 + 10 * MINUTE
    assert store.purge_terminal(OK_CLASS, terminal_before=cutoff, max_jobs=2) == 2
    assert ids() == {third.job_id}
    assert Workflow.objects.filter(workflow_id=workflow_id).exists()
    assert store.purge_terminal(OK_CLASS, terminal_before=cutoff, max_jobs=2) == 1
    assert not Workflow.objects.exists()


@pytest.mark.django_db
def test_a_requeued_member_reopens_the_workflow_and_holds_the_rest():
    ok = new_job(queue="ok")
    dead = new_job(queue="dead", max_attempts=1)
    create(ok, dead)
    finish(ok.job_id, now=T0)
    finish(dead.job_id, now=T0, outcome=Failure(next_due_time=None, error="boom"))
    store.requeue(dead.job_id, actor="ops", now=T0 + MINUTE)
    assert store.purge_terminal(OK_CLASS, terminal_before=T0 + timedelta(days=1)) == 0
    assert ids() == {ok.job_id, dead.job_id}


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_purge_skips_a_workflow_an_append_is_adding_to_without_waiting_for_it():
    """An append holds its workflow's row until it commits; a purge meanwhile neither waits for it
    nor removes the workflow's members (it would otherwise drop the row under the new members)."""
    done = new_job(queue="done")
    workflow_id = create(done)
    finish(done.job_id, now=T0)
    bystander = enqueue(queue="bystander")
    finish(bystander, now=T0)
    # No parent: the append then locks nothing but the workflow's row (a parent it names would be
    # locked too, and skipped by the purge for that reason alone).
    appended = new_job(queue="appended", due_time=T0 + timedelta(days=3650))
    locked, release = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def append_slowly() -> None:
        try:
            with transaction.atomic():
                definition = WorkflowDefinition(workflow_id=workflow_id, members=(appended,), is_append=True)
                assert store.enqueue_workflow(definition, now=T0) is WorkflowEnqueueResult.OK
                locked.set()
                assert release.wait(30)
        except BaseException as error:  # reported by the main thread
            errors.append(error)
        finally:
            locked.set()
            connection.close()

    thread = threading.Thread(target=append_slowly, daemon=True)
    thread.start()
    try:
        assert locked.wait(30)
        started = time.monotonic()
        assert store.purge_terminal(OK_CLASS, terminal_before=T0 + timedelta(days=1)) == 1
        assert time.monotonic() - started < 5
        assert ids() == {done.job_id}  # the bystander went; the workflow's member stayed
    finally:
        release.set()
        thread.join(30)
    assert not errors, errors
    # Committed: the workflow runs again, so its ended member stays.
    assert store.purge_terminal(OK_CLASS, terminal_before=T0 + timedelta(days=1)) == 0
    assert ids() == {done.job_id, appended.job_id}
    assert store.workflow_status(workflow_id) is WorkflowStatus.RUNNING
