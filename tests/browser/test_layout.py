"""Every console page at 1280x800 and 1920x1080, light and dark, with the demo's data.

The database is filled by the example project's own seed (``manage.py backwave_demo``: hours of
simulated shop activity, every state, real transition logs), run against the test database, and
one of its workers is shown as alive and running the jobs it holds. Then one browser session per
window size and colour scheme opens every page (``PAGES``) as an operator with every permission,
with the admin's navigation sidebar open as a new user has it, and checks:

- the page never scrolls sideways (a wide table wraps, or scrolls in its own box);
- every cause and last failure, every action control and every timestamp is fully visible:
  inside the window and not clipped by a box around it;
- a cause wraps at words across a sensible width, never squeezed into a narrow column;
- a timestamp is one line and carries its zone;
- the scheme applies (Django's dark theme by the system preference, and by Django's own theme
  switch) and the console's own text stays legible on it (WCAG contrast of 3:1 or more).

Problems are collected over all pages and reported together.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.utils import timezone

from backwave_django.core.states import JobState
from backwave_django.models import JobRecord, RecurringSchedule, WorkerNode
from tests.browser.conftest import ASYNC_UNSAFE, STATIC_URL, TIMEOUT_MS, _serve_static

# Without playwright the browser fixture skips these tests (or fails them under CI=true).
with suppress(ImportError):
    from playwright.sync_api import Error as PlaywrightError

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page, ViewportSize
    from pytest_django.live_server_helper import LiveServer

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "example_project"
ADMIN = "/admin/backwave_django"

#: The sessions: a window size and how the colour scheme is chosen.
SESSIONS: list[tuple[ViewportSize, str]] = [
    ({"width": 1280, "height": 800}, "light"),
    ({"width": 1280, "height": 800}, "dark: system preference"),
    ({"width": 1920, "height": 1080}, "light"),
    ({"width": 1920, "height": 1080}, "dark: Django's theme switch"),
]

#: What must be fully visible on a page, by CSS selector (the check skips ones a page lacks).
CAUSES = ".bw-cause, .bw-last-failure"
ACTIONS = (
    "[data-testid=bw-pause], [data-testid=bw-resume], [data-testid=bw-set-limit], [data-testid=bw-limit-input],"
    "[data-testid=bw-bulk-apply], [data-testid^=bw-all-], select[name=action], button[name=index],"
    "[data-testid=bw-cancel], [data-testid=bw-requeue], [data-testid=bw-retry-now], [data-testid=bw-trigger],"
    "[data-testid=bw-confirm], [data-testid=bw-refresh-toggle], .submit-row input[type=submit]"
)
#: The pages that show instants (each must show them as ``time.bw-time``: zone, relative time).
WITH_TIMES = {
    "dashboard",
    "job list",
    "retrying",
    "dead-lettered tab",
    "quarantined tab",
    "failures (both)",
    "job detail",
    "queues",
    "schedules",
    "schedule page",
    "workers",
    "audit",
}
#: The console's own text, whose contrast with what is behind it is checked.
LEGIBLE = ".bw-time, .bw-ago, .bw-tag, .bw-count, .bw-pill, .bw-cause, .bw-job-link, .bw-quiet, .bw-badge"

#: Run in the page: every problem with what it shows, as text.
CHECK_PAGE = """([causes, actions, legible, dark]) => {
  const problems = [];
  const root = document.documentElement;
  const width = root.clientWidth;
  if (root.scrollWidth > width + 1) problems.push(`scrolls sideways: ${root.scrollWidth} > ${width}`);
  const label = (el) => `${el.tagName.toLowerCase()}${el.dataset.testid ? "[" + el.dataset.testid + "]" : ""}`
    + ` "${(el.textContent || el.value || "").trim().slice(0, 40)}"`;
  // Inside the window, and not cut by any box around it that hides or scrolls its overflow.
  const clipped = (el) => {
    const box = el.getBoundingClientRect();
    if (box.width === 0 && box.height === 0) return "not drawn";
    if (box.left < -1 || box.right > width + 1) return `outside the window (${Math.round(box.left)}..${Math.round(box.right)})`;
    for (let up = el.parentElement; up && up !== document.body; up = up.parentElement) {
      const style = getComputedStyle(up);
      if (style.overflowX === "visible" && style.overflowY === "visible") continue;
      const frame = up.getBoundingClientRect();
      if (box.left < frame.left - 1 || box.right > frame.right + 1) return `cut by ${up.id || up.className}`;
    }
    if (el.scrollWidth > el.clientWidth + 1 && getComputedStyle(el).overflowX !== "visible") return "its text is cut";
    return null;
  };
  const visible = (el) => el.getClientRects().length > 0 && getComputedStyle(el).visibility !== "hidden";
  for (const el of document.querySelectorAll(causes)) {
    const why = clipped(el);
    if (why) problems.push(`cause ${label(el)}: ${why}`);
    const cell = el.closest("td, li, p") || el;
    if (cell.getBoundingClientRect().width < 240) problems.push(`cause ${label(el)}: squeezed into ${Math.round(cell.getBoundingClientRect().width)} px`);
  }
  for (const el of document.querySelectorAll(actions)) {
    if (!visible(el)) continue;
    const why = clipped(el);
    if (why) problems.push(`action ${label(el)}: ${why}`);
  }
  for (const el of document.querySelectorAll("time.bw-time")) {
    const why = clipped(el);
    if (why) problems.push(`time ${label(el)}: ${why}`);
    if (el.getClientRects().length !== 1) problems.push(`time ${label(el)}: broken over ${el.getClientRects().length} lines`);
    if (!/^\\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d [A-Z][A-Za-z0-9+-]*$/.test(el.textContent.trim())) problems.push(`time ${label(el)}: no zone`);
  }
  // Colours: the scheme applies, and the console's text stands out from what is behind it.
  const rgb = (text) => (text.match(/[\\d.]+/g) || []).map(Number);
  const luminance = ([r, g, b]) => {
    const lin = (c) => { c /= 255; return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4; };
    return 0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b);
  };
  const behind = (el) => {
    for (let up = el; up; up = up.parentElement) {
      const colour = rgb(getComputedStyle(up).backgroundColor);
      if (colour.length >= 3 && (colour.length === 3 || colour[3] > 0.5)) return colour;
    }
    return [255, 255, 255];
  };
  const page = luminance(behind(document.body));
  if (dark !== page < 0.2) problems.push(`the page is not ${dark ? "dark" : "light"} (luminance ${page.toFixed(2)})`);
  for (const el of Array.from(document.querySelectorAll(legible)).slice(0, 400)) {
    if (!visible(el) || !el.textContent.trim()) continue;
    const [a, b] = [luminance(rgb(getComputedStyle(el).color)), luminance(behind(el))];
    const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
    if (ratio < 3) problems.push(`${label(el)}: contrast ${ratio.toFixed(1)}:1`);
  }
  return problems;
}"""


@pytest.fixture
def demo_data(live_server: LiveServer) -> dict[str, Any]:
    """The example project's demo data in the test database, and one of its workers alive."""
    env = {
        key: value for key, value in os.environ.items() if key not in ("DJANGO_SETTINGS_MODULE", ASYNC_UNSAFE)
    }
    env["DATABASE_URL"] = _database_url()
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    subprocess.run(
        [sys.executable, "manage.py", "backwave_demo", "--orders", "1100"],
        cwd=EXAMPLE,
        env=env,
        check=True,
        capture_output=True,
        timeout=300,
    )
    running = JobRecord.objects.filter(state=JobState.LEASED).exclude(lease_owner=None).first()
    assert running is not None, "the demo leaves jobs running"
    assert running.lease_owner is not None
    now = timezone.now()
    WorkerNode.objects.create(
        worker_id=running.lease_owner,
        hostname="shop-worker-3",
        pid=1618,
        queues=["billing", "emails", "integrations", "reports", "maintenance", "exports", "default"],
        concurrency=20,
        started_at=now,
        last_seen_at=now,
    )
    dead = JobRecord.objects.filter(state=JobState.DEAD_LETTERED, attempt__gt=1).order_by("-sequence").first()
    assert dead is not None
    return {"dead": dead, "schedule": RecurringSchedule.objects.order_by("pk").first()}


