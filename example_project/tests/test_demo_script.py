"""``scripts/demo.sh`` (``make demo``): the admin and a worker come up together and stop cleanly.

Stopping is tested the ways it happens: Ctrl-C (SIGINT to the terminal's foreground process
group), SIGTERM to the process group of ``make demo`` (a process manager, ``timeout``, ``kill --
-PGID``: the script then gets the signal twice, once from the group and once passed on by make),
and SIGINT to a demo started with SIGINT ignored (``nohup``, or ``&`` in a script, which is also
how ``make test`` may have been started).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "demo.sh"
#: ``make demo`` in the running virtualenv; ``-o`` keeps make from (re)building that virtualenv.
MAKE_DEMO = ["make", "-C", str(REPO), "-o", f"{sys.prefix}/.stamp", "demo", f"VENV={sys.prefix}"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(condition: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def manage_py_children(pid: int) -> dict[str, int]:
    """The ``manage.py`` subcommands started under a process (its children, or for ``make`` its
    grandchildren), by name (runserver, backwave_worker)."""
    listing = subprocess.run(["ps", "-e", "-o", "pid=,ppid=,args="], capture_output=True, text=True)
    parents: dict[int, int] = {}
    commands: dict[int, list[str]] = {}
    for line in listing.stdout.splitlines():
        child, parent, *args = line.split()
        parents[int(child)] = int(parent)
        commands[int(child)] = args

    def descends(process: int) -> bool:
        for _ in range(3):
            process = parents.get(process, 0)
            if process == pid:
                return True
        return False

    found: dict[str, int] = {}
    for process, words in commands.items():
        if "manage.py" in words and descends(process):
            found[words[words.index("manage.py") + 1]] = process
    return found


def restore_sigint() -> None:
    """Start a child with SIGINT at its default, as a terminal's foreground job has it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def ignore_sigint() -> None:
    """Start a child with SIGINT ignored, as ``nohup`` or ``&`` in a non-interactive shell do."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


class Demo:
    """``scripts/demo.sh`` on a scratch database of the kind the tests run on.

    On SQLite (the demo's default) that is a file in ``tmp_path``; on PostgreSQL a database named
    after the test settings' one with ``_demo`` appended, created empty and dropped afterwards.
    """

    def __init__(self, tmp_path: Path) -> None:
        self.port = free_port()
        self.log = tmp_path / "demo.log"
        self.process: subprocess.Popen[bytes] | None = None
        database = settings.DATABASES["default"]
        self.postgres = database["ENGINE"] == "django.db.backends.postgresql"
        if self.postgres:
            self.pg_params = {
                "host": database["HOST"] or "127.0.0.1",
                "port": int(database["PORT"] or 5432),
                "user": database["USER"],
                "password": database["PASSWORD"],
            }
            self.pg_name = f"{database['NAME']}_demo"
            self._admin(f'DROP DATABASE IF EXISTS "{self.pg_name}"', f'CREATE DATABASE "{self.pg_name}"')
            user = f"{database['USER']}:{database['PASSWORD']}" if database["PASSWORD"] else database["USER"]
            self.url = f"postgres://{user}@{self.pg_params['host']}:{self.pg_params['port']}/{self.pg_name}"
        else:
            self.sqlite_file = tmp_path / "demo.sqlite3"
            self.url = f"sqlite:///{self.sqlite_file}"

    def _admin(self, *statements: str) -> None:
        import psycopg

        with psycopg.connect(dbname="postgres", autocommit=True, **self.pg_params) as connection:
            for statement in statements:
                connection.execute(statement)

    def start(
        self, command: list[str] | None = None, *, sigint_ignored: bool = False
    ) -> subprocess.Popen[bytes]:
        """Run the script (or ``command``, e.g. ``make demo``) in a session of its own."""
        env = {
            **os.environ,
            "PORT": str(self.port),
            "DATABASE_URL": self.url,
            "BACKWAVE_VENV": sys.prefix,
            "DEMO_ORDERS": "60",
        }
        with self.log.open("wb") as log:
            # A session of its own, as a terminal's foreground job would be. SIGINT is at its
            # default there unless asked otherwise, whatever this process was started with.
            self.process = subprocess.Popen(
                command or ["bash", str(SCRIPT)],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=ignore_sigint if sigint_ignored else restore_sigint,
            )
        return self.process

    def wait_for_banner(self, process: subprocess.Popen[bytes]) -> None:
        wait_for(
            lambda: (
                f"Admin: http://127.0.0.1:{self.port}/admin/  user: admin  password: " in self.output()
                or process.poll() is not None
            ),
            240,
            "the admin banner",
        )
        assert process.poll() is None, self.output()

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def count(self, sql: str) -> int:
        """A ``SELECT count(*)`` on the demo's database; 0 while its tables do not exist yet."""
        if self.postgres:
            import psycopg

            try:
                with psycopg.connect(dbname=self.pg_name, **self.pg_params) as connection:
                    row = connection.execute(sql).fetchone()
            except psycopg.errors.UndefinedTable:
                return 0
            return int(row[0]) if row else 0
        if not self.sqlite_file.exists():
            return 0
        try:
            with sqlite3.connect(self.sqlite_file, timeout=1) as connection:
                return int(connection.execute(sql).fetchone()[0])
        except sqlite3.OperationalError:  # not migrated yet, or busy
            return 0

    def stop(self) -> None:
        """Leave nothing running, whatever state a failed test left the demo in.

        The script's children run in process groups of their own, so they are stopped through
        the script's trap (SIGTERM) or, failing that, killed one by one.
        """
        if self.process is not None and self.process.poll() is None:
            started = manage_py_children(self.process.pid).values()
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                for pid in started:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(pid, signal.SIGKILL)
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        if self.postgres:
            self._admin(f'DROP DATABASE IF EXISTS "{self.pg_name}" WITH (FORCE)')


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[Demo]:
    running = Demo(tmp_path)
    yield running
    running.stop()


def worker_transitions(state: int) -> str:
    return f"SELECT count(*) FROM backwave_django_jobtransition WHERE actor LIKE 'demo:%' AND state = {state}"


def test_demo_serves_the_admin_runs_the_worker_and_stops_both_on_ctrl_c(demo: Demo) -> None:
    process = demo.start()
    url = f"http://127.0.0.1:{demo.port}/admin/login/"
    demo.wait_for_banner(process)
    with urllib.request.urlopen(url, timeout=5) as response:
        assert response.status == 200
    password = demo.output().split("user: admin  password: ")[1].split()[0]
    assert password != "unchanged"
    # The worker runs jobs (Succeeded by a "demo:..." worker) and quarantines the old-signature ones.
    wait_for(lambda: demo.count(worker_transitions(3)) > 0, 120, "a job run by the demo worker")
    wait_for(lambda: demo.count(worker_transitions(6)) >= 3, 120, "the worker to quarantine old payloads")
    started_children = manage_py_children(process.pid)
    assert set(started_children) == {"runserver", "backwave_worker"}, started_children

    started = time.monotonic()
    os.killpg(process.pid, signal.SIGINT)  # what Ctrl-C does: the terminal's foreground process group
    assert process.wait(timeout=30) == 0, demo.output()
    assert time.monotonic() - started < 15
    wait_for(lambda: not any(alive(pid) for pid in started_children.values()), 5, "both children to exit")
    assert "demo: stopped." in demo.output()
    assert demo.count("SELECT count(*) FROM backwave_django_workernode") == 0  # the worker deregistered


def test_demo_refuses_a_port_that_is_not_a_number() -> None:
    result = subprocess.run(
        ["bash", str(SCRIPT)],
        env={**os.environ, "PORT": "eighty", "BACKWAVE_VENV": sys.prefix},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2
    assert "PORT must be a port number, got 'eighty'" in result.stderr


def stop_and_check(demo: Demo, process: subprocess.Popen[bytes], how: signal.Signals, *, twice: bool) -> int:
    """Signal the demo's process group as ``how`` (``twice``: again while it is stopping, as an
    impatient second Ctrl-C or a process manager's second SIGTERM would), check that both children
    are gone and the script finished its cleanup; the exit code."""
    children = manage_py_children(process.pid)
    assert set(children) == {"runserver", "backwave_worker"}, (children, demo.output())
    started = time.monotonic()
    os.killpg(process.pid, how)
    if twice:
        wait_for(lambda: "demo: stopping" in demo.output(), 10, "the cleanup to start")
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, how)
    status = process.wait(timeout=30)
    wait_for(lambda: not any(alive(pid) for pid in children.values()), 20, "both children to exit")
    assert time.monotonic() - started < 15, demo.output()
    wait_for(lambda: "demo: stopped." in demo.output(), 5, "the script to finish its cleanup")
    with socket.socket() as probe:  # nothing serves the port any more
        assert probe.connect_ex(("127.0.0.1", demo.port)) != 0
    return status


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_make_demo_stops_both_processes_on_signals_to_its_process_group(
    demo: Demo, how: signal.Signals
) -> None:
    process = demo.start(MAKE_DEMO)
    demo.wait_for_banner(process)
    status = stop_and_check(demo, process, how, twice=True)
    # The script exits 0; make itself, signalled too, ends by that signal once its child is done.
    assert status in (0, -how, 128 + how), (status, demo.output())
    assert "MariaDB" not in demo.output()  # the demo never needs the MariaDB driver


def test_demo_started_with_sigint_ignored_still_stops_on_sigint(demo: Demo) -> None:
    process = demo.start(sigint_ignored=True)
    demo.wait_for_banner(process)
    assert stop_and_check(demo, process, signal.SIGINT, twice=False) == 0
