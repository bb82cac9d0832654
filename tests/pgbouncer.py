"""A private PgBouncer for the tests, in transaction pooling mode, in front of the test PostgreSQL.

Each :class:`PgBouncer` writes its own ``pgbouncer.ini`` and ``userlist.txt`` to a scratch
directory, listens on a free port of 127.0.0.1 and forwards every database name to the same
database on PostgreSQL (``PGHOST``/``PGPORT``, default ``127.0.0.1:5432``). It runs the Debian
package's ``pgbouncer`` binary; without it the tests that need one are skipped with a loud reason,
and fail under ``CI=true``.

It is used two ways: the ``pgbouncer`` fixture (tests/conftest.py) gives a test its own, which the
test may kill and start again; and the ``BACKWAVE_TEST_DB=pgbouncer`` leg of scripts/run_tests.sh
points the whole test session's ``default`` alias at one (see :func:`start_leg`).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

#: Where Debian puts the binary (not on a non-root PATH).
DEBIAN_BINARY = "/usr/sbin/pgbouncer"
#: The environment variable that carries the leg's port to worker subprocesses (tests/settings.py).
PORT_ENV = "BACKWAVE_PGBOUNCER_PORT"

MISSING = "pgbouncer not found (install the Debian package: apt-get install pgbouncer)"


def binary() -> str:
    """The pgbouncer binary; skips the test loudly without one, or fails it under ``CI=true``."""
    found = shutil.which("pgbouncer") or (DEBIAN_BINARY if os.access(DEBIAN_BINARY, os.X_OK) else None)
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{MISSING}; under CI=true the PgBouncer tests fail without it.", pytrace=False)
        pytest.skip(f"{MISSING}: the PgBouncer tests were SKIPPED, not passed")
    return found


def version(path: str) -> str:
    """``PgBouncer 1.18.0``: the first line of ``pgbouncer --version``."""
    return subprocess.run([path, "--version"], capture_output=True, text=True, check=False).stdout.split("\n")[0]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class PgBouncer:
    """One pgbouncer process: :meth:`start`, :meth:`kill` (and start again on the same port),
    :meth:`close` (stop it and remove its directory)."""

    def __init__(self, *, pool_size: int = 20) -> None:
        self.binary = binary()
        self.version = version(self.binary)
        self.host = "127.0.0.1"
        self.port = free_port()
        self.directory = Path(tempfile.mkdtemp(prefix="backwave-pgbouncer-"))
        self.process: subprocess.Popen[bytes] | None = None
        self._write_config(pool_size)

    def _write_config(self, pool_size: int) -> None:
        user = os.environ.get("PGUSER", "postgres")
        password = os.environ.get("PGPASSWORD", "")
        target = f"host={os.environ.get('PGHOST', '127.0.0.1')} port={os.environ.get('PGPORT', '5432')}"
        if password:
            target += f" password={password}"
        lines = [
            "[databases]",
            f"* = {target}",
            "",
            "[pgbouncer]",
            f"listen_addr = {self.host}",
            f"listen_port = {self.port}",
            "unix_socket_dir =",
            "auth_type = trust",
            f"auth_file = {self.directory / 'userlist.txt'}",
            "pool_mode = transaction",
            "max_client_conn = 500",
            f"default_pool_size = {pool_size}",
            # A statement that waits this long is cancelled: a test that relies on a session (a
            # session-level SET, say) fails instead of hanging.
            "query_timeout = 60",
            f"logfile = {self.log_path}",
            f"pidfile = {self.directory / 'pgbouncer.pid'}",
        ]
        owner = None
        if os.geteuid() == 0:
            # pgbouncer refuses to run as root; it switches to this user itself.
            owner = pwd.getpwnam("postgres") if _has_user("postgres") else pwd.getpwnam("nobody")
            lines.append(f"user = {owner.pw_name}")
        (self.directory / "pgbouncer.ini").write_text("\n".join(lines) + "\n")
        (self.directory / "userlist.txt").write_text(f'"{user}" "{password}"\n')
        if owner is not None:
            for path in (self.directory, *self.directory.iterdir()):
                os.chown(path, owner.pw_uid, owner.pw_gid)

    @property
    def log_path(self) -> Path:
        return self.directory / "pgbouncer.log"

    def log(self) -> str:
        return self.log_path.read_text() if self.log_path.exists() else ""

    def start(self, timeout: float = 20.0) -> None:
        """Start pgbouncer and wait until it forwards a connection to PostgreSQL."""
        assert self.process is None, "already running"
        self.process = subprocess.Popen(
            [self.binary, str(self.directory / "pgbouncer.ini")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"pgbouncer exited with status {self.process.returncode}:\n{self.log()}")
            try:
                self.connect().close()
                return
            except Exception as exc:
                if time.monotonic() > deadline:
                    self.kill()
                    raise RuntimeError(f"pgbouncer did not accept connections in {timeout} s:\n{self.log()}") from exc
                time.sleep(0.05)

    def connect(self, dbname: str = "postgres", **options: Any) -> Any:
        """A psycopg connection through this pgbouncer."""
        import psycopg

        return psycopg.connect(
            host=self.host,
            port=self.port,
            user=os.environ.get("PGUSER", "postgres"),
            password=os.environ.get("PGPASSWORD") or None,
            dbname=dbname,
            connect_timeout=3,
            **options,
        )

    def kill(self) -> None:
        """Kill pgbouncer at once (SIGKILL): every client and server connection through it drops."""
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)
            self.process = None

    def close(self) -> None:
        self.kill()
        shutil.rmtree(self.directory, ignore_errors=True)


def _has_user(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


# --- The BACKWAVE_TEST_DB=pgbouncer leg ----------------------------------------------------------


_session: PgBouncer | None = None


def leg_active() -> bool:
    return os.environ.get("BACKWAVE_TEST_DB") == "pgbouncer"


def start_leg() -> None:
    """Start the session's pgbouncer and point the ``default`` alias at it (before the test database
    is created through it). Worker subprocesses find its port in ``BACKWAVE_PGBOUNCER_PORT``."""
    global _session
    from django.conf import settings

    _session = PgBouncer(pool_size=30)
    _session.start()
    os.environ[PORT_ENV] = str(_session.port)
    settings.DATABASES["default"]["PORT"] = str(_session.port)


def end_leg() -> None:
    """Stop the session's pgbouncer, if it runs, and point ``default`` at PostgreSQL itself, so
    that the test database can be dropped: pgbouncer keeps idle server sessions on it open."""
    global _session
    if _session is None:
        return
    from django.conf import settings
    from django.db import connections

    connections.close_all()
    _session.close()
    _session = None
    settings.DATABASES["default"]["PORT"] = os.environ.get("PGPORT", "5432")
