"""How the console's own pages look in a real browser: styled breadcrumbs and a drawn copy icon."""

from __future__ import annotations

import pytest

from tests.jobsapp import jobs

pytestmark = pytest.mark.browser

JOBS = "/admin/backwave_django/jobrecord/"


def _breadcrumbs_style(page, url: str) -> dict[str, str]:
    page.goto(url)
    crumbs = page.locator(".breadcrumbs").first
    return {
        "background": crumbs.evaluate("node => getComputedStyle(node).backgroundColor"),
        # Django 5.2 writes the separators as text, Django 6 draws them with CSS.
        "text": " ".join(crumbs.inner_text().replace("\u203a", " ").split()),
        "link": crumbs.locator("a").first.evaluate("node => getComputedStyle(node).color"),
    }


@pytest.mark.parametrize(
    ("url", "current"),
    [("/admin/backwave_django/dashboard/", "Dashboard"), ("/admin/backwave_django/queuesettings/", "Queues")],
)
def test_console_pages_have_breadcrumbs_styled_like_djangos_own(operator_page, url, current) -> None:
    django_page = _breadcrumbs_style(operator_page, JOBS)
    assert django_page["background"] not in ("rgba(0, 0, 0, 0)", "transparent")
    console_page = _breadcrumbs_style(operator_page, url)
    assert console_page["background"] == django_page["background"]
    assert console_page["link"] == django_page["link"]
    assert console_page["text"] == f"Home Background jobs {current}"


def test_the_list_copy_button_draws_its_icon(operator_page) -> None:
    jobs.echo.enqueue("copy me")
    operator_page.goto(JOBS)
    icon = operator_page.locator("td.field-job button.bw-copy svg").first
    box = icon.bounding_box()
    assert box is not None
    assert box["width"] >= 10
    assert box["height"] >= 10
    button = operator_page.locator("td.field-job button.bw-copy").first
    assert button.get_attribute("aria-label") == "Copy the job id"
