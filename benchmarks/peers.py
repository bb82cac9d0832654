"""Side by side with the peers: backwave_django, PgQueuer and Procrastinate measured the same way.

Each queue gets its own scratch database on the same PostgreSQL server (backwave_django the run's
own; ``<db>_pgqueuer`` and ``<db>_procrastinate`` for the peers, their schema installed with the
peer's own command), the same job (a function that does nothing), and the same steps:

- *enqueue*: ``enqueue_n`` jobs one per transaction, then ``n`` jobs through the queue's bulk path,
  1,000 per call (warmed up first, timed in this process); then both again with a job that takes
  four keyword arguments (``benchmarks/arguments.py``), passed the queue's own way;
- *processing*: ``n`` jobs pre-enqueued through the bulk path, then the queue's real worker
  command spawned (one process, or two) and a count polled every 20 ms until all ``n`` are done.
  The rate *from spawn* is ``n`` over the time from the spawn to that moment, start-up included;
  the *steady* rate is taken from the completion timestamps the queue writes, between the 10 %
  and the 90 % job. Each is run at ``--concurrency 10`` and at the queue's default, and its CPU
  per job is recorded: the worker processes' and PostgreSQL's (``harness.CpuMeter``).

A peer that is not installed (the ``bench`` extra) is reported as skipped. See docs/performance.md.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from backwave_django import enqueue_many
from backwave_django.conf import get_settings

from . import raw
from .arguments import calls
from .harness import (
    ROOT,
    CpuMeter,
    connect,
    conninfo,
    drop_database,
    recreate_database,
    reset_tables,
    server_processes,
    settle,
    succeeded_since,
    wait_until,
)
from .jobs import noop, with_args

if TYPE_CHECKING:
    import psycopg

    from .measures import Context

BATCH = 1000
WARM_UP_SINGLE = 50
#: Seconds a worker that drains and exits (``--burst``, ``--mode drain``, ``--one-shot``) gets to
#: do so once every job is done, before the harness stops it.
EXIT_GRACE_S = 10.0
INSTALL_HINT = "not installed: pip install 'backwave-django[bench]'"


@dataclass(frozen=True)
class Setting:
    """One processing configuration: ``concurrency`` None means the queue's own default."""

    concurrency: int | None
    processes: int

    @property
    def key(self) -> str:
        return f"{'default' if self.concurrency is None else f'c{self.concurrency}'}_p{self.processes}"


SETTINGS = (Setting(10, 1), Setting(10, 2), Setting(None, 1), Setting(None, 2))


def installed(peer: str) -> bool:
    """Whether ``peer`` can be imported (a missing extra, or a module blocked in ``sys.modules``)."""
    try:
        importlib.import_module(peer)
    except ImportError:
        return False
    return True


def _rate(jobs: float, seconds: float) -> float | None:
    return jobs / seconds if seconds > 0 else None


