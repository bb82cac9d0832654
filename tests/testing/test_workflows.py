"""A workflow under the virtual-clock harness: members run parents first, the status follows."""

from __future__ import annotations

from backwave_django import WorkflowStatus, store, workflow
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
