"""A private, throwaway PostgreSQL cluster for the long-horizon scenario (benchmarks/horizon.py).

The machine's shared server may run with autovacuum off and other work on it; the scenario needs
autovacuum on, ``pg_stat_statements`` loaded and a server whose processes are all its own (their CPU
is measured from ``/proc``). So it runs ``initdb`` into a scratch folder and starts a server on a
free port of its own; :meth:`PrivateCluster.stop` stops it and removes the folder, and the scenario
calls it on every way out (an error, Ctrl-C, SIGTERM).
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

#: Where ``initdb`` and ``pg_ctl`` are looked for when they are not on ``PATH``.
BIN_DIRS = (
    "/usr/local/bin",
    "/usr/lib/postgresql/17/bin",
    "/usr/lib/postgresql/16/bin",
    "/usr/lib/postgresql/15/bin",
)
#: The server's settings: autovacuum on (the default, said out loud), statement statistics and I/O
#: timing for the per-phase figures, and room for the worker's connections.
SETTINGS = {
    "listen_addresses": "127.0.0.1",
    "autovacuum": "on",
    "shared_preload_libraries": "pg_stat_statements",
    "pg_stat_statements.track_planning": "on",
    "track_io_timing": "on",
    "max_connections": "100",
}


def _binary(name: str) -> str:
    found = shutil.which(name)
    if found:
        return found
    for folder in BIN_DIRS:
        if (Path(folder) / name).exists():
            return str(Path(folder) / name)
    raise RuntimeError(f"no {name} found (PATH, {', '.join(BIN_DIRS)}): the scenario needs a private cluster")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def server_options(port: int, socket_dir: Path, settings: dict[str, str]) -> str:
    """The ``pg_ctl -o`` string: the port, the socket folder and ``-c name=value`` per setting."""
    return " ".join(
        [f"-p {port}", f"-k {socket_dir}", *(f"-c {name}={value}" for name, value in settings.items())]
    )


class PrivateCluster:
    """``initdb`` + ``pg_ctl start`` in a temporary folder; run as the ``postgres`` user when root
    (``initdb`` refuses to run as root). Use as a context manager, or call :meth:`stop`."""

    def __init__(self, port: int | None = None, settings: dict[str, str] | None = None) -> None:
        self.port = port or free_port()
        self.settings = {**SETTINGS, **(settings or {})}
        self.folder = Path(tempfile.mkdtemp(prefix="bw_horizon_pg_"))
        self.datadir = self.folder / "data"
        self.log = self.folder / "server.log"
        self.run_as: list[str] = []
        if os.geteuid() == 0:
            pwd.getpwnam("postgres")
            self.run_as = ["runuser", "-u", "postgres", "--"]
            shutil.chown(self.folder, "postgres", "postgres")
        self.started = False

    def _run(self, *command: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*self.run_as, *command], capture_output=True, text=True, check=check, timeout=120
        )

    def start(self) -> None:
        self._run(_binary("initdb"), "-D", str(self.datadir), "-A", "trust", "-U", "postgres", "--no-sync")
        options = server_options(self.port, self.folder, self.settings)
        self.started = True  # from here on, stop() has a server to stop
        result = self._run(
            _binary("pg_ctl"),
            "-D",
            str(self.datadir),
            "-l",
            str(self.log),
            "-o",
            options,
            "-w",
            "start",
            check=False,
        )
        if result.returncode != 0:
            log = self.log.read_text()[-2000:] if self.log.exists() else ""
            raise RuntimeError(
                f"the private PostgreSQL on port {self.port} did not start: {result.stderr}{log}"
            )

    def postmaster_pid(self) -> int:
        """The server's main process (the first line of ``postmaster.pid``)."""
        return int((self.datadir / "postmaster.pid").read_text().split("\n", 1)[0])

    def stop(self) -> None:
        if self.started:
            self._run(_binary("pg_ctl"), "-D", str(self.datadir), "-m", "fast", "-w", "stop", check=False)
            self.started = False
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> PrivateCluster:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
