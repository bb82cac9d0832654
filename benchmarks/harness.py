"""Plumbing for the measurements: the scratch database, worker subprocesses, polling, RSS.

Every process the harness starts is registered in :class:`Processes` and stopped in
:meth:`Processes.stop_all`, which ``run.py`` calls on the way out whatever happened (an error,
Ctrl-C, SIGTERM). Worker subprocesses get a session of their own, so a supervisor and its children
can be killed together by process group if SIGTERM is not enough.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.context
import os
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import psycopg
from psycopg import sql

from . import raw

ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = ROOT / "benchmarks" / "results"
LOG_DIR = RESULTS_DIR / "logs"
#: The tables a reset empties (jobs and everything hanging off them, and the worker rows).
JOB_TABLES = (
    "backwave_django_jobtransition",
    "backwave_django_jobtag",
    "backwave_django_jobdependency",
    "backwave_django_jobrecord",
    "backwave_django_workernode",
    "backwave_django_queuesettings",
    "backwave_django_observer",
    "backwave_django_observerdelivery",
    "backwave_django_observerdeadletter",
    "backwave_django_logsequencer",
    "backwave_django_limitlease",
    "backwave_django_limitstart",
    "backwave_django_limitbucket",
    "backwave_django_limitsettings",
)
POLL_SECONDS = 0.02


def set_results_dir(path: Path) -> None:
    """Write the JSON results and the worker logs under ``path`` instead (``--results-dir``)."""
    global RESULTS_DIR, LOG_DIR
    RESULTS_DIR = path
    LOG_DIR = path / "logs"


def conninfo(dbname: str) -> dict[str, Any]:
    return {
        "host": os.environ.get("PGHOST", "127.0.0.1"),
        "port": os.environ.get("PGPORT", "5432"),
        "user": os.environ.get("PGUSER", "postgres"),
        "password": os.environ.get("PGPASSWORD", ""),
        "dbname": dbname,
    }


def connect(dbname: str) -> psycopg.Connection[Any]:
    return psycopg.connect(**conninfo(dbname), autocommit=True)


def recreate_database(name: str) -> None:
    """DROP and CREATE the scratch database, refusing if anyone else is connected to it."""
    with connect("postgres") as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()", [name]
        ).fetchone()
        others = row[0] if row else 0
        if others:
            raise SystemExit(
                f"Database {name!r} has {others} other connection(s): something else is using it, so the "
                f"harness will not drop it. Stop that, or give the harness another scratch database "
                f"with --db NAME (or BACKWAVE_BENCH_DB=NAME)."
            )
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def set_database_option(name: str, option: str, value: str) -> None:
    """``ALTER DATABASE name SET option = value``: new sessions on the scratch database only."""
    with connect("postgres") as conn:
        conn.execute(
            sql.SQL("ALTER DATABASE {} SET {} = {}").format(
                sql.Identifier(name), sql.Identifier(option), sql.Literal(value)
            )
        )


def drop_database(name: str) -> None:
    with connect("postgres") as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))


def reset_tables(conn: psycopg.Connection[Any]) -> None:
    """Empty the job tables and settle the database: a checkpoint, so no measurement pays for the
    previous one's dirty pages."""
    conn.execute(
        sql.SQL("TRUNCATE {} RESTART IDENTITY").format(sql.SQL(", ").join(map(sql.Identifier, JOB_TABLES)))
    )
    conn.execute("CHECKPOINT")


def settle(conn: psycopg.Connection[Any], *, vacuum: bool = False) -> None:
    """Fresh planner statistics for the job table, then a checkpoint."""
    conn.execute(f"{'VACUUM ' if vacuum else ''}ANALYZE {raw.JOB_TABLE}")
    conn.execute("CHECKPOINT")


def autovacuum_on(conn: psycopg.Connection[Any]) -> bool:
    return bool(scalar(conn, "SHOW autovacuum") == "on")


def scalar(conn: psycopg.Connection[Any], query: str, params: Sequence[Any] = ()) -> Any:
    row = conn.execute(query, params).fetchone()
    return row[0] if row else None


def max_sequence(conn: psycopg.Connection[Any]) -> int:
    return int(scalar(conn, f"SELECT coalesce(max(sequence), 0) FROM {raw.JOB_TABLE}"))