def steady_rate(times: list[float]) -> float | None:
    """Jobs/s between the 10 % and the 90 % completion (nearest rank), from sorted timestamps."""
    n = len(times)
    low, high = max(1, -(-n // 10)), max(1, -(-n * 9 // 10))
    if high <= low:
        return None
    return _rate(high - low, times[high - 1] - times[low - 1])


class Queue:
    """One queue under test: how to reset it, enqueue to it, start its worker and count its done jobs."""

    name = ""
    #: What "default concurrency" means for this queue, for the table.
    default_concurrency = ""

    def __init__(self, ctx: Context, dbname: str) -> None:
        self.ctx = ctx
        self.dbname = dbname
        self.conn: psycopg.Connection[Any] = ctx.conn

    def version(self) -> str:
        return importlib.metadata.version(self.name)

    def setup(self) -> None:
        """Create the scratch database and install the queue's schema."""

    def teardown(self) -> None:
        if self.conn is not self.ctx.conn:
            self.conn.close()
        if self.dbname != self.ctx.dbname and not self.ctx.keep_db:
            drop_database(self.dbname)

    def reset(self) -> None:
        raise NotImplementedError

    def settle(self) -> None:
        raise NotImplementedError

    def enqueue_single(self, n: int, kwargs: list[dict[str, Any]] | None = None) -> float:
        """Seconds to enqueue ``n`` jobs one per transaction: the noop, or with ``kwargs`` (one
        dict per job) the job with arguments."""
        raise NotImplementedError

    def enqueue_bulk(self, n: int, kwargs: list[dict[str, Any]] | None = None) -> float:
        """Seconds to enqueue ``n`` jobs through the bulk path, ``BATCH`` a call (as above)."""
        raise NotImplementedError

    def commands(self, setting: Setting) -> list[list[str]]:
        raise NotImplementedError

    def done(self) -> int:
        raise NotImplementedError

    def completion_times(self) -> list[float]:
        raise NotImplementedError

    def env(self) -> dict[str, str]:
        """The peer's processes: its scratch database, named to its own code and to libpq alike
        (so a command that reads only PG* variables cannot reach another database)."""
        info = conninfo(self.dbname)
        return {
            "BACKWAVE_BENCH_PEER_DB": self.dbname,
            "PGHOST": str(info["host"]),
            "PGPORT": str(info["port"]),
            "PGUSER": str(info["user"]),
            "PGPASSWORD": str(info["password"]),
            "PGDATABASE": self.dbname,
        }

    def _times(self, query: str) -> list[float]:
        return [float(row[0]) for row in self.conn.execute(query).fetchall()]

    def _install(self, *args: str) -> None:
        """Run the peer's own schema command (``python -m <peer> …``) against the scratch database."""
        result = subprocess.run(
            [sys.executable, "-m", *args],
            cwd=ROOT,
            env={**self.ctx.procs.worker_env(), **self.env()},
            capture_output=True,
            text=True,
            timeout=120,
        )
        if result.returncode:
            raise RuntimeError(f"{' '.join(args)} failed ({result.returncode}): {result.stderr.strip()}")


class Backwave(Queue):
    name = "backwave_django"

    def __init__(self, ctx: Context, dbname: str) -> None:
        super().__init__(ctx, dbname)
        self.default_concurrency = f"`--concurrency` {get_settings().concurrency}"

    def version(self) -> str:
        return importlib.metadata.version("backwave-django")

    def reset(self) -> None:
        reset_tables(self.conn)

    def settle(self) -> None:
        settle(self.conn)

    def enqueue_single(self, n: int, kwargs: list[dict[str, Any]] | None = None) -> float:
        started = time.perf_counter()
        if kwargs is None:
            for _ in range(n):
                noop.enqueue()
        else:
            for call in kwargs:
                with_args.enqueue(**call)
        return time.perf_counter() - started

    def enqueue_bulk(self, n: int, kwargs: list[dict[str, Any]] | None = None) -> float:
        # .prepare() is part of the bulk path, so it is timed too; enqueue_many writes 1,000 a
        # transaction. With arguments, the job's own enqueue_many takes the dicts as they are.
        started = time.perf_counter()
        if kwargs is None:
            enqueue_many([noop.prepare() for _ in range(n)])
        else:
            with_args.enqueue_many(kwargs)
        return time.perf_counter() - started

    def commands(self, setting: Setting) -> list[list[str]]:
        command = [sys.executable, "-m", "django", "backwave_worker", "--burst", "--queues", raw.QUEUE]
        if setting.concurrency is not None:
            command += ["--concurrency", str(setting.concurrency)]
        if setting.processes > 1:
            command += ["--processes", str(setting.processes)]
        return [command]

    def done(self) -> int:
        return succeeded_since(self.conn, 0)

    def completion_times(self) -> list[float]:
        return self._times(
            f"SELECT extract(epoch FROM terminal_at) FROM {raw.JOB_TABLE} WHERE state = 3 ORDER BY 1"
        )


class PgQueuer(Queue):
    name = "pgqueuer"
    default_concurrency = "no limit, `--batch-size` 10"

    def setup(self) -> None:
        recreate_database(self.dbname)
        self._install("pgqueuer", "install")
        self.conn = connect(self.dbname)
        from . import peer_pgqueuer

        self.module = peer_pgqueuer

    def reset(self) -> None:
        self.conn.execute("TRUNCATE pgqueuer, pgqueuer_log, pgqueuer_statistics RESTART IDENTITY")
        self.conn.execute("CHECKPOINT")

    def settle(self) -> None:
        self.conn.execute("ANALYZE pgqueuer")
        self.conn.execute("CHECKPOINT")

    def enqueue_single(self, n: int, kwargs: list[dict[str, Any]] | None = None) -> float:
        return float(self.module.enqueue_single(self.dbname, n, kwargs))

    def enqueue_bulk(self, n: int, kwargs: list[dict[str, Any]] | None = None) -> float:
        return float(self.module.enqueue_bulk(self.dbname, n, BATCH, kwargs))

    def commands(self, setting: Setting) -> list[list[str]]:
        command = [sys.executable, "-m", "benchmarks.peer_pgqueuer"]
        if setting.concurrency is not None:
            # At most `concurrency` jobs picked per worker; PgQueuer wants at least twice the batch.
            batch = max(1, setting.concurrency // 2)
            command += ["--max-concurrent-tasks", str(setting.concurrency), "--batch-size", str(batch)]
        return [command] * setting.processes

    def done(self) -> int:
        row = self.conn.execute("SELECT count(*) FROM pgqueuer_log WHERE status = 'successful'").fetchone()
        return int(row[0]) if row else 0

    def completion_times(self) -> list[float]:
        return self._times(
            "SELECT extract(epoch FROM created) FROM pgqueuer_log WHERE status = 'successful' ORDER BY 1"
        )


class Procrastinate(Queue):
    name = "procrastinate"
    default_concurrency = "`--concurrency` 1"
    APP = "benchmarks.peer_procrastinate.app"

    def setup(self) -> None:
        recreate_database(self.dbname)
        self._install("procrastinate", "--app", self.APP, "schema", "--apply")
        self.conn = connect(self.dbname)
        from . import peer_procrastinate

        self.module = peer_procrastinate

    def reset(self) -> None:
        tables = "procrastinate_jobs, procrastinate_events, procrastinate_workers"
        self.conn.execute(f"TRUNCATE {tables} RESTART IDENTITY CASCADE")
        self.conn.execute("CHECKPOINT")

    def settle(self) -> None:
        self.conn.execute("ANALYZE procrastinate_jobs")
        self.conn.execute("CHECKPOINT")

    def enqueue_single(self, n: int, kwargs: list[dict[str, Any]] | None = None) -> float:
        return float(self.module.enqueue_single(self.dbname, n, kwargs))

    def enqueue_bulk(self, n: int, kwargs: list[dict[str, Any]] | None = None) -> float:
        return float(self.module.enqueue_bulk(self.dbname, n, BATCH, kwargs))

    def commands(self, setting: Setting) -> list[list[str]]:
        command = [sys.executable, "-m", "procrastinate", "--app", self.APP, "worker", "--one-shot"]
        if setting.concurrency is not None:
            command += ["--concurrency", str(setting.concurrency)]
        return [command] * setting.processes

    def done(self) -> int:
        row = self.conn.execute(
            "SELECT count(*) FROM procrastinate_jobs WHERE status = 'succeeded'"
        ).fetchone()
        return int(row[0]) if row else 0

    def completion_times(self) -> list[float]:
        return self._times(
            "SELECT extract(epoch FROM at) FROM procrastinate_events WHERE type = 'succeeded' ORDER BY 1"
        )


QUEUES: dict[str, type[Queue]] = {"pgqueuer": PgQueuer, "procrastinate": Procrastinate}


# --- The measurements ---------------------------------------------------------------------------


#: The enqueue figures: key, with arguments or not, bulk or one per transaction.
ENQUEUE_PATHS = (
    ("single", False, False),
    ("bulk", False, True),
    ("single_args", True, False),
    ("bulk_args", True, True),
)


def measure_enqueue(queue: Queue) -> dict[str, Any]:
    """The noop's two enqueue figures, then the job with arguments' (its dicts built untimed)."""
    ctx = queue.ctx
    queue.reset()
    queue.enqueue_single(WARM_UP_SINGLE)
    queue.enqueue_bulk(BATCH)
    queue.enqueue_single(WARM_UP_SINGLE, calls(WARM_UP_SINGLE))
    queue.enqueue_bulk(BATCH, calls(BATCH))
    record: dict[str, Any] = {}
    for key, with_arguments, bulk in ENQUEUE_PATHS:
        n = ctx.n if bulk else ctx.enqueue_n
        kwargs = calls(n) if with_arguments else None
        queue.reset()
        seconds = queue.enqueue_bulk(n, kwargs) if bulk else queue.enqueue_single(n, kwargs)
        record[key] = {"jobs": n, "seconds": seconds, "rate": _rate(n, seconds)}
        if bulk:
            record[key]["batch"] = BATCH
    queue.reset()
    return record


def measure_processing(queue: Queue, setting: Setting) -> dict[str, Any]:
    """Pre-enqueue ``n``, spawn the worker command(s), poll until all ``n`` are done."""
    ctx, n = queue.ctx, queue.ctx.n
    queue.reset()
    queue.enqueue_bulk(n)
    queue.settle()
    commands = queue.commands(setting)
    workers = []
    before = server_processes(queue.conn, queue.dbname)
    cpu = CpuMeter(queue.conn)
    wall_start = time.time()
    started = time.perf_counter()
    try:
        for index, command in enumerate(commands):
            log_name = f"peers-{queue.name}-{setting.key}-{index}"
            workers.append(ctx.procs.start_command(command, log_name, queue.env()))
        done_at = wait_until(
            lambda: queue.done() >= n,
            timeout=ctx.timeout_for(n),
            alive=lambda: any(worker.poll() is None for worker in workers),
        )
        elapsed = done_at - started
        codes: list[int | None] = []
        exited = True
        for worker in workers:
            try:
                codes.append(worker.wait(max(0.1, started + elapsed + EXIT_GRACE_S - time.perf_counter())))
            except subprocess.TimeoutExpired:
                exited = False
                codes.append(ctx.procs.stop_worker(worker))
    finally:
        for worker in workers:
            ctx.procs.stop_worker(worker)
    spent = _cpu_spent(queue, cpu, before)
    times = queue.completion_times()
    result = {
        "jobs": n,
        "processes": setting.processes,
        "concurrency": setting.concurrency,
        "commands": [" ".join(command[1:]) for command in commands],
        "seconds": elapsed,
        "rate": _rate(n, elapsed),
        "steady_rate": steady_rate(times),
        "first_done_after_s": times[0] - wall_start if times else None,
        "exited_by_themselves": exited,
        "exit_codes": codes,
        "cpu_us_per_job": {side: None if value is None else value / n * 1e6 for side, value in spent.items()},
    }
    queue.reset()
    return result


def _cpu_spent(queue: Queue, cpu: CpuMeter, before: set[int]) -> dict[str, float | None]:
    """The CPU of a processing run, once the workers' server processes (which end after the
    workers) have ended too and been counted; None if they linger."""
    try:
        wait_until(lambda: not server_processes(queue.conn, queue.dbname) - before, timeout=5.0)
    except TimeoutError:
        return {"workers": None, "postgres": None}
    time.sleep(0.05)  # a session leaves pg_stat_activity just before its process exits
    return cpu.read()


def _guarded(record: dict[str, Any], key: str, measure: Callable[[], dict[str, Any]]) -> None:
    try:
        record[key] = measure()
    except Exception as exc:
        traceback.print_exc()
        record[key] = {"error": f"{type(exc).__name__}: {exc}"}


def ratios(queues: dict[str, dict[str, Any]]) -> dict[str, dict[str, float | None]]:
    """backwave_django's figure over each peer's, per enqueue path and processing setting."""
    ours = queues["backwave_django"]
    out: dict[str, dict[str, float | None]] = {}

    def ratio(mine: Any, theirs: Any) -> float | None:
        return mine / theirs if isinstance(mine, float) and isinstance(theirs, float) and theirs else None

    for peer, theirs in queues.items():
        if peer == "backwave_django" or "skipped" in theirs or "error" in theirs:
            continue
        figures: dict[str, float | None] = {}
        for path, _, _ in ENQUEUE_PATHS:
            figures[f"enqueue_{path}"] = ratio(
                ours["enqueue"].get(path, {}).get("rate"), theirs["enqueue"].get(path, {}).get("rate")
            )
        for setting in SETTINGS:
            mine, other = ours["processing"].get(setting.key, {}), theirs["processing"].get(setting.key, {})
            figures[f"{setting.key}_from_spawn"] = ratio(mine.get("rate"), other.get("rate"))
            figures[f"{setting.key}_steady"] = ratio(mine.get("steady_rate"), other.get("steady_rate"))
        out[peer] = figures
    return out


def peers(ctx: Context) -> dict[str, Any]:
    """The step ``--only peers`` runs: backwave_django and each selected peer, interleaved."""
    queues: list[Queue] = [Backwave(ctx, ctx.dbname)]
    results: dict[str, dict[str, Any]] = {"backwave_django": {}}
    for peer in ctx.peers:
        if not installed(peer):
            results[peer] = {"skipped": INSTALL_HINT}
            continue
        queue = QUEUES[peer](ctx, f"{ctx.dbname}_{peer}")
        try:
            queue.setup()
        except Exception as exc:
            traceback.print_exc()
            results[peer] = {"error": f"set-up: {type(exc).__name__}: {exc}"}
            continue
        queues.append(queue)
        results[peer] = {}
    try:
        for queue in queues:
            record = results[queue.name]
            record["version"] = queue.version()
            record["database"] = queue.dbname
            record["default_concurrency"] = queue.default_concurrency
            _guarded(record, "enqueue", functools.partial(measure_enqueue, queue))
            record["processing"] = {}
        for setting in SETTINGS:  # interleaved, so drift in the machine's speed hits every queue alike
            for queue in queues:
                measure = functools.partial(measure_processing, queue, setting)
                _guarded(results[queue.name]["processing"], setting.key, measure)
    finally:
        for queue in queues:
            queue.teardown()
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "n": ctx.n,
        "enqueue_n": ctx.enqueue_n,
        "batch": BATCH,
        "settings": [setting.key for setting in SETTINGS],
        "queues": results,
        "ratios": ratios(results),
    }
