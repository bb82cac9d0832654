"""``manage.py backwave`` run as a real subprocess against the test database.

The tests are transactional (``django_db(transaction=True)``) so that the rows they write are
committed and the subprocess sees them, as a worker started by ``tests/worker`` does. Each run
costs a Django start-up (about half a second), so a test groups several assertions per run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

import pytest

from ..worker.conftest import ROOT, database_leg

#: The operating-system user the subprocesses run as, as far as ``getpass.getuser()`` can tell.
OS_USER = "alice-ops"
ACTOR = f"cli:{OS_USER}"


@dataclass(frozen=True)
class Run:
    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    def json(self, status: int = 0) -> Any:
        """stdout parsed as JSON, once the run exited with ``status``."""
        assert self.returncode == status, self
        return json.loads(self.stdout)

    @property
    def lines(self) -> list[str]:
        return self.stdout.splitlines()


class Cli:
    """Runs ``python -m django backwave ...`` against this test's database."""

    def __init__(self) -> None:
        #: ``BACKWAVE`` settings of the runs from now on (JSON, read by tests/settings.py).
        self.settings: dict[str, Any] = {}
        self.environ: dict[str, str] = {}

    def __call__(self, *args: str, **environ: str) -> Run:
        from django.db import connection

        env = {
            # getpass.getuser() reads LOGNAME first: the runs act as OS_USER.
            **{k: v for k, v in os.environ.items() if k not in ("USER", "LOGNAME", "LNAME", "USERNAME")},
            "DJANGO_SETTINGS_MODULE": "tests.settings",
            "PYTHONPATH": str(ROOT),
            "BACKWAVE_TEST_DB": database_leg(),
            "BACKWAVE_DB_NAME": str(connection.settings_dict["NAME"]),
            "BACKWAVE_TEST_SETTINGS": json.dumps(self.settings),
            "LOGNAME": OS_USER,
            **self.environ,
            **environ,
        }
        done = subprocess.run(
            [sys.executable, "-m", "django", "backwave", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            cwd=ROOT,
        )
        run = Run(tuple(args), done.returncode, done.stdout, done.stderr)
        # No user error ever ends in a Python traceback.
        assert "Traceback" not in done.stderr, run
        return run


@pytest.fixture
def cli() -> Cli:
    return Cli()