def _database_url() -> str:
    database = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{database['NAME']}"
    if connection.vendor == "postgresql":
        user = database["USER"] + (f":{database['PASSWORD']}" if database["PASSWORD"] else "")
        return f"postgres://{user}@{database['HOST'] or '127.0.0.1'}:{database['PORT'] or 5432}/{database['NAME']}"
    pytest.skip(f"the demo seed runs on SQLite and PostgreSQL, not {connection.vendor}")


def _pages(demo: dict[str, Any]) -> list[tuple[str, str]]:
    dead = int(JobState.DEAD_LETTERED)
    return [
        ("dashboard", f"{ADMIN}/dashboard/"),
        ("job list", f"{ADMIN}/jobrecord/"),
        ("retrying", f"{ADMIN}/jobrecord/?retrying=1"),
        ("dead-lettered tab", f"{ADMIN}/jobrecord/?state__exact={dead}"),
        ("quarantined tab", f"{ADMIN}/jobrecord/?state__exact={int(JobState.QUARANTINED)}"),
        ("failures (both)", f"{ADMIN}/jobrecord/?terminal_class=1"),  # Dead-Lettered or Quarantined
        ("job detail", f"{ADMIN}/jobrecord/{demo['dead'].pk}/change/"),
        ("whole-filter confirmation", f"{ADMIN}/jobrecord/all/requeue/?{urlencode({'state__exact': dead})}"),
        ("queues", f"{ADMIN}/queuesettings/"),
        ("schedules", f"{ADMIN}/recurringschedule/"),
        ("schedule form", f"{ADMIN}/recurringschedule/add/"),
        ("schedule page", f"{ADMIN}/recurringschedule/{demo['schedule'].pk}/change/"),
        ("workers", f"{ADMIN}/workernode/"),
        ("audit", f"{ADMIN}/operatoraudit/"),
        ("observers", f"{ADMIN}/observer/"),
        ("observer dead letters", f"{ADMIN}/observerdeadletter/"),
    ]


