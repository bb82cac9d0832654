#!/usr/bin/env python
"""Take the documentation's screenshots of every admin console page (PNG, 1280 x 800).

    .venv/bin/python scripts/screenshots.py [--out docs/images] [--orders 1100] [--db PATH]

It builds the example project on a throwaway SQLite database (``manage.py migrate``, then
``manage.py backwave_demo``: hours of simulated shop activity, with every state and real
transition logs), starts ``runserver`` and a worker on it so the console shows live workers and
running jobs, signs in with Playwright driving Debian's chromium (``/usr/bin/chromium``; nothing
is downloaded) and saves, one per page of the console (docs/admin.md shows each):

    dashboard.png        the Dashboard: counts, health, throughput (dashboard-dark.png: dark theme)
    jobs.png             the job list
    retrying.png         the Retrying view: jobs waiting for their next try, each with its last failure
    failures.png         the job list's Dead-Lettered tab, each job with its cause
    requeue-all.png      the confirmation of "Requeue all … Dead-Lettered"
    job-detail.png       a Dead-Lettered job: state, cause and last failure, then its attempts
    queues.png           the Queues page: status, latency, throughput, jobs by state, controls
    schedules.png        the recurring schedules
    schedule-form.png    adding a schedule: the form, with the registered jobs to choose from
    workers.png          the workers and what each is running
    worker.png           one worker's page: its queues as a list, its times, what it runs
    audit.png            the operator audit

``--db PATH`` keeps the seeded SQLite database at PATH (seeded only when the file does not exist
yet), so the pictures can be retaken without seeding again. Otherwise nothing outside a temporary
folder is touched except the output folder. Exits 0 when every
image was written, 1 (with the server's and the worker's logs) when something went wrong.
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from playwright.sync_api import Page, ViewportSize

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "example_project"
CHROMIUM = Path("/usr/bin/chromium")
VIEWPORT: ViewportSize = {"width": 1280, "height": 800}
USERNAME = "admin"
#: Every queue the demo uses, as scripts/demo.sh serves them.
QUEUES = "billing,emails,integrations,reports,catalogue,maintenance,exports,default"
#: Images bigger than this are reported: they bloat the repository and the docs.
MAX_BYTES = 400_000
TIMEOUT_MS = 30_000
#: For a reused database: give the admin user this run's password.
RESET_PASSWORD = (
    "import os; from django.contrib.auth import get_user_model; "
    f"user = get_user_model().objects.get(username={USERNAME!r}); "
    "user.set_password(os.environ['DJANGO_SUPERUSER_PASSWORD']); user.save()"
)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def manage(env: dict[str, str], *args: str) -> str:
    """Run ``example_project/manage.py`` to completion; its output, or SystemExit with it."""
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=EXAMPLE,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"manage.py {' '.join(args)} failed:\n{done.stdout}{done.stderr}")
    return done.stdout


def wait_until_serving(url: str, server: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"runserver exited with {server.returncode} before it served {url}")
        try:
            with urllib.request.urlopen(url, timeout=5):
                return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(0.3)
    raise SystemExit(f"runserver did not answer {url} within {timeout:.0f} s")


@contextmanager
def background(command: list[str], env: dict[str, str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A child process for the length of the block; SIGINT, then SIGKILL if it lingers."""
    with log.open("wb") as output:
        process = subprocess.Popen(command, cwd=EXAMPLE, env=env, stdout=output, stderr=subprocess.STDOUT)
        try:
            yield process
        finally:
            if process.poll() is None:
                process.send_signal(signal.SIGINT)
                try:
                    process.wait(15)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(5)


def shoot(page: Page, out: Path, name: str) -> Path:
    path = out / name
    page.screenshot(path=str(path), full_page=False, animations="disabled", caret="hide")
    size = path.stat().st_size
    print(f"  {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}  {size / 1000:.0f} kB")
    if size > MAX_BYTES:
        print(f"  warning: {name} is over {MAX_BYTES // 1000} kB", file=sys.stderr)
    return path


def hold_still(page: Page) -> None:
    """Pause a live page's refresh (the choice lasts for the browser tab), so the picture holds."""
    toggle = page.get_by_test_id("bw-refresh-toggle")
    if toggle.is_visible() and toggle.get_attribute("aria-pressed") == "false":
        toggle.click()


