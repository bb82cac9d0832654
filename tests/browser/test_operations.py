"""Operating jobs in a real browser: requeue from the failures view, cancel a job a worker is running."""

from __future__ import annotations

import contextlib
import re
import signal
import time
import uuid
from datetime import timedelta
from typing import TYPE_CHECKING

import pytest
from django.utils import timezone

from backwave_django import store
from backwave_django.core.outcomes import Failure, NewJob, OutcomeReport
from backwave_django.core.states import EnqueueResult, JobState
from backwave_django.models import JobRecord, JobTransition, OperatorAudit
from tests.browser.conftest import BrowserWorkers
from tests.jobsapp import jobs
from tests.worker.conftest import wait_for

# Without playwright the browser fixture skips these tests (or fails them under CI=true).
with contextlib.suppress(ImportError):
    from playwright.sync_api import expect

if TYPE_CHECKING:
    from playwright.sync_api import Locator, Page

pytestmark = pytest.mark.browser

JOBS = "/admin/backwave_django/jobrecord/"


def dead_lettered_job(error: str) -> JobRecord:
    """A job that ran once and failed for good, driven through the store on an explicit clock."""
    now = timezone.now() - timedelta(minutes=5)
    job_id = uuid.uuid4()
    new = NewJob(
        job_id=job_id, wire_name="test.always-fails", payload={"args": [], "kwargs": {}}, due_time=now
    )
    assert store.enqueue(new, now=now) is EnqueueResult.OK
    [claimed] = store.claim(
        worker_id="worker-browser",
        queues=["default"],
        max_jobs=1,
        lease_duration=timedelta(minutes=1),
        now=now,
    )
    store.report_outcome(
        OutcomeReport(
            job_id=job_id,
            worker_id="worker-browser",
            attempt=claimed.attempt,
            outcome=Failure(next_due_time=None, error=error),
            failure_detail=f"ValueError: {error}",
        ),
        now=now + timedelta(seconds=1),
    )
    record = JobRecord.objects.get(job_id=job_id)
    assert record.state == JobState.DEAD_LETTERED
    return record


def state_badge(page: Page) -> Locator:
    """The state badge in the job detail's facts."""
    return page.locator(".field-state_badge .bw-badge")


def result_row(page: Page, job: JobRecord) -> Locator:
    """The job list's row for ``job`` (the one whose selection checkbox carries its key)."""
    return page.locator("#result_list tbody tr").filter(
        has=page.locator(f'input.action-select[value="{job.pk}"]')
    )


def job_link(row: Locator, job: JobRecord) -> Locator:
    """The row's link to the job's detail page (its wire name)."""
    return row.locator("a.bw-job-link")


def test_dead_lettered_jobs_are_requeued_from_the_failures_view(operator_page: Page) -> None:
    page = operator_page
    by_action = dead_lettered_job("gateway timeout")
    by_button = dead_lettered_job("card declined")
    page.goto(JOBS)
    page.get_by_test_id("bw-failures-dead-lettered").click()
    expect(page.get_by_test_id("bw-failures-dead-lettered")).to_have_attribute("aria-current", "page")
    expect(page.locator("#result_list tbody tr.bw-has-detail")).to_have_count(2)
    # The cause is the line under the job's row.
    expect(result_row(page, by_action).locator("xpath=following-sibling::tr[1]")).to_contain_text(
        "gateway timeout"
    )

    # The bulk action, from the Dead-Lettered tab.
    result_row(page, by_action).locator("input.action-select").check()
    page.select_option("select[name=action]", "requeue_selected_jobs")
    page.click("button[name=index]")
    expect(page.locator("ul.messagelist")).to_contain_text(
        f"Requeued (1): test.always-fails …{by_action.job_id.hex[-8:]}."
    )
    expect(page.locator("#result_list tbody tr.bw-has-detail")).to_have_count(1)
    page.get_by_test_id("bw-failures-all").click()
    expect(result_row(page, by_action).locator(".bw-badge")).to_have_attribute("data-state", "Scheduled")

    # The detail page's button (the still Dead-Lettered job's id links there from the tab).
    page.get_by_test_id("bw-failures-dead-lettered").click()
    job_link(result_row(page, by_button), by_button).click()
    expect(state_badge(page)).to_have_attribute("data-state", "DeadLettered")
    page.get_by_test_id("bw-requeue").click()
    expect(page.locator("ul.messagelist")).to_contain_text("Requeued (1): test.always-fails")
    expect(state_badge(page)).to_have_attribute("data-state", "Scheduled")
    expect(page.get_by_test_id("bw-requeue")).to_have_count(0)

    assert set(
        JobRecord.objects.filter(pk__in=[by_action.pk, by_button.pk]).values_list("state", flat=True)
    ) == {JobState.SCHEDULED}
    assert list(OperatorAudit.objects.values_list("actor", "action")) == [("ops-alice", "requeue")] * 2


def test_a_running_job_cancelled_from_its_detail_page_is_recorded_cancelled_by_the_worker(
    operator_page: Page, workers: BrowserWorkers
) -> None:
    page = operator_page
    job_id = jobs.sleep.enqueue(60).job_id  # "test.sleep" checks for a cancel request as it loops
    worker = workers.start("--queues", "slow")
    wait_for(
        lambda: JobRecord.objects.filter(job_id=job_id, state=JobState.LEASED).exists(),
        timeout=30,
        what=f"the worker to lease the job (log: {workers.tmp_path})",
    )
    record = JobRecord.objects.get(job_id=job_id)
    page.goto(f"{JOBS}{record.pk}/change/")
    expect(state_badge(page)).to_have_attribute("data-state", "Leased")
    page.get_by_test_id("bw-cancel").click()
    # A running job: a page asks first, naming the worker running it.
    expect(page.get_by_test_id("bw-confirm-cancel-running")).to_contain_text("is running now")
    expect(page.get_by_test_id("bw-confirm-items")).to_contain_text(str(record.lease_owner))
    page.get_by_test_id("bw-confirm").click()
    expect(page.locator("ul.messagelist")).to_contain_text("Cancellation requested (1): test.sleep")

    # The worker sees the request at its next heartbeat (0.5 s here) and records Cancelled.
    deadline = time.monotonic() + 20
    while state_badge(page).get_attribute("data-state") != "Cancelled" and time.monotonic() < deadline:
        page.wait_for_timeout(500)
        page.reload()
    expect(state_badge(page)).to_have_attribute("data-state", "Cancelled")
    # The page that first showed Cancelled may have been built while the worker was writing it;
    # the terminal state is stable, so one more load shows the finished page.
    page.reload()
    expect(state_badge(page)).to_have_attribute("data-state", "Cancelled")
    expect(page.get_by_test_id("bw-cancel")).to_have_count(0)
    expect(page.get_by_test_id("bw-summary-cause")).to_contain_text("operator-cancel")
    newest = page.get_by_test_id("bw-transition-log").locator("tbody tr.bw-transition").first
    expect(newest).to_contain_text("Cancelled")
    expect(newest).to_contain_text(re.compile(re.escape(str(record.lease_owner))))

    last = JobTransition.objects.filter(job_id=record.pk).order_by("-ordinal").first()
    assert last is not None
    assert (last.state, last.actor) == (JobState.CANCELLED, record.lease_owner)
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(20) == 0