@pytest.fixture
def session_cookie(live_server: LiveServer, settings: Any) -> dict[str, str]:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    client = Client()
    client.force_login(User.objects.create_superuser("ops-layout", "layout@example.com", None))
    cookie = client.cookies[settings.SESSION_COOKIE_NAME]
    return {"name": cookie.key, "value": cookie.value, "url": live_server.url}


@contextmanager
def _session(browser: Browser, live_server: LiveServer, viewport: ViewportSize, scheme: str) -> Iterator[Page]:
    context = browser.new_context(
        viewport=viewport,
        base_url=live_server.url,
        color_scheme="dark" if scheme == "dark: system preference" else "light",
    )
    if scheme == "dark: Django's theme switch":
        context.add_init_script("window.localStorage.setItem('theme', 'dark')")
    context.set_default_timeout(TIMEOUT_MS)
    context.route(f"**{STATIC_URL}**", _serve_static)
    try:
        yield context.new_page()
    finally:
        context.close()


def test_every_console_page_fits_its_window_in_both_schemes(
    browser: Browser, live_server: LiveServer, demo_data: dict[str, Any], session_cookie: dict[str, str]
) -> None:
    problems: list[str] = []
    pages = _pages(demo_data)
    for viewport, scheme in SESSIONS:
        with _session(browser, live_server, viewport, scheme) as page:
            page.context.add_cookies([session_cookie])  # type: ignore[list-item]
            for name, url in pages:
                where = f"{viewport['width']}x{viewport['height']} {scheme}, {name}"
                try:
                    response = page.goto(url)
                except PlaywrightError as error:
                    problems.append(f"{where}: {error.message.splitlines()[0]}")
                    page = page.context.new_page()
                    continue
                if response is None or response.status != 200:
                    problems.append(f"{where}: HTTP {response.status if response else '?'}")
                    continue
                found = page.evaluate(CHECK_PAGE, [CAUSES, ACTIONS, LEGIBLE, scheme.startswith("dark")])
                problems.extend(f"{where}: {problem}" for problem in found)
                if name in WITH_TIMES and not page.locator("time.bw-time").count():
                    problems.append(f"{where}: no timestamp with its zone")
    assert not problems, "\n".join(problems)
