"""``backwave_django.workflow``: collecting prepared jobs and storing them as one workflow."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

import backwave_django
from backwave_django import (
    JobState,
    Unique,
    WorkflowEnqueueResult,
    WorkflowError,
    WorkflowStatus,
    store,
    workflow,
)
from backwave_django.models import JobRecord, Workflow, WorkflowEdge
from tests.jobsapp import jobs

pytestmark = pytest.mark.django_db


def test_the_package_exports_the_workflow_names():
    from backwave_django.core import states, workflows

    assert backwave_django.WorkflowDefinition is workflows.WorkflowDefinition
    assert backwave_django.WorkflowEnqueueResult is states.WorkflowEnqueueResult
    assert backwave_django.WorkflowStatus is states.WorkflowStatus
    assert callable(backwave_django.workflow)
    assert {"workflow", "WorkflowDefinition", "WorkflowEnqueueResult", "WorkflowStatus"} <= set(
        backwave_django.__all__
    )


def test_a_with_block_stores_the_jobs_as_one_workflow_on_exit():
    with workflow(name="import") as wf:
        fetch = wf.add(jobs.echo.prepare("fetch"))
        parse = wf.add(jobs.echo.using(parents=[fetch.job_id]).prepare("parse"))
        notify = wf.add(jobs.echo.prepare("notify"), after=[parse, fetch])
        assert not Workflow.objects.exists()  # nothing before the block ends
    assert wf.receipt is not None
    assert wf.receipt.workflow_id == wf.workflow_id
    assert wf.receipt.job_ids == (fetch.job_id, parse.job_id, notify.job_id)
    stored = Workflow.objects.get()
    assert (stored.workflow_id, stored.name) == (wf.workflow_id, "import")
    assert abs(stored.created_at - timezone.now()) < timedelta(seconds=5)
    assert notify.parents == (parse.job_id, fetch.job_id)
    states = dict(JobRecord.objects.values_list("job_id", "state"))
    assert states == {
        fetch.job_id: JobState.SCHEDULED,
        parse.job_id: JobState.AWAITING_PARENT,
        notify.job_id: JobState.AWAITING_PARENT,
    }
    assert set(JobRecord.objects.values_list("workflow_id", flat=True)) == {wf.workflow_id}
    assert WorkflowEdge.objects.count() == 3
    assert store.workflow_status(wf.workflow_id) is WorkflowStatus.RUNNING


def test_a_block_that_raises_stores_nothing():
    class Abort(Exception):
        pass

    with pytest.raises(Abort), workflow(name="half") as wf:
        wf.add(jobs.echo.prepare())
        raise Abort
    assert wf.receipt is None
    assert not Workflow.objects.exists()
    assert not JobRecord.objects.exists()


def test_enqueue_stores_once_and_the_builder_is_closed_afterwards():
    wf = workflow()
    wf.add(jobs.echo.prepare())
    receipt = wf.enqueue()
    assert receipt.workflow_id.version == 7
    assert Workflow.objects.get().name is None
    with pytest.raises(RuntimeError, match="already enqueued"):
        wf.enqueue()
    with pytest.raises(RuntimeError, match="already enqueued"):
        wf.add(jobs.echo.prepare())
    with wf:  # an explicit enqueue inside a block is not repeated on exit
        pass
    assert JobRecord.objects.count() == 1


def test_a_parent_outside_the_workflow_raises_and_stores_nothing():
    standalone = jobs.echo.enqueue().job_id
    wf = workflow(name="leaky")
    first = wf.add(jobs.echo.prepare())
    child = wf.add(jobs.echo.using(parents=[first.job_id, standalone]).prepare())
    with pytest.raises(WorkflowError) as caught:
        wf.enqueue()
    assert caught.value.result is WorkflowEnqueueResult.CONTAINMENT_VIOLATION
    message = str(caught.value)
    assert f"workflow 'leaky': job 'test.echo' ({child.job_id}) names parent(s) outside the workflow: " in message
    assert str(standalone) in message
    assert str(first.job_id) not in message.partition("outside the workflow")[2]
    assert JobRecord.objects.count() == 1
    assert not Workflow.objects.exists()


def test_an_empty_workflow_raises():
    with pytest.raises(WorkflowError, match="workflow 'nothing' has no jobs") as caught, workflow(name="nothing"):
        pass
    assert caught.value.result is WorkflowEnqueueResult.EMPTY_WORKFLOW


def test_refusals_name_the_member_and_the_limit():
    wf = workflow(name="big")
    wf.add(jobs.echo.prepare())
    wf.add(jobs.echo.prepare("x" * 70_000))
    with pytest.raises(WorkflowError, match=r"workflow 'big': payload for wire name 'test\.echo' is 70,0\d\d bytes"):
        wf.enqueue()
    again = workflow(workflow_id="daily")
    again.add(jobs.echo.prepare())
    again.enqueue()
    twice = workflow(workflow_id="daily")
    twice.add(jobs.echo.prepare())
    with pytest.raises(WorkflowError, match="already exists; a workflow id is used once") as caught:
        twice.enqueue()
    assert caught.value.result is WorkflowEnqueueResult.DUPLICATE_WORKFLOW
    reused = workflow()
    reused.add(jobs.echo.using(job_id=again.receipt.job_ids[0] if again.receipt else None).prepare())
    with pytest.raises(WorkflowError, match="already exist") as caught:
        reused.enqueue()
    assert caught.value.result is WorkflowEnqueueResult.DUPLICATE_MEMBER


def test_a_string_workflow_id_is_stable():
    assert workflow(workflow_id="import-2026-01-01").workflow_id == workflow(
        workflow_id="import-2026-01-01"
    ).workflow_id
    assert workflow(workflow_id="a").workflow_id != workflow(workflow_id="b").workflow_id


def test_an_append_adds_jobs_under_stored_parents():
    with workflow(name="grow") as wf:
        root = wf.add(jobs.echo.prepare())
    with workflow(workflow_id=wf.workflow_id, append=True) as more:
        leaf = more.add(jobs.echo.prepare(), after=[root.job_id])
    assert JobRecord.objects.get(job_id=leaf.job_id).workflow_id == wf.workflow_id
    graph = store.workflow_graph(wf.workflow_id)
    assert graph is not None
    assert graph.edges == ((root.job_id, leaf.job_id),)
    missing = workflow(workflow_id=uuid.uuid4(), append=True)
    missing.add(jobs.echo.prepare())
    with pytest.raises(WorkflowError, match=r"no workflow with id .* to append to") as caught:
        missing.enqueue()
    assert caught.value.result is WorkflowEnqueueResult.WORKFLOW_NOT_FOUND


def test_the_workflow_commits_and_rolls_back_with_the_callers_transaction():
    with pytest.raises(ZeroDivisionError), transaction.atomic():
        with workflow() as wf:
            wf.add(jobs.echo.prepare())
        assert Workflow.objects.exists()
        1 / 0  # noqa: B018
    assert not Workflow.objects.exists()
    assert not JobRecord.objects.exists()


def test_bad_arguments_are_refused_before_anything_is_stored():
    with pytest.raises(ValueError, match="append=True needs the workflow_id"):
        workflow(append=True)
    with pytest.raises(ValueError, match="an append adds jobs to an existing workflow"):
        workflow("name", workflow_id=uuid.uuid4(), append=True)
    with pytest.raises(ValueError, match="name is at most 255 characters"):
        workflow("n" * 256)
    with pytest.raises(TypeError, match="workflow_id must be a UUID or a str key, got int"):
        workflow(workflow_id=7)  # type: ignore[arg-type]
    wf = workflow()
    with pytest.raises(TypeError, match=r"add takes a prepared job \(job.prepare\(...\)\)"):
        wf.add(jobs.echo)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="after must be a list of jobs or job ids"):
        wf.add(jobs.echo.prepare(), after=uuid.uuid4())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"after\[0\] must be a prepared job or a uuid.UUID, got str"):
        wf.add(jobs.echo.prepare(), after=["x"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="is a unique job; a workflow member cannot be one"):
        wf.add(jobs.echo.using(unique=Unique()).prepare())
    assert wf.jobs == ()


@pytest.mark.django_db(transaction=True)
def test_aenqueue_stores_from_async_code():
    from asgiref.sync import sync_to_async
    from django.db import connections

    async def scenario() -> uuid.UUID:
        wf = workflow(name="async")
        wf.add(jobs.echo.prepare())
        try:
            return (await wf.aenqueue()).workflow_id
        finally:
            await sync_to_async(connections.close_all, thread_sensitive=True)()

    workflow_id = asyncio.run(scenario())
    assert Workflow.objects.get().workflow_id == workflow_id
