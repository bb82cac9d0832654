"""The job page and the compact job list in a real browser, at 1280x800 and 1920x1080.

- The job page leads with the answer: the state, the cause and the last failure are above the
  fold at 1280x800; the attempts follow, failing ones marked, their tracebacks folded until opened.
- The job list is compact: at 1280x800 at least 15 job rows are in the window, and neither size
  scrolls sideways (``document.documentElement.scrollWidth <= clientWidth``).
"""

from __future__ import annotations

import contextlib
import os
import uuid
from datetime import timedelta
from typing import TYPE_CHECKING

import pytest
from django.utils import timezone

from backwave_django import store
from backwave_django.core.outcomes import NewJob
from backwave_django.core.states import EnqueueResult
from backwave_django.models import JobRecord
from tests.admin.test_job_page import job_with_attempts

with contextlib.suppress(ImportError):
    from playwright.sync_api import expect

if TYPE_CHECKING:
    from playwright.sync_api import Page, ViewportSize

pytestmark = pytest.mark.browser

JOBS = "/admin/backwave_django/jobrecord/"
SMALL: ViewportSize = {"width": 1280, "height": 800}
LARGE: ViewportSize = {"width": 1920, "height": 1080}
#: Where to save what the tests see, for a person to look at (unset: nothing is saved).
SHOTS = os.environ.get("BACKWAVE_BROWSER_SHOTS")

NO_SIDEWAYS_SCROLL = "document.documentElement.scrollWidth <= document.documentElement.clientWidth"
#: The job rows whose whole height is inside the window.
ROWS_IN_WINDOW = """() => Array.from(document.querySelectorAll('#result_list tbody tr'))
  .filter((row) => { const box = row.getBoundingClientRect(); return box.height > 0 && box.bottom <= innerHeight; })
  .length"""


def shoot(page: Page, name: str) -> None:
    if SHOTS:
        page.screenshot(path=os.path.join(SHOTS, name))


def above_the_fold(page: Page, test_id: str) -> bool:
    box = page.get_by_test_id(test_id).bounding_box()
    assert box is not None, test_id
    assert page.viewport_size is not None
    return box["y"] + box["height"] <= page.viewport_size["height"]


def test_the_job_page_leads_with_state_cause_and_last_failure_above_the_fold(operator_page: Page) -> None:
    job_id = job_with_attempts(10)
    page = operator_page
    page.set_viewport_size(SMALL)
    page.goto(f"{JOBS}{JobRecord.objects.get(job_id=job_id).pk}/change/")
    expect(page.get_by_test_id("bw-summary-state")).to_contain_text("Dead-Lettered")
    expect(page.get_by_test_id("bw-summary-cause")).to_have_text("card declined on attempt 10")
    expect(page.get_by_test_id("bw-last-failure-message")).to_have_text(
        "CardDeclined: card declined on attempt 10"
    )
    for test_id in ("bw-summary-state", "bw-summary-cause", "bw-last-failure-message"):
        assert above_the_fold(page, test_id), f"{test_id} is below the fold at 1280x800"
    # The traceback is folded under the message, and opens on a click.
    traceback = page.get_by_test_id("bw-last-failure-traceback")
    expect(traceback.locator("pre")).to_be_hidden()
    shoot(page, "job-page.png")
    traceback.locator("summary").click()
    expect(traceback.locator("pre")).to_be_visible()
    expect(traceback.locator("pre")).to_contain_text("raise CardDeclined")
    assert page.evaluate(NO_SIDEWAYS_SCROLL)


def test_the_attempts_mark_the_failing_ones_and_fold_their_tracebacks(operator_page: Page) -> None:
    job_id = job_with_attempts(4, max_attempts=4, last="succeed")
    page = operator_page
    page.set_viewport_size(SMALL)
    page.goto(f"{JOBS}{JobRecord.objects.get(job_id=job_id).pk}/change/")
    rows = page.get_by_test_id("bw-attempt")
    expect(rows).to_have_count(4)
    assert [rows.nth(i).get_attribute("data-failed") for i in range(4)] == ["false", "true", "true", "true"]
    expect(rows.nth(0)).to_contain_text("succeeded")
    expect(rows.nth(1)).to_contain_text("failed, retry scheduled")
    # A failing row is marked where the eye starts: a coloured edge on its first cell.
    marked = rows.nth(1).locator("td").first.evaluate("(cell) => getComputedStyle(cell).borderLeftWidth")
    plain = rows.nth(0).locator("td").first.evaluate("(cell) => getComputedStyle(cell).borderLeftWidth")
    assert (marked, plain) == ("4px", "0px")
    tracebacks = page.get_by_test_id("bw-attempt-traceback")
    expect(tracebacks).to_have_count(3)
    for index in range(3):
        expect(tracebacks.nth(index).locator("pre")).to_be_hidden()
    expect(tracebacks.nth(0).locator("summary")).to_have_text("CardDeclined: card declined on attempt 3")
    tracebacks.nth(0).locator("summary").click()
    expect(tracebacks.nth(0).locator("pre")).to_be_visible()
    expect(tracebacks.nth(1).locator("pre")).to_be_hidden()


def _many_jobs(count: int) -> None:
    """``count`` jobs with long wire names and tags, the widest a list row gets."""
    now = timezone.now()
    for index in range(count):
        new = NewJob(
            job_id=uuid.uuid4(),
            wire_name=f"reports.rebuild-quarterly-revenue-by-region-and-product-line-{index}",
            payload={"args": [], "kwargs": {}},
            queue="integrations-partner-feeds",
            due_time=now + timedelta(minutes=index),
            priority=5 if index % 3 == 0 else 0,
            tags=("vip", ("tenant", f"acme-industries-international-{index}"), ("region", "eu-west")),
        )
        assert store.enqueue(new, now=now) is EnqueueResult.OK


@pytest.mark.parametrize("viewport", [SMALL, LARGE], ids=["1280x800", "1920x1080"])
def test_the_job_list_is_compact_and_never_scrolls_sideways(
    operator_page: Page, viewport: ViewportSize
) -> None:
    _many_jobs(24)
    page = operator_page
    page.set_viewport_size(viewport)
    page.goto(JOBS)
    expect(page.locator("#result_list tbody tr").first).to_be_visible()
    assert page.evaluate(NO_SIDEWAYS_SCROLL), page.evaluate(
        "[document.documentElement.scrollWidth, document.documentElement.clientWidth]"
    )
    rows = page.evaluate(ROWS_IN_WINDOW)
    if viewport == SMALL:
        shoot(page, "job-list.png")
        assert rows >= 15, f"only {rows} job rows fit in 1280x800"
    # A cut-short wire name keeps the whole name as its tooltip.
    link = page.locator("a.bw-job-link").first
    assert (link.get_attribute("title") or "").startswith("reports.rebuild-quarterly-revenue-by-region")
