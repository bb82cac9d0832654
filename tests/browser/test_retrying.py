"""The Retrying view and a job's progress in a real browser: the bars are drawn, Retry now works."""

from __future__ import annotations

import contextlib
import uuid
from datetime import timedelta
from typing import TYPE_CHECKING

import pytest
from django.utils import timezone

from backwave_django import store
from backwave_django.core.outcomes import Failure, NewJob, OutcomeReport
from backwave_django.core.states import EnqueueResult, JobState
from backwave_django.models import JobRecord, OperatorAudit

with contextlib.suppress(ImportError):
    from playwright.sync_api import expect

if TYPE_CHECKING:
    from playwright.sync_api import Locator, Page

pytestmark = pytest.mark.browser

JOBS = "/admin/backwave_django/jobrecord/"
PROGRESS = {"done": 45, "total": 60, "note": "invoices for March", "at": "2026-01-01T00:00:00Z"}


def waiting_job(error: str) -> JobRecord:
    """A job that failed its first of three attempts, reported progress, and waits an hour to retry."""
    now = timezone.now() - timedelta(minutes=5)
    job_id = uuid.uuid4()
    queue = f"retry-{job_id.hex[:8]}"
    new = NewJob(
        job_id=job_id,
        wire_name="test.always-fails",
        payload={"args": [], "kwargs": {}},
        queue=queue,
        due_time=now,
        max_attempts=3,
        backoff=(3600.0,),
    )
    assert store.enqueue(new, now=now) is EnqueueResult.OK
    [claimed] = store.claim(
        worker_id="worker-browser", queues=[queue], max_jobs=1, lease_duration=timedelta(minutes=1), now=now
    )
    store.report_outcome(
        OutcomeReport(
            job_id=job_id,
            worker_id="worker-browser",
            attempt=claimed.attempt,
            outcome=Failure(next_due_time=timezone.now() + timedelta(hours=1), error=error),
            failure_detail=f"ValueError: {error}\nTraceback (most recent call last): ...",
            progress=PROGRESS,
        ),
        now=now + timedelta(seconds=1),
    )
    record = JobRecord.objects.get(job_id=job_id)
    assert (record.state, record.attempt) == (JobState.SCHEDULED, 1)
    return record


def result_row(page: Page, job: JobRecord) -> Locator:
    return page.locator("#result_list tbody tr").filter(
        has=page.locator(f'input.action-select[value="{job.pk}"]')
    )


def assert_drawn(bar: Locator) -> None:
    expect(bar).to_be_visible()
    box = bar.bounding_box()
    assert box is not None
    assert box["width"] >= 40
    assert box["height"] >= 4


def test_the_retrying_view_and_a_jobs_progress(operator_page: Page) -> None:
    page = operator_page
    by_action = waiting_job("gateway timeout")
    by_button = waiting_job("card declined")
    page.goto(JOBS)
    page.get_by_test_id("bw-retrying").click()
    expect(page.get_by_test_id("bw-retrying")).to_have_attribute("aria-current", "page")
    expect(page.locator("#result_list tbody tr.bw-has-detail")).to_have_count(2)
    row = result_row(page, by_action)
    expect(row.locator("td.field-retry_attempt .bw-nowrap")).to_have_text("1 of 3")
    # The last failure is the line under the job's row.
    last_failure = row.locator("xpath=following-sibling::tr[1]")
    expect(last_failure).to_have_class("bw-detail-row")
    expect(last_failure).to_contain_text("ValueError: gateway timeout")
    expect(row.locator("td.field-next_try")).to_contain_text("due in ")
    assert_drawn(row.locator("progress.bw-progress-bar"))
    expect(row.locator("td.field-retry_attempt")).to_contain_text("45 / 60 (75%)")
    expect(row).not_to_contain_text("invoices for March")  # the note is never in the list

    # Retry now, as a bulk action from the Retrying view.
    row.locator("input.action-select").check()
    page.select_option("select[name=action]", "retry_selected_jobs_now")
    page.click("button[name=index]")
    expect(page.locator("ul.messagelist")).to_contain_text("Retried now (1): test.always-fails …")

    # The job page: its policy, its progress bar with the note, and the Retry now button.
    page.goto(f"{JOBS}{by_button.pk}/change/")
    progress = page.locator(".field-progress_view [data-testid=bw-progress]")
    assert_drawn(progress.locator("progress.bw-progress-bar"))
    expect(progress).to_contain_text("45 / 60 (75%)")
    expect(progress.get_by_test_id("bw-progress-note")).to_have_text("invoices for March")
    expect(page.locator(".field-max_attempts_policy")).to_contain_text("3")
    expect(page.locator(".field-backoff_policy")).to_contain_text("3600 s")
    expect(page.locator(".field-timeout_policy")).to_contain_text("none")
    page.get_by_test_id("bw-retry-now").click()
    expect(page.locator("ul.messagelist")).to_contain_text(
        f"Retried now (1): test.always-fails …{by_button.job_id.hex[-8:]}."
    )

    for job in (by_action, by_button):
        assert JobRecord.objects.get(pk=job.pk).due_time <= timezone.now()
    assert list(OperatorAudit.objects.values_list("actor", "action")) == [("ops-alice", "retry_now")] * 2