def succeeded_since(conn: psycopg.Connection[Any], after_sequence: int) -> int:
    """Succeeded jobs with ``sequence > after_sequence``: the jobs of the current measurement only
    (a range scan of the primary key, so its cost does not grow with retained rows)."""
    return int(
        scalar(
            conn,
            f"SELECT count(*) FROM {raw.JOB_TABLE} WHERE sequence > %s AND state = 3",
            [after_sequence],
        )
    )


def wait_until(
    probe: Callable[[], bool],
    *,
    timeout: float,
    interval: float = POLL_SECONDS,
    alive: Callable[[], bool] | None = None,
) -> float:
    """Poll ``probe`` every ``interval`` seconds; return ``perf_counter()`` when it first holds.

    Raises ``TimeoutError`` after ``timeout`` s, or ``RuntimeError`` if ``alive`` reports that the
    process doing the work is gone while the probe still fails.
    """
    deadline = time.perf_counter() + timeout
    while True:
        if probe():
            return time.perf_counter()
        if alive is not None and not alive():
            if probe():
                return time.perf_counter()
            raise RuntimeError("the process doing the work exited before it was done")
        if time.perf_counter() >= deadline:
            raise TimeoutError(f"not done after {timeout:.0f} s")
        time.sleep(interval)


def rss_kb(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (peak) of a process, in kB, from /proc/<pid>/status."""
    values: dict[str, int] = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                values[key] = int(rest.split()[0])
    return values


@dataclass(frozen=True)
class ProcStat:
    """What the harness reads from a ``/proc/<pid>/stat`` line."""

    ppid: int
    pgrp: int
    #: User and system CPU ticks of the process (all its threads).
    ticks: int
    #: User and system CPU ticks of its children that ended and were waited for.
    children_ticks: int


def parse_stat(text: str) -> ProcStat:
    """Parse a ``/proc/<pid>/stat`` line (the command name, in parentheses, may hold spaces)."""
    fields = text.rsplit(")", 1)[1].split()  # state, ppid, pgrp, ..., utime (11), stime, cutime, cstime
    return ProcStat(
        ppid=int(fields[1]),
        pgrp=int(fields[2]),
        ticks=int(fields[11]) + int(fields[12]),
        children_ticks=int(fields[13]) + int(fields[14]),
    )


def _cpu_ticks(stat: Path, *, children: bool) -> int:
    """User and system CPU ticks in a ``/proc/<pid>/stat`` (with the waited-for children's)."""
    parsed = parse_stat(stat.read_text())
    return parsed.ticks + (parsed.children_ticks if children else 0)


def postgres_cpu_seconds(postmaster: int | None = None) -> float:
    """User and system CPU of one server's processes: its postmaster ``postmaster`` with the
    children it waited for (so a backend that has exited still counts, in its postmaster's total)
    and its live children. Without ``postmaster``, every ``postgres`` process on this machine.

    One server's, when known: another server on the machine that stops meanwhile (a private
    cluster of another run) takes its CPU with it, which would make the difference negative.
    """
    ticks = 0
    for comm in Path("/proc").glob("[0-9]*/comm"):
        try:
            if not comm.read_text().startswith("postgres"):
                continue
            pid = int(comm.parent.name)
            if postmaster is None or pid == postmaster:
                ticks += _cpu_ticks(comm.parent / "stat", children=True)
            elif parse_stat((comm.parent / "stat").read_text()).ppid == postmaster:
                ticks += _cpu_ticks(comm.parent / "stat", children=False)
        except OSError:  # the process ended meanwhile
            continue
    return ticks / os.sysconf("SC_CLK_TCK")


class CpuMeter:
    """CPU spent between :meth:`__init__` and :meth:`read` by this process's children that
    ended (a worker command, and the processes it forked and waited for) and by PostgreSQL, less
    the server process of ``conn``, the harness's own connection (its count polls). PostgreSQL's
    figure needs the server on this machine, seen in ``/proc``; otherwise it is None."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        process = Path(f"/proc/{conn.info.backend_pid}")
        self.own = process / "stat"
        try:  # (a server elsewhere: the same process id here is some other program, or none)
            self.available = (process / "comm").read_text().startswith("postgres")
            self.postmaster: int | None = parse_stat(self.own.read_text()).ppid
        except OSError:
            self.available, self.postmaster = False, None
        self.children = self._children()
        self.server = self._server() if self.available else 0.0

    @staticmethod
    def _children() -> float:
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime

    def _server(self) -> float:
        own = _cpu_ticks(self.own, children=False) / os.sysconf("SC_CLK_TCK")
        return postgres_cpu_seconds(self.postmaster) - own

    def read(self) -> dict[str, float | None]:
        """Seconds so far: ``workers`` (ended children) and ``postgres`` (None off Linux)."""
        return {
            "workers": self._children() - self.children,
            "postgres": self._server() - self.server if self.available else None,
        }


def server_processes(conn: psycopg.Connection[Any], dbname: str) -> set[int]:
    """The process ids of the PostgreSQL sessions connected to ``dbname``, other than ``conn``'s."""
    rows = conn.execute(
        "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()", [dbname]
    ).fetchall()
    return {int(row[0]) for row in rows}


def percentile(sorted_values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile: the smallest value with at least ``fraction`` of the values at or
    below it (p99 of 200 samples is the 198th smallest)."""
    if not sorted_values:
        raise ValueError("no values")
    rank = max(1, -(-len(sorted_values) * fraction // 1))
    return sorted_values[int(rank) - 1]


def _worker_group_members(pgid: int) -> list[int]:
    """Live ``backwave_worker`` processes in process group ``pgid`` (children a supervisor left)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            if int(fields[2]) != pgid:  # fields: state, ppid, pgrp, ...
                continue
            if b"backwave_worker" in (entry / "cmdline").read_bytes():
                members.append(int(entry.name))
        except (OSError, ValueError):
            continue
    return members


class Processes:
    """Every subprocess the harness starts, and the means to stop them all."""

    def __init__(self, dbname: str) -> None:
        self.dbname = dbname
        self.workers: list[subprocess.Popen[bytes]] = []
        self.spawned: list[multiprocessing.process.BaseProcess] = []
        self._logs: list[TextIO] = []
        self._mp = multiprocessing.get_context("spawn")  # no fork of a process holding connections

    def worker_env(self) -> dict[str, str]:
        pythonpath = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
        return {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "benchmarks.settings",
            "PYTHONPATH": pythonpath,
            "BACKWAVE_BENCH_DB": self.dbname,
            "BACKWAVE_BENCH_LOG_LEVEL": "INFO",
        }

    def start_worker(
        self, args: Sequence[str], log_name: str, env: dict[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        """``python -m django backwave_worker ARGS``, its output in results/logs/{log_name}.log;
        ``env`` adds to the worker's environment."""
        return self.start_command([sys.executable, "-m", "django", "backwave_worker", *args], log_name, env)

    def start_command(
        self, command: Sequence[str], log_name: str, env: dict[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        """Any worker command (a peer queue's too), started like ``start_worker``: in a session of
        its own, from the repository root, with the harness's environment plus ``env``."""
        LOG_DIR.mkdir(parents=True, exist_ok=True)
        log = (LOG_DIR / f"{log_name}.log").open("w")
        self._logs.append(log)
        log.write(f"$ {' '.join(command)}\n")
        log.flush()
        process = subprocess.Popen(
            command,
            cwd=ROOT,
            env={**self.worker_env(), **(env or {})},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.workers.append(process)
        return process

    @staticmethod
    def log_text(log_name: str) -> str:
        path = LOG_DIR / f"{log_name}.log"
        return path.read_text() if path.exists() else ""

    def stop_worker(self, process: subprocess.Popen[bytes], timeout: float = 20.0) -> int | None:
        """SIGTERM (a graceful drain), then SIGKILL to its whole process group. Returns the exit code."""
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout)
        if process.poll() is None:
            # Not reaped yet, so the group id is still ours: the supervisor and its children.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)
        # A supervisor that went first may have left children behind in its group.
        for pid in _worker_group_members(process.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return process.returncode

    def spawn(self, target: Callable[..., None], *args: Any) -> multiprocessing.process.BaseProcess:
        process = self._mp.Process(target=target, args=args, daemon=True)
        process.start()
        self.spawned.append(process)
        return process

    def stop_all(self) -> None:
        for worker in self.workers:
            self.stop_worker(worker, timeout=10.0)
        for process in self.spawned:
            if process.is_alive():
                process.terminate()
                process.join(5)
            if process.is_alive():
                process.kill()
                process.join(5)
        for log in self._logs:
            log.close()
        self._logs.clear()
