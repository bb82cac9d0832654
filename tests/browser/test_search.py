"""The job list's search box in a real browser: each kind of needle the console shows finds its
job (short id with and without the ellipsis, sequence number, full id, error text, failure
detail, an argument), and a filter the list cannot read is named with no jobs shown."""

from __future__ import annotations

import contextlib
import uuid
from typing import TYPE_CHECKING, Any

import pytest

from backwave_django import Failure
from backwave_django.admin.display import short_job_id
from backwave_django.models import JobRecord
from tests.conftest import enqueue, lease_one, report

with contextlib.suppress(ImportError):
    from playwright.sync_api import expect

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = pytest.mark.browser

JOBS = "/admin/backwave_django/jobrecord/"


def rows(page: Page) -> Any:
    return page.locator("#result_list tbody tr")


def _declined() -> uuid.UUID:
    job_id = enqueue(queue="pay", max_attempts=1, payload={"args": [], "kwargs": {"order_id": 42}})
    lease_one(job_id)
    report(
        job_id, Failure(next_due_time=None, error="card declined"), failure_detail="PaymentError: no funds"
    )
    return job_id


def test_the_search_box_finds_a_job_by_each_needle_the_console_shows(operator_page: Page) -> None:
    wanted = _declined()
    for order in range(3):
        enqueue(queue="pay", payload={"args": [], "kwargs": {"order_id": order}})
    sequence = JobRecord.objects.get(job_id=wanted).pk
    page = operator_page
    page.goto(JOBS)
    expect(rows(page)).to_have_count(4)
    shown = short_job_id(wanted)
    expect(page.locator("#result_list")).to_contain_text(shown)
    needles = (shown, shown[1:], str(sequence), str(wanted), "card declined", "no funds", "order_id=42")
    for needle in needles:
        page.locator("#searchbar").fill(needle)
        page.locator("#searchbar").press("Enter")
        expect(rows(page)).to_have_count(1)
        expect(rows(page).first).to_contain_text(shown)
    page.locator("#searchbar").fill("order_id=999")
    page.locator("#searchbar").press("Enter")
    expect(page.locator("#result_list tbody tr a.bw-job-link")).to_have_count(0)


def test_a_filter_the_list_cannot_read_is_named_and_shows_no_jobs(operator_page: Page) -> None:
    for _ in range(3):
        enqueue(queue="billing")
    page = operator_page
    page.goto(f"{JOBS}?priority=abc")
    expect(page.locator(".messagelist")).to_contain_text("“priority=abc”: expected above, normal, below")
    expect(page.locator("a.bw-job-link")).to_have_count(0)
    expect(page.get_by_test_id("bw-all-cancel")).to_have_count(0)
