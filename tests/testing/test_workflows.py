"""A workflow under the virtual-clock harness: members run parents first, the status follows."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from backwave_django import JobContext, JobDefinition, WorkflowStatus, job, store, workflow
from backwave_django.registry import unregister
from backwave_django.testing import BackWaveHarness
from tests.jobsapp import jobs


def test_a_workflow_runs_parents_first_and_drains(backwave: BackWaveHarness) -> None:
    with workflow(name="report") as wf:
        part = wf.add(jobs.echo.prepare("part"))
        wf.add(jobs.parent_reader.prepare(str(part.job_id)), after=[part])
    assert store.workflow_status(wf.workflow_id) is WorkflowStatus.RUNNING
    first = backwave.run_next()
    assert first is not None
    assert first.job_id == part.job_id
    assert store.workflow_status(wf.workflow_id) is WorkflowStatus.RUNNING
    summary = backwave.run_until_idle()
    assert summary.succeeded == 1
    assert store.workflow_status(wf.workflow_id) is WorkflowStatus.SUCCEEDED


def test_a_failing_member_fails_the_workflow_and_cancels_what_waits(backwave: BackWaveHarness) -> None:
    with workflow(name="doomed") as wf:
        failing = wf.add(jobs.always_fails.prepare())
        waiting = wf.add(jobs.echo.prepare(), after=[failing])
    backwave.drain()
    assert backwave.job(waiting.job_id).state.name == "CANCELLED"
    assert store.workflow_status(wf.workflow_id) is WorkflowStatus.FAILED


@pytest.fixture
def grower() -> Iterator[JobDefinition[..., int]]:
    """A job that appends one page job per page to its own workflow, each waiting for it."""

    def grow(ctx: JobContext, workflow_id: str, pages: int) -> int:
        with workflow(workflow_id=uuid.UUID(workflow_id), append=True) as more:
            for page in range(pages):
                more.add(jobs.echo.prepare(f"page {page}"), after=[ctx.job_id])
        return pages

    definition = job("test.workflow-grower", takes_context=True)(grow)
    yield definition
    unregister("test.workflow-grower")


def test_a_member_appends_to_its_own_workflow_while_it_runs(
    backwave: BackWaveHarness, grower: JobDefinition[..., int]
) -> None:
    wf = workflow(name="crawl")
    first = wf.add(grower.prepare(str(wf.workflow_id), 3))
    wf.enqueue()
    assert backwave.run_until_idle().succeeded == 4
    graph = store.workflow_graph(wf.workflow_id)
    assert graph is not None
    assert len(graph.members) == 4
    assert graph.members[0] == first.job_id
    assert {parent for parent, _ in graph.edges} == {first.job_id}
    assert len(graph.edges) == 3
    assert store.workflow_status(wf.workflow_id) is WorkflowStatus.SUCCEEDED
