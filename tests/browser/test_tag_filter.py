"""The job list's tag filter in a real browser: suggestions while typing, facets, and the same
search working with JavaScript turned off."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client

from backwave_django import store
from backwave_django.core.outcomes import NewJob
from backwave_django.core.states import EnqueueResult
from tests.conftest import T0

with contextlib.suppress(ImportError):
    from playwright.sync_api import expect

if TYPE_CHECKING:
    from playwright.sync_api import Page
    from pytest_django.live_server_helper import LiveServer

pytestmark = pytest.mark.browser

JOBS = "/admin/backwave_django/jobrecord/"


def tagged(*tags: Any) -> uuid.UUID:
    job = NewJob(
        job_id=uuid.uuid4(),
        wire_name="send-invoice",
        payload={"args": [], "kwargs": {}},
        queue="default",
        due_time=T0,
        tags=tags,
    )
    assert store.enqueue(job, now=T0) is EnqueueResult.OK
    return job.job_id


@pytest.fixture
def tags() -> dict[str, uuid.UUID]:
    return {
        "acme": tagged("vip", ("tenant", "acme")),
        "globex": tagged(("tenant", "globex"), ("region", "eu")),
        "initech": tagged("<b>urgent</b>", ("tenant", "initech")),
    }


def rows(page: Page) -> Any:
    return page.locator("#result_list tbody tr")


def test_suggestions_appear_while_typing_and_lead_to_facets(operator_page: Page, tags: dict[str, uuid.UUID]) -> None:
    page = operator_page
    page.goto(JOBS)
    expect(rows(page)).to_have_count(3)
    facets = page.get_by_test_id("bw-tag-facets")
    expect(facets).to_contain_text("vip")
    expect(facets).to_contain_text("<b>urgent</b>")  # shown as text, not markup

    box = page.locator("#bw-tag-query")
    box.fill("TEN")  # typed, not submitted: the script asks the endpoint
    suggestions = page.get_by_test_id("bw-tag-suggestions")
    expect(suggestions.locator("a")).to_have_text(["tenant: …"])
    suggestions.get_by_role("link", name="tenant: …").click()

    expect(page).to_have_url(f"{JOBS}?tk=tenant")
    expect(rows(page)).to_have_count(3)
    expect(page.get_by_test_id("bw-tag-facet-count")).to_have_text(["1", "1", "1"])
    page.locator("#bw-tag-query").fill("gl")
    expect(suggestions.locator("a")).to_have_text(["tenant: globex"])
    suggestions.get_by_role("link", name="tenant: globex").click()

    expect(rows(page)).to_have_count(1)
    expect(rows(page)).to_contain_text(str(tags["globex"]).replace("-", "")[-8:])
    expect(page.locator("#bw-tag-facets li.selected")).to_contain_text("globex")


def test_the_search_works_without_javascript(
    new_page: Callable[..., Page], superuser: User, live_server: LiveServer, tags: dict[str, uuid.UUID]
) -> None:
    page = new_page(java_script_enabled=False)
    client = Client()
    client.force_login(superuser)
    cookie = client.cookies[settings.SESSION_COOKIE_NAME]
    page.context.add_cookies([{"name": cookie.key, "value": cookie.value, "url": live_server.url}])
    page.goto(f"{JOBS}?tk=region")
    expect(rows(page)).to_have_count(1)

    page.locator("#bw-tag-query").fill("")
    page.locator("#bw-tag-query").press("Enter")  # the plain form: a GET with ?tq=
    page.wait_for_url("**tq=**")
    expect(page.get_by_test_id("bw-tag-suggestions").locator("a")).to_have_text(["region: eu"])

    page.goto(JOBS)
    page.locator("#bw-tag-query").fill("v")
    page.get_by_role("button", name="Find").click()
    page.get_by_test_id("bw-tag-suggestions").get_by_role("link", name="vip").click()
    expect(rows(page)).to_have_count(1)
    expect(rows(page)).to_contain_text(str(tags["acme"]).replace("-", "")[-8:])
