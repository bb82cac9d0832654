"""Browser tests of the admin console: Playwright's sync API driving Debian's chromium.

No browser is downloaded: Playwright launches ``/usr/bin/chromium`` (``apt-get install chromium``).
Without the ``playwright`` package or that binary the tests here skip with the reason; under
``CI=true`` they fail instead, so a broken CI image cannot pass by skipping the console.

Two things about running a browser inside pytest-django:

* Playwright's sync API keeps an asyncio event loop running in the test thread from start to stop.
  Django then takes every ORM call made in that thread (fixtures, assertions, the transactional
  flush) for one made from async code and raises ``SynchronousOnlyOperation``. These tests only run
  blocking code in that thread, so the browser fixture sets ``DJANGO_ALLOW_ASYNC_UNSAFE`` while the
  browser is up and removes it afterwards. For the same reason the browser is shared per package,
  not per session: it is closed (and the loop stopped) before the rest of the suite runs, so no
  other test sees a running loop or the relaxed check. Worker subprocesses never inherit it.
* The test settings neither install ``django.contrib.staticfiles`` nor set ``STATIC_URL``: the
  console's ``{% static %}`` links come out relative (so they 404), and pytest-django's live server
  cannot even start its fallback static handler (it answers every request with a ``TypeError``).
  Here the live server runs with ``STATIC_URL = "/static/"`` and each page answers ``/static/…``
  from the installed apps' ``static`` folders, as ``collectstatic`` plus a web server would in a
  deployment.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

import pytest
from django.apps import apps
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client, override_settings

from backwave_django.conf import env_flag
from tests.worker.conftest import Workers

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page, Route, ViewportSize
    from pytest_django.live_server_helper import LiveServer

CHROMIUM = Path("/usr/bin/chromium")
#: Containers have no user namespaces for chromium's sandbox, and no GPU.
LAUNCH_ARGS = ["--no-sandbox", "--disable-gpu"]
VIEWPORT: ViewportSize = {"width": 1280, "height": 800}
STATIC_URL = "/static/"
#: Generous for a loaded CI machine; every wait in these tests is bounded by it or less.
TIMEOUT_MS = 15_000
PASSWORD = "correct horse battery staple"
ASYNC_UNSAFE = "DJANGO_ALLOW_ASYNC_UNSAFE"


def browser_unavailable() -> str | None:
    """Why the browser tests cannot run here, or None when they can."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the 'playwright' package is not installed (pip install -e '.[dev]')"
    if not CHROMIUM.exists():
        return f"{CHROMIUM} is missing (apt-get install chromium; no browser is downloaded)"
    return None


@pytest.fixture(scope="package")
def live_server(request: pytest.FixtureRequest) -> Iterator[LiveServer]:
    """pytest-django's live server (same address options), with a ``STATIC_URL`` while it runs."""
    from pytest_django.live_server_helper import LiveServer

    address = (
        request.config.getvalue("liveserver") or os.getenv("DJANGO_LIVE_TEST_SERVER_ADDRESS") or "localhost"
    )
    with override_settings(STATIC_URL=STATIC_URL):
        server = LiveServer(address)
        yield server
        server.stop()


@pytest.fixture(scope="package")
def browser() -> Iterator[Browser]:
    """One chromium for every test in this folder."""
    reason = browser_unavailable()
    if reason is not None:
        if env_flag("CI"):
            pytest.fail(f"browser tests cannot run under CI=true: {reason}", pytrace=False)
        pytest.skip(f"browser tests skipped: {reason}")
    from playwright.sync_api import sync_playwright

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(ASYNC_UNSAFE, "true")
        with sync_playwright() as playwright:
            chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS)
            yield chromium
            chromium.close()


def _serve_static(route: Route) -> None:
    """Answer ``/static/<app path>`` from the installed apps' ``static`` folders (never outside them)."""
    wanted = unquote(urlsplit(route.request.url).path).removeprefix(STATIC_URL)
    for config in apps.get_app_configs():
        root = (Path(config.path) / "static").resolve()
        candidate = (root / wanted).resolve()
        if candidate.is_relative_to(root) and candidate.is_file():
            route.fulfill(path=candidate)
            return
    route.fulfill(status=404, body="not a static file")


@pytest.fixture
def new_page(browser: Browser, live_server: LiveServer) -> Iterator[Callable[..., Page]]:
    """Open a fresh browser context (own cookies and storage) on the live server; closed afterwards."""
    contexts = []

    def open_page(**options: Any) -> Page:
        context = browser.new_context(viewport=VIEWPORT, base_url=live_server.url, **options)
        context.set_default_timeout(TIMEOUT_MS)
        context.route(f"**{STATIC_URL}**", _serve_static)
        contexts.append(context)
        return context.new_page()

    yield open_page
    for context in contexts:
        context.close()


@pytest.fixture
def page(new_page: Callable[..., Page]) -> Page:
    return new_page()


@pytest.fixture
def superuser(settings: Any) -> User:
    """An operator with every permission. A fast hasher: the default one costs a second per login."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    return User.objects.create_superuser("ops-alice", "alice@example.com", PASSWORD)


def log_in(page: Page, user: User, password: str = PASSWORD) -> None:
    """Fill the admin's login form, as a person would, and land on the admin index."""
    from playwright.sync_api import expect

    page.goto("/admin/login/?next=/admin/")
    page.fill("#id_username", user.get_username())
    page.fill("#id_password", password)
    page.click("input[type=submit]")
    expect(page.locator("#user-tools")).to_contain_text(user.get_username())


@pytest.fixture
def operator_page(page: Page, superuser: User, live_server: LiveServer) -> Page:
    """A page already signed in as ``superuser``: a session cookie instead of the form, which is
    slow on a loaded machine and has tests of its own."""
    client = Client()
    client.force_login(superuser)
    cookie = client.cookies[settings.SESSION_COOKIE_NAME]
    page.context.add_cookies([{"name": cookie.key, "value": cookie.value, "url": live_server.url}])
    return page


class BrowserWorkers(Workers):
    """The worker tests' subprocess pool, minus this process's relaxed async check."""

    def env(self, **overrides: Any) -> dict[str, str]:
        environment = super().env(**overrides)
        environment.pop(ASYNC_UNSAFE, None)
        return environment


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[BrowserWorkers]:
    pool = BrowserWorkers(tmp_path)
    yield pool
    pool.stop_all()
