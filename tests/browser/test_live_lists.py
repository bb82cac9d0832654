"""Live refresh on the job list: new jobs appear without a reload, nothing is swapped while rows are
selected, and Django's selection (select all, the counter, the action) still works after a swap."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import pytest

from backwave_django.admin import jobs as jobs_page
from backwave_django.models import JobRecord
from tests.jobsapp import jobs

with contextlib.suppress(ImportError):
    from playwright.sync_api import expect

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = pytest.mark.browser

JOBS = "/admin/backwave_django/jobrecord/"


def test_the_job_list_refreshes_itself_but_never_under_a_selection(
    operator_page: Page, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = operator_page
    # The interval comes from how long the list took to build; pin it to one second.
    monkeypatch.setattr(jobs_page, "refresh_interval_ms", lambda build_seconds: 1_000)
    jobs.echo.enqueue("first")
    page.goto(JOBS)
    rows = page.locator("#result_list tbody tr")
    status = page.get_by_test_id("bw-refresh-status")
    expect(status).to_contain_text("refreshes every 1 s")
    expect(rows).to_have_count(1)

    jobs.echo.enqueue("second")
    expect(rows).to_have_count(2, timeout=8_000)  # swapped in, no reload
    expect(page.get_by_test_id("bw-result-count")).to_have_text("2 jobs")

    # A selection holds the list still.
    rows.first.locator("input.action-select").check()
    expect(status).to_contain_text("waits while rows are selected", timeout=5_000)
    jobs.echo.enqueue("third")
    page.wait_for_timeout(2_500)
    expect(rows).to_have_count(2)
    rows.first.locator("input.action-select").uncheck()
    expect(rows).to_have_count(3, timeout=8_000)

    # Django's selection script works on the swapped rows: select all, the counter, the action.
    page.locator("#action-toggle").check()
    expect(page.locator(".action-counter")).to_contain_text("3 of 3 selected")
    page.select_option("select[name=action]", "cancel_selected_jobs")
    page.click("button[name=index]")
    expect(page.locator("ul.messagelist")).to_contain_text("Cancelled immediately (3)")
    assert JobRecord.objects.filter(state=4).count() == 3
