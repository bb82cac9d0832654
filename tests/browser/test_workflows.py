"""A workflow's page in a real browser: the graph is drawn, in layers, and its nodes lead to the jobs."""

from __future__ import annotations

import contextlib
import os
import uuid
from typing import TYPE_CHECKING

import pytest
from django.utils import timezone

from backwave_django import OutcomeReport, Success, WorkflowDefinition, WorkflowEnqueueResult, store
from backwave_django.models import JobRecord, Workflow

from ..conftest import LEASE, new_job

with contextlib.suppress(ImportError):
    from playwright.sync_api import expect

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = pytest.mark.browser

#: Set to a directory to keep a screenshot of the page (for a look at the layout, light and dark).
SCREENSHOTS = os.environ.get("BACKWAVE_SCREENSHOTS")


def diamond() -> Workflow:
    """fetch → (parse, resize) → publish, with fetch already Succeeded."""
    now = timezone.now()
    fetch = new_job(wire_name="fetch-feed", queue="wf-fetch", due_time=now)
    parse = new_job(wire_name="parse-feed", queue="wf-parse", due_time=now, parents=[fetch.job_id])
    resize = new_job(wire_name="resize-images", queue="wf-resize", due_time=now, parents=[fetch.job_id])
    publish = new_job(
        wire_name="publish-catalogue", queue="wf-publish", due_time=now, parents=[parse.job_id, resize.job_id]
    )
    definition = WorkflowDefinition(
        workflow_id=uuid.uuid4(), name="catalogue import", members=(fetch, parse, resize, publish)
    )
    assert store.enqueue_workflow(definition, now=now) is WorkflowEnqueueResult.OK
    [claimed] = store.claim(worker_id="w", queues=["wf-fetch"], max_jobs=1, lease_duration=LEASE, now=now)
    report = OutcomeReport(job_id=claimed.job_id, worker_id="w", attempt=1, outcome=Success())
    assert store.report_outcome(report, now=now).name == "APPLIED"
    return Workflow.objects.get(workflow_id=definition.workflow_id)


def test_a_workflow_page_draws_its_graph_and_each_node_opens_its_job(operator_page: Page) -> None:
    page = operator_page
    workflow = diamond()
    page.goto("/admin/backwave_django/workflow/")
    if SCREENSHOTS:
        page.screenshot(path=os.path.join(SCREENSHOTS, "workflows.png"), full_page=True)
    page.get_by_test_id("bw-workflow-row").filter(has_text="catalogue import").click()
    graph = page.get_by_test_id("bw-workflow-graph")
    expect(graph).to_be_visible()
    nodes = graph.get_by_test_id("bw-workflow-node")
    expect(nodes).to_have_count(4)
    expect(graph.locator("path.bw-wf-edge")).to_have_count(4)
    # Three layers, left to right: fetch, then parse and resize side by side, then publish.
    by_name = {}
    for node in nodes.all():
        box = node.bounding_box()
        assert box is not None
        assert box["width"] > 100
        assert box["height"] > 20
        job_id = uuid.UUID(node.get_attribute("data-job-id") or "")
        by_name[JobRecord.objects.get(job_id=job_id).wire_name] = box
    fetch, parse, resize, publish = (
        by_name[name] for name in ("fetch-feed", "parse-feed", "resize-images", "publish-catalogue")
    )
    assert fetch["x"] < parse["x"] == resize["x"] < publish["x"]
    assert parse["y"] != resize["y"]
    expect(graph.locator('[data-state="Succeeded"]')).to_have_count(1)
    expect(graph.locator('[data-state="AwaitingParent"]')).to_have_count(1)
    if SCREENSHOTS:
        page.screenshot(path=os.path.join(SCREENSHOTS, "workflow.png"), full_page=True)
        page.emulate_media(color_scheme="dark")
        page.screenshot(path=os.path.join(SCREENSHOTS, "workflow-dark.png"), full_page=True)
    graph.locator('[data-state="AwaitingParent"]').click()
    expect(page.locator("#bw-job-id")).to_have_text(
        str(JobRecord.objects.get(wire_name="publish-catalogue").job_id)
    )
    link = page.get_by_test_id("bw-workflow-link")
    expect(link).to_have_text("catalogue import")
    link.click()
    expect(page.locator("#bw-workflow-id")).to_have_text(str(workflow.workflow_id))