def take_screenshots(base_url: str, password: str, out: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=["--no-sandbox", "--disable-gpu"]
        )
        context = browser.new_context(viewport=VIEWPORT, base_url=base_url, device_scale_factor=1)
        context.set_default_timeout(TIMEOUT_MS)
        # Fold the admin's navigation sidebar (its « button; the admin keeps the choice in
        # localStorage) so the tables get the width.
        context.add_init_script("window.localStorage.setItem('django.admin.navSidebarIsOpen', 'false')")
        page = context.new_page()

        page.goto("/admin/login/?next=/admin/")
        page.fill("#id_username", USERNAME)
        page.fill("#id_password", password)
        page.click("input[type=submit]")
        expect(page.locator("#user-tools")).to_be_visible()

        # The worker needs a few seconds to register and lease the long index rebuild.
        page.goto("/admin/backwave_django/dashboard/")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not page.get_by_test_id("bw-executing-row").count():
            page.wait_for_timeout(1_000)
            page.reload()
        hold_still(page)
        shoot(page, out, "dashboard.png")
        page.evaluate("document.documentElement.dataset.theme = 'dark'")
        shoot(page, out, "dashboard-dark.png")
        page.evaluate("document.documentElement.dataset.theme = 'light'")

        page.goto("/admin/backwave_django/jobrecord/")
        hold_still(page)
        shoot(page, out, "jobs.png")

        page.get_by_test_id("bw-retrying").click()
        expect(page.get_by_test_id("bw-failures-blurb")).to_be_visible()
        shoot(page, out, "retrying.png")

        page.get_by_test_id("bw-failures-dead-lettered").click()
        expect(page.get_by_test_id("bw-failures-blurb")).to_be_visible()
        shoot(page, out, "failures.png")
        failures_url = page.url

        page.get_by_test_id("bw-all-requeue").click()
        expect(page.get_by_test_id("bw-confirm-all")).to_be_visible()
        shoot(page, out, "requeue-all.png")  # the confirmation only: nothing is requeued
        page.goto(failures_url)

        # A Dead-Lettered job that was retried: a timeline with failures to show.
        rows = page.locator("#result_list tbody tr.bw-has-detail")
        retried = rows.filter(has_not_text="attempt 1 / 1")
        row = retried.first if retried.count() else rows.first
        row.locator("a.bw-job-link").click()
        # The page leads with the answer: state, cause, last failure, then the attempts.
        expect(page.get_by_test_id("bw-summary")).to_be_visible()
        expect(page.get_by_test_id("bw-attempts")).to_be_visible()
        shoot(page, out, "job-detail.png")

        page.goto("/admin/backwave_django/queuesettings/")
        hold_still(page)
        shoot(page, out, "queues.png")

        page.goto("/admin/backwave_django/recurringschedule/")
        shoot(page, out, "schedules.png")

        page.goto("/admin/backwave_django/recurringschedule/add/")
        shoot(page, out, "schedule-form.png")

        page.goto("/admin/backwave_django/workernode/")
        hold_still(page)
        shoot(page, out, "workers.png")

        page.get_by_test_id("bw-worker-page-link").first.click()
        expect(page.get_by_test_id("bw-worker-queues")).to_be_visible()
        shoot(page, out, "worker.png")

        page.goto("/admin/backwave_django/operatoraudit/")
        shoot(page, out, "audit.png")
        browser.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images", help="where to write the PNGs")
    parser.add_argument(
        "--orders", default="1100", help="orders in the seeded history (backwave_demo --orders)"
    )
    parser.add_argument("--db", type=Path, help="keep the SQLite database here; seed it only if it is new")
    options = parser.parse_args()
    if not CHROMIUM.exists():
        print(f"error: {CHROMIUM} is missing (apt-get install chromium)", file=sys.stderr)
        return 2
    try:
        import playwright  # noqa: F401
    except ImportError:
        print("error: the 'playwright' package is missing (pip install -e '.[dev]')", file=sys.stderr)
        return 2
    out: Path = options.out.resolve()
    out.mkdir(parents=True, exist_ok=True)

    folder = Path(tempfile.mkdtemp(prefix="backwave-screenshots-"))
    database: Path = options.db.resolve() if options.db else folder / "db.sqlite3"
    seeded = database.exists()
    password = secrets.token_urlsafe(16)
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{database}",
        "DEBUG": "true",  # runserver serves the admin's static files only with DEBUG on
        "DJANGO_SUPERUSER_PASSWORD": password,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    env.pop("DJANGO_SETTINGS_MODULE", None)  # manage.py picks the example project's settings
    port = free_port()
    failed = False
    try:
        manage(env, "migrate", "--verbosity", "0")
        if seeded:
            print(f"Reusing the demo data in {database}")
            manage(env, "shell", "-c", RESET_PASSWORD)
        else:
            print(f"Seeding the example project into {database} …")
            manage(
                env, "createsuperuser", "--noinput", "--username", USERNAME, "--email", "admin@shop.example"
            )
            print(manage(env, "backwave_demo", "--orders", options.orders).rstrip())
        worker_command = [sys.executable, "manage.py", "backwave_worker", "--queues", QUEUES]
        server_command = [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"]
        with (
            background(worker_command, env, folder / "worker.log"),
            background(server_command, env, folder / "server.log") as server,
        ):
            base_url = f"http://127.0.0.1:{port}"
            wait_until_serving(f"{base_url}/admin/login/", server)
            print(f"Screenshots of {base_url} into {out}:")
            take_screenshots(base_url, password, out)
    except BaseException:
        failed = True
        for log in ("server.log", "worker.log"):
            if (folder / log).exists():
                print(f"--- {log} (last 40 lines)", file=sys.stderr)
                print(
                    "\n".join((folder / log).read_text(errors="replace").splitlines()[-40:]), file=sys.stderr
                )
        raise
    finally:
        if not failed:
            shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
