"""A steady load on a private cluster, shared by the scenarios that run one for minutes
(benchmarks/horizon.py, benchmarks/retention.py).

:func:`private_database` starts a private PostgreSQL (benchmarks/cluster.py), creates the
scenario's database, migrates it and loads ``pg_stat_statements``; :class:`SteadyLoad` runs one
``backwave_worker`` and a producer process that enqueues trivial jobs at a fixed rate through the
public API (``noop.enqueue()``, one job per transaction).

Top-level imports stay light (no Django): the producer is a spawned process that imports this
module before it configures Django for the private cluster.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg

from . import raw
from .cluster import PrivateCluster
from .harness import ROOT, scalar, wait_until

if TYPE_CHECKING:
    import multiprocessing.process

    from .measures import Context

#: Marks the harness's own statements, so pg_stat_statements' count leaves them out.
MARK = "/* horizon harness */"


def pg_env(port: int, dbname: str) -> dict[str, str]:
    """The environment that points benchmarks.settings at the private cluster's database."""
    return {
        "PGHOST": "127.0.0.1",
        "PGPORT": str(port),
        "PGUSER": "postgres",
        "PGPASSWORD": "",
        "BACKWAVE_BENCH_DB": dbname,
    }


def conninfo_of(port: int) -> dict[str, Any]:
    return {"host": "127.0.0.1", "port": port, "user": "postgres", "password": ""}


def produce(port: int, dbname: str, rate: float, seconds: float, timings: str) -> None:
    """Spawned: enqueue a noop every ``1 / rate`` s for ``seconds`` (one job per transaction),
    on schedule: a late enqueue is followed at once by the next one due. At the end, writes each
    enqueue's wall-clock start and its duration in ms to ``timings``, a line each."""
    os.environ.update(pg_env(port, dbname))
    os.environ["PGAPPNAME"] = "backwave-producer"  # its backend's CPU is told apart (benchmarks/horizon.py)
    os.environ["DJANGO_SETTINGS_MODULE"] = "benchmarks.settings"
    import django

    django.setup()
    from .jobs import noop

    started = time.perf_counter()
    index = 0
    lines = []
    while (due := started + index / rate) < started + seconds:
        delay = due - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        at, began = time.time(), time.perf_counter()
        noop.enqueue()
        lines.append(f"{at:.6f} {(time.perf_counter() - began) * 1000:.3f}\n")
        index += 1
    Path(timings).write_text("".join(lines))


def _migrate(ctx: Context, env: Mapping[str, str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "django", "migrate", "--verbosity", "0"],
        cwd=ROOT,
        env={**ctx.procs.worker_env(), **env},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"migrate on the private cluster failed: {done.stderr[-2000:]}")


def server(conn: psycopg.Connection[Any], cluster: PrivateCluster, *more: str) -> dict[str, Any]:
    """What the report says about the private server: its kind, port and settings (``more`` adds
    settings to the usual ones)."""
    settings = (
        "server_version",
        "autovacuum",
        "track_io_timing",
        "shared_preload_libraries",
        "shared_buffers",
        *more,
    )
    return {
        "kind": "private cluster (initdb in a scratch folder, removed afterwards)",
        "port": cluster.port,
        **{name: scalar(conn, f"{MARK} SHOW {name}") for name in settings},
    }


@contextmanager
def private_database(
    ctx: Context, dbname: str, env: Mapping[str, str] | None = None
) -> Iterator[tuple[PrivateCluster, psycopg.Connection[Any], dict[str, str]]]:
    """A private cluster with ``dbname`` created, migrated and ``pg_stat_statements`` loaded:
    yields the cluster, an autocommit connection to the database and the environment its worker
    and producer need (``env`` added). The cluster is stopped and removed on every way out."""
    with PrivateCluster() as cluster:
        with psycopg.connect(**conninfo_of(cluster.port), dbname="postgres", autocommit=True) as admin:
            admin.execute(f"CREATE DATABASE {dbname}")
        full_env = {**pg_env(cluster.port, dbname), **(env or {})}
        _migrate(ctx, full_env)
        with psycopg.connect(**conninfo_of(cluster.port), dbname=dbname, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION pg_stat_statements")
            yield cluster, conn, full_env


class SteadyLoad:
    """One ``backwave_worker --queues default --concurrency N`` and a producer offering ``rate``
    jobs/s for ``seconds`` (a second more, so the last phase ends before it does).

    :meth:`start` returns once the worker has registered and the producer is started;
    :meth:`check` raises if either has exited; :meth:`stop` stops both (call it on every way out).
    """

    def __init__(
        self,
        ctx: Context,
        conn: psycopg.Connection[Any],
        cluster: PrivateCluster,
        env: Mapping[str, str],
        *,
        rate: float,
        seconds: float,
        timings: Path,
        log_name: str,
    ) -> None:
        self.ctx, self.conn, self.cluster, self.env = ctx, conn, cluster, dict(env)
        self.rate, self.seconds, self.timings, self.log_name = rate, seconds, timings, log_name
        self.worker: subprocess.Popen[bytes] | None = None
        self.producer: multiprocessing.process.BaseProcess | None = None

    def start(self) -> None:
        dbname = self.env["BACKWAVE_BENCH_DB"]
        worker = self.ctx.procs.start_worker(
            ["--queues", raw.QUEUE, "--concurrency", str(self.ctx.concurrency)],
            self.log_name,
            {**self.env, "PGAPPNAME": "backwave-worker"},  # told apart, as the producer's
        )
        self.worker = worker
        wait_until(
            lambda: scalar(self.conn, f"{MARK} SELECT count(*) FROM backwave_django_workernode") >= 1,
            timeout=60,
            interval=0.1,
            alive=lambda: worker.poll() is None,
        )
        self.producer = self.ctx.procs.spawn(
            produce, self.cluster.port, dbname, self.rate, self.seconds + 1.0, str(self.timings)
        )

    @property
    def worker_pid(self) -> int:
        assert self.worker is not None, "the load has not started"
        return self.worker.pid

    def check(self, where: str) -> None:
        """Raise if the worker or the producer has exited (``where``: the part of the run)."""
        if self.worker is not None and self.worker.poll() is not None:
            raise RuntimeError(f"the worker exited {where}")
        if self.producer is not None and not self.producer.is_alive():
            raise RuntimeError(f"the producer exited {where}")

    def run_until(self, deadline: float, where: str) -> None:
        """Sleep until the wall-clock ``deadline``, checking both processes every second."""
        while (left := deadline - time.time()) > 0:
            self.check(where)
            time.sleep(min(left, 1.0))

    def finish(self) -> None:
        """Let the producer write its timings (its last enqueue is due a second after the run)."""
        if self.producer is not None:
            self.producer.join(30)

    def stop(self) -> None:
        if self.worker is not None:
            self.ctx.procs.stop_worker(self.worker)
        if self.producer is not None:
            self.producer.terminate()
            self.producer.join(10)
