"""PostgreSQL plumbing for the runner: connection settings, scratch databases, a private server.

Long runs restart PostgreSQL. They never restart the machine's shared server (other test runs
use it): they start a private, throwaway cluster on its own port with the local ``initdb`` and
restart that one. Where no ``initdb`` can be run, restarts are skipped with a logged note.
"""

from __future__ import annotations

import glob
import logging
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger("torture")


@dataclass(frozen=True)
class Server:
    host: str
    port: int
    user: str
    password: str

    @classmethod
    def from_env(cls) -> Server:
        return cls(
            host=os.environ.get("PGHOST", "127.0.0.1"),
            port=int(os.environ.get("PGPORT", "5432")),
            user=os.environ.get("PGUSER", "postgres"),
            password=os.environ.get("PGPASSWORD", ""),
        )

    def env(self) -> dict[str, str]:
        return {"PGHOST": self.host, "PGPORT": str(self.port), "PGUSER": self.user, "PGPASSWORD": self.password}

    def connect(self, dbname: str = "postgres", timeout: int = 5) -> object:
        import psycopg

        return psycopg.connect(
            host=self.host,
            port=self.port,
            user=self.user,
            password=self.password or None,
            dbname=dbname,
            autocommit=True,
            connect_timeout=timeout,
        )

    def wait_ready(self, timeout: float = 60.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                conn = self.connect()
            except Exception:
                time.sleep(0.3)
                continue
            conn.close()  # type: ignore[attr-defined]
            return True
        return False

    def recreate_database(self, name: str) -> None:
        conn = self.connect()
        try:
            self._drop(conn, name)
            conn.execute(f'CREATE DATABASE "{name}"')  # type: ignore[attr-defined]
        finally:
            conn.close()  # type: ignore[attr-defined]

    def drop_database(self, name: str) -> None:
        conn = self.connect()
        try:
            self._drop(conn, name)
        finally:
            conn.close()  # type: ignore[attr-defined]

    @staticmethod
    def _drop(conn: object, name: str) -> None:
        conn.execute(  # type: ignore[attr-defined]
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            [name],
        )
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')  # type: ignore[attr-defined]


def _bindir() -> Path | None:
    try:
        out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True, check=True).stdout.strip()
        if (Path(out) / "initdb").exists():
            return Path(out)
    except (OSError, subprocess.CalledProcessError):
        pass
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(found[-1]).parent if found else None


class PrivateCluster:
    """A throwaway PostgreSQL cluster in a temporary directory, on its own port, for restarts."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.bindir = _bindir()
        self.datadir = Path(tempfile.mkdtemp(prefix="bw_torture_pg_"))
        self.log = self.datadir.with_suffix(".log")
        self.restarts = 0
        self._run_as: list[str] = []
        if os.geteuid() == 0:
            # initdb refuses to run as root: run the server as the postgres system user.
            pwd.getpwnam("postgres")
            self._run_as = ["runuser", "-u", "postgres", "--"]
            shutil.chown(self.datadir, "postgres", "postgres")
            self.log.touch()
            shutil.chown(self.log, "postgres", "postgres")

    @property
    def server(self) -> Server:
        return Server(host="127.0.0.1", port=self.port, user="postgres", password="")

    def _ctl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        assert self.bindir is not None
        return subprocess.run(
            [*self._run_as, str(self.bindir / "pg_ctl"), "-D", str(self.datadir), "-l", str(self.log), *args],
            capture_output=True,
            text=True,
            check=check,
            timeout=120,
        )

    def start(self) -> None:
        if self.bindir is None:
            raise RuntimeError("no initdb found (pg_config --bindir, /usr/lib/postgresql/*/bin)")
        subprocess.run(
            [*self._run_as, str(self.bindir / "initdb"), "-D", str(self.datadir), "-A", "trust", "-U", "postgres"],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        )
        options = f"-p {self.port} -k {self.datadir} -c listen_addresses=127.0.0.1 -c max_connections=200"
        self._ctl("-o", options, "-w", "start")
        if not self.server.wait_ready():
            raise RuntimeError(f"private PostgreSQL on port {self.port} did not come up; see {self.log}")

    def restart(self, *, immediate: bool) -> float:
        """Restart the server (``immediate`` is a crash: recovery replays the WAL); returns the downtime."""
        started = time.monotonic()
        self._ctl("-m", "immediate" if immediate else "fast", "-w", "restart")
        self.server.wait_ready()
        self.restarts += 1
        return time.monotonic() - started

    def stop(self) -> None:
        if self.bindir is not None:
            self._ctl("-m", "fast", "-w", "stop", check=False)
        shutil.rmtree(self.datadir, ignore_errors=True)
        self.log.unlink(missing_ok=True)
