"""The Limits page in a real browser: a limit with its buckets and held counts, an override and a
clear through the forms, the confirmation before overriding a name nothing uses, and a held
job's page saying what holds it."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import pytest
from django.utils import timezone

from backwave_django.core.limits import LimitValues
from backwave_django.core.states import JobState
from backwave_django.models import LimitSettings, OperatorAudit
from tests.flow_rows import declare, job_under, leased

# Without playwright the browser fixture skips these tests (or fails them under CI=true).
with contextlib.suppress(ImportError):
    from playwright.sync_api import expect

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = pytest.mark.browser

LIMITS = "/admin/backwave_django/limitsettings/"
JOBS = "/admin/backwave_django/jobrecord/"
NO_SIDEWAYS_SCROLL = "document.documentElement.scrollWidth <= document.documentElement.clientWidth"


def _world() -> int:
    """customer-sync (1 at once): bucket acme full, 2 held; globex has room. The pk of a held job."""
    now = timezone.now()
    declare("customer-sync", concurrency=1, at=now)
    leased("customer-sync", "acme", job_under((("customer-sync", "acme"),), state=JobState.LEASED, due=now))
    held = job_under((("customer-sync", "acme"),), due=now)
    job_under((("customer-sync", "acme"),), due=now)
    job_under((("customer-sync", "globex"),), due=now)
    return int(held.pk)


def test_the_limits_page_shows_buckets_and_held_counts_and_overrides_through_the_form(
    operator_page: Page,
) -> None:
    _world()
    page = operator_page
    page.goto("/admin/backwave_django/")
    page.get_by_role("link", name="Limits", exact=True).first.click()  # in the console's navigation
    expect(page.locator("h1")).to_have_text("Limits")
    row = page.locator('tr[data-limit="customer-sync"]')
    expect(row.get_by_test_id("bw-limit-declared")).to_have_text("1 at once")
    expect(row.get_by_test_id("bw-limit-held")).to_contain_text("2")
    acme = row.locator('tr[data-bucket="acme"]')
    expect(acme.get_by_test_id("bw-bucket-leased")).to_have_text("1 / 1")
    expect(acme.get_by_test_id("bw-bucket-held")).to_have_text("2")
    expect(acme).to_contain_text("full")
    expect(row.locator('tr[data-bucket="globex"]').get_by_test_id("bw-bucket-held")).to_have_text("0")
    assert page.evaluate(NO_SIDEWAYS_SCROLL)

    row.get_by_test_id("bw-override-concurrency").fill("3")
    row.get_by_test_id("bw-override").click()
    expect(page.locator(".messagelist")).to_contain_text("Limit “customer-sync” is now overridden: 3 at once.")
    row = page.locator('tr[data-limit="customer-sync"]')
    expect(row.get_by_test_id("bw-limit-in-force")).to_contain_text("3 at once")
    expect(row.get_by_test_id("bw-limit-override")).to_contain_text("overridden by ops-alice")
    expect(row.get_by_test_id("bw-limit-held")).to_contain_text("0")
    assert LimitSettings.objects.get(name="customer-sync").values_in_force() == LimitValues(3, None, 1.0)

    row.get_by_test_id("bw-override-period").fill("0")
    row.get_by_test_id("bw-override-rate").fill("5")
    row.get_by_test_id("bw-override").click()
    expect(page.locator(".messagelist")).to_contain_text("The period must be a number of seconds greater than 0")

    page.locator('tr[data-limit="customer-sync"]').get_by_test_id("bw-clear-override").click()
    expect(page.locator(".messagelist")).to_contain_text("Cleared the override of limit “customer-sync”")
    row = page.locator('tr[data-limit="customer-sync"]')
    expect(row.get_by_test_id("bw-limit-in-force")).to_have_text("1 at once")
    expect(row.get_by_test_id("bw-clear-override")).to_have_count(0)
    assert list(OperatorAudit.objects.order_by("id").values_list("action", flat=True)) == [
        "set_limit",
        "clear_limit",
    ]

    # A name nothing uses (a typo) asks first: going back stores nothing, confirming creates it.
    def override_by_name() -> None:
        page.get_by_test_id("bw-new-name").fill("custmer-sync")
        page.get_by_test_id("bw-new-concurrency").fill("2")
        page.get_by_test_id("bw-new-override").click()
        expect(page.get_by_test_id("bw-confirm-unknown-limit")).to_contain_text(
            "No worker declares limit “custmer-sync” and no job uses it; overriding it creates it, "
            "in force for its jobs at once. Did you mean “customer-sync”?"
        )

    override_by_name()
    page.get_by_test_id("bw-confirm-back").click()
    expect(page.locator("h1")).to_have_text("Limits")
    assert not LimitSettings.objects.filter(name="custmer-sync").exists()
    override_by_name()
    page.get_by_test_id("bw-confirm").click()
    expect(page.locator(".messagelist")).to_contain_text("Limit “custmer-sync” is now overridden: 2 at once.")
    expect(page.locator('tr[data-limit="custmer-sync"]').get_by_test_id("bw-limit-in-force")).to_contain_text(
        "2 at once"
    )
    assert OperatorAudit.objects.filter(action="set_limit", target="custmer-sync").count() == 1


def test_a_held_jobs_page_says_what_holds_it(operator_page: Page) -> None:
    held = _world()
    page = operator_page
    page.goto(f"{JOBS}{held}/change/")
    expect(page.get_by_test_id("bw-summary-held")).to_contain_text(
        "Held by limit customer-sync, bucket acme (1 / 1 leased)"
    )
    expect(page.get_by_test_id("bw-summary-state")).to_contain_text("Scheduled")
