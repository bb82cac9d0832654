"""The Dashboard in a real browser: counts and chart, live refresh and its pause, and no JavaScript."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest

from backwave_django.admin import dashboard
from tests.browser.conftest import log_in
from tests.jobsapp import jobs

# Without playwright the browser fixture skips these tests (or fails them under CI=true).
with contextlib.suppress(ImportError):
    from playwright.sync_api import expect

if TYPE_CHECKING:
    from django.contrib.auth.models import User
    from playwright.sync_api import Locator, Page

pytestmark = pytest.mark.browser

DASHBOARD = "/admin/backwave_django/dashboard/"
FRAGMENT = "/admin/backwave_django/dashboard/fragment/"


def scheduled_in_default(page: Page) -> Locator:
    """The counts-table cell for Scheduled jobs in the ``default`` queue."""
    return page.locator(
        '[data-testid="bw-counts-row"][data-queue="default"] [data-testid="bw-count"][data-state="0"]'
    )


def test_an_operator_logs_in_and_opens_the_dashboard_from_the_admin_index(
    page: Page, superuser: User
) -> None:
    jobs.echo.enqueue("first")
    log_in(page, superuser)
    page.locator(f'a[href="{DASHBOARD}"]').first.click()
    expect(page).to_have_url(re.compile(re.escape(DASHBOARD) + "$"))
    expect(page.locator("#bw-counts-table")).to_be_visible()
    expect(scheduled_in_default(page)).to_have_text("1")
    expect(page.locator("#bw-throughput-chart")).to_be_visible()
    expect(page.get_by_test_id("bw-stat-0")).to_contain_text("Scheduled")


def test_live_refresh_swaps_in_new_counts_and_pauses_and_resumes(
    operator_page: Page, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = operator_page
    # The page reads its refresh interval from a data attribute. Pin it to one second: the server
    # stretches it when a page is slow to build, which a loaded test machine would trigger.
    monkeypatch.setattr(dashboard, "refresh_interval_ms", lambda build_seconds: 1_000)
    jobs.echo.enqueue("before the page loads")
    page.goto(DASHBOARD)
    toggle = page.get_by_test_id("bw-refresh-toggle")
    status = page.get_by_test_id("bw-refresh-status")
    expect(toggle).to_be_visible()
    expect(status).to_contain_text("Live")
    expect(scheduled_in_default(page)).to_have_text("1")

    jobs.echo.enqueue("while the page is open")
    expect(scheduled_in_default(page)).to_have_text("2", timeout=8_000)

    toggle.click()
    expect(toggle).to_have_attribute("aria-pressed", "true")
    expect(status).to_have_text("Live refresh paused.")
    fetched: list[str] = []
    page.on("request", lambda request: fetched.append(request.url) if FRAGMENT in request.url else None)
    jobs.echo.enqueue("while paused")
    page.wait_for_timeout(2_500)  # more than two refresh intervals
    assert fetched == [], "a paused dashboard must not fetch the fragment"
    expect(scheduled_in_default(page)).to_have_text("2")

    toggle.click()
    expect(toggle).to_have_attribute("aria-pressed", "false")
    expect(scheduled_in_default(page)).to_have_text("3", timeout=8_000)
    expect(status).to_contain_text("refreshes every 1 s")
    assert fetched, "resuming fetches the fragment again"


def test_the_dashboard_is_complete_without_javascript(new_page: Callable[..., Page], superuser: User) -> None:
    jobs.echo.enqueue("static")
    page = new_page(java_script_enabled=False)
    log_in(page, superuser)
    page.goto(DASHBOARD)
    expect(page.get_by_test_id("bw-refresh-status")).to_contain_text("Static page")
    expect(page.get_by_test_id("bw-refresh-toggle")).to_be_hidden()
    expect(page.get_by_test_id("bw-reload")).to_be_visible()
    expect(scheduled_in_default(page)).to_have_text("1")
    expect(page.locator("#bw-throughput-chart")).to_be_visible()
