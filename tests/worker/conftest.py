"""Real worker subprocesses against the test database."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]

#: Fast clocks so leases, heartbeats and sweeps happen within a test's patience.
FAST = {
    "LEASE_DURATION": 3,
    "HEARTBEAT_INTERVAL": 0.5,
    "POLL_INTERVAL": 0.2,
    "MAINTENANCE_INTERVAL": 0.5,
    "RETRY": {"MAX_ATTEMPTS": 5, "BACKOFF": [0]},
}


def wait_for(condition: Callable[[], Any], timeout: float = 20.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def allow_connections(allowed: bool) -> None:
    """Open or close the test database to new sessions (from the maintenance database: PostgreSQL
    refuses to change this for the database a session is connected to). Our own session stays."""
    import psycopg

    params = connection.get_connection_params()
    params["dbname"] = "postgres"
    name = connection.ops.quote_name(connection.settings_dict["NAME"])
    with psycopg.connect(**params, autocommit=True) as admin:
        admin.execute(f"ALTER DATABASE {name} WITH ALLOW_CONNECTIONS {'true' if allowed else 'false'}")


def database_leg() -> str:
    """The ``BACKWAVE_TEST_DB`` that gets a worker to the database this test process uses (on the
    pgbouncer leg, through the same PgBouncer)."""
    if connection.vendor == "postgresql":
        return "pgbouncer" if os.environ.get("BACKWAVE_TEST_DB") == "pgbouncer" else "postgres"
    return {"mysql": "mariadb"}.get(connection.vendor, connection.vendor)


class Workers:
    """Starts worker subprocesses and makes sure none outlives the test."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.processes: list[subprocess.Popen[str]] = []
        self.settings = dict(FAST)
        #: More environment for the workers started from now on (e.g. another database to use).
        self.environ: dict[str, str] = {}

    def env(self, **overrides: Any) -> dict[str, str]:
        return {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "tests.settings",
            "PYTHONPATH": str(ROOT),
            "BACKWAVE_TEST_DB": database_leg(),
            "BACKWAVE_DB_NAME": str(connection.settings_dict["NAME"]),
            "BACKWAVE_TEST_SETTINGS": json.dumps({**self.settings, **overrides}),
            **self.environ,
        }

    def command(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "django", "backwave_worker", *args]

    def run(self, *args: str, timeout: float = 60.0, **settings: Any) -> subprocess.CompletedProcess[str]:
        """Run a worker to completion (``--burst``, ``--max-jobs``)."""
        return subprocess.run(
            self.command(*args),
            env=self.env(**settings),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def start(self, *args: str, **settings: Any) -> subprocess.Popen[str]:
        log = (self.tmp_path / f"worker-{len(self.processes)}.log").open("w")
        # Its own process group, so that stop_all also reaches the children of a --processes supervisor.
        process = subprocess.Popen(
            self.command(*args),
            env=self.env(**settings),
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.processes.append(process)
        return process

    def log(self, index: int = 0) -> str:
        return (self.tmp_path / f"worker-{index}.log").read_text()

    def logs(self) -> str:
        """Every started worker's log, for an assertion's message (what the workers saw)."""
        return "\n".join(
            f"--- worker-{index}.log ---\n{self.log(index)}" for index in range(len(self.processes))
        )

    def stop_all(self) -> None:
        """SIGKILL every worker started here and whatever children they left (a supervisor's)."""
        for process in self.processes:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Workers]:
    pool = Workers(tmp_path)
    yield pool
    pool.stop_all()
