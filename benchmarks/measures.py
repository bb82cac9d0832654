"""The measurements. Each takes the run's :class:`Context` and returns a JSON-ready dict.

Django is configured (``benchmarks.settings``) before this module is imported. The harness's own
enqueues go through the public API (``noop.enqueue()``, ``.prepare()`` + ``enqueue_many``);
everything else it does to the database (resets, polling, reading timestamps, the baselines) is
plain psycopg on a separate connection.
"""

from __future__ import annotations

import re
import subprocess
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import psycopg
from django.db import connection as django_connection, transaction

from backwave_django import Unique, enqueue_many, store

from . import raw
from .harness import (
    JOB_TABLES,
    Processes,
    autovacuum_on,
    conninfo,
    max_sequence,
    percentile,
    reset_tables,
    rss_kb,
    scalar,
    settle,
    succeeded_since,
    wait_until,
)
from .jobs import keyed, noop

T = raw.JOB_TABLE


@dataclass
class Context:
    dbname: str
    conn: psycopg.Connection[Any]
    procs: Processes
    n: int
    enqueue_n: int
    concurrency: int
    latency_jobs: int
    scale_rows: int
    memory_marks: tuple[int, ...]
    fan: int
    results: dict[str, Any] = field(default_factory=dict)
    #: The peer queues the ``peers`` step measures beside backwave_django (benchmarks/peers.py).
    peers: tuple[str, ...] = ()
    #: Leave the scratch databases behind (``--keep-db``); the peers' own ones too.
    keep_db: bool = False
    #: The long-horizon scenario (benchmarks/horizon.py): jobs/s offered, the clean and recovery
    #: phases' length and the held phase's, in seconds.
    horizon_rate: float = 200.0
    horizon_phase: float = 60.0
    horizon_hold: float = 300.0
    #: The worker's ``BATCH_WINDOW`` there, in milliseconds (0: none).
    horizon_batch_window_ms: float = 0.0
    #: The retention scenario (benchmarks/retention.py): jobs/s offered, minutes run, seconds
    #: Succeeded jobs are kept, seconds between samples.
    retention_rate: float = 200.0
    retention_minutes: float = 10.0
    retention_keep: float = 60.0
    retention_interval: float = 30.0

    def timeout_for(self, jobs: int) -> float:
        """Generous: a measurement is abandoned only when something is clearly stuck."""
        return 120.0 + jobs / 50.0


def _rate(jobs: int, seconds: float) -> float:
    return jobs / seconds if seconds > 0 else float("inf")


def _enqueue_prepared(
    jobs: int, job_timeout: float | None = None, priorities: tuple[int, ...] = (0,)
) -> dict[str, float]:
    """``.prepare()`` ``jobs`` noops (each with ``job_timeout``, if given, and the ``priorities``
    in turn), then ``enqueue_many`` them (1,000 per transaction)."""
    started = time.perf_counter()
    options = [noop.using(timeout=job_timeout, priority=priority) for priority in priorities]
    prepared = [options[index % len(options)].prepare() for index in range(jobs)]
    prepared_at = time.perf_counter()
    enqueue_many(prepared)
    done = time.perf_counter()
    return {
        "jobs": jobs,
        "prepare_s": prepared_at - started,
        "enqueue_many_s": done - prepared_at,
        "total_s": done - started,
        "rate": _rate(jobs, done - started),
    }


# --- 1. Enqueue -------------------------------------------------------------------------------


def enqueue(ctx: Context) -> dict[str, Any]:
    conn = ctx.conn
    single_n, bulk_n = ctx.enqueue_n, ctx.n
    # Warm up both paths (connections, prepared statements, code paths), then start clean.
    for _ in range(50):
        noop.enqueue()
    raw.insert_single(conn, 50)
    enqueue_many([noop.prepare() for _ in range(1000)])
    raw.insert_bulk(conn, 1000)

    reset_tables(conn)
    started = time.perf_counter()
    for _ in range(single_n):
        noop.enqueue()
    single_s = time.perf_counter() - started

    reset_tables(conn)
    started = time.perf_counter()
    unique = Unique()
    for key in range(single_n):
        keyed.using(unique=unique).enqueue(key)
    unique_s = time.perf_counter() - started

    reset_tables(conn)
    raw_single_s = raw.insert_single(conn, single_n)

    reset_tables(conn)
    many = _enqueue_prepared(bulk_n)

    reset_tables(conn)
    raw_bulk_s = raw.insert_bulk(conn, bulk_n, batch=1000)
    reset_tables(conn)
    return {
        "single": {"jobs": single_n, "seconds": single_s, "rate": _rate(single_n, single_s)},
        "unique": {"jobs": single_n, "seconds": unique_s, "rate": _rate(single_n, unique_s)},
        "raw_single": {"jobs": single_n, "seconds": raw_single_s, "rate": _rate(single_n, raw_single_s)},
        "many": many,
        "raw_bulk": {"jobs": bulk_n, "seconds": raw_bulk_s, "rate": _rate(bulk_n, raw_bulk_s), "batch": 1000},
    }


# --- 2. Processing ----------------------------------------------------------------------------

_CHILD_STOPPED = re.compile(r"Worker (\S+) stopped after (\d+) job")


def _terminal_span(conn: psycopg.Connection[Any], after_sequence: int) -> tuple[float, float]:
    row = conn.execute(
        f"SELECT extract(epoch FROM min(terminal_at)), extract(epoch FROM max(terminal_at)) "
        f"FROM {T} WHERE sequence > %s AND state = 3",
        [after_sequence],
    ).fetchone()
    assert row is not None
    return float(row[0]), float(row[1])


def _prepare_backlog(
    ctx: Context, jobs: int, job_timeout: float | None = None, priorities: tuple[int, ...] = (0,)
) -> tuple[int, dict[str, float]]:
    """Enqueue ``jobs`` due noops with ``enqueue_many``; returns the sequence before them."""
    base = max_sequence(ctx.conn)
    timing = _enqueue_prepared(jobs, job_timeout, priorities)
    settle(ctx.conn)
    return base, timing


def process_with_worker(
    ctx: Context,
    processes: int,
    log_name: str,
    job_timeout: float | None = None,
    priorities: tuple[int, ...] = (0,),
) -> dict[str, Any]:
    """``backwave_worker --burst`` on ``ctx.n`` pre-enqueued noops, timed from its start until
    all of them are Succeeded."""
    n, conn = ctx.n, ctx.conn
    base, backlog = _prepare_backlog(ctx, n, job_timeout, priorities)
    args = ["--burst", "--queues", raw.QUEUE, "--concurrency", str(ctx.concurrency)]
    if processes > 1:
        args += ["--processes", str(processes)]
    wall_start = time.time()
    started = time.perf_counter()
    worker = ctx.procs.start_worker(args, log_name)
    done = wait_until(
        lambda: succeeded_since(conn, base) >= n,
        timeout=ctx.timeout_for(n),
        alive=(lambda: worker.poll() is None) if processes == 1 else None,
    )
    elapsed = done - started
    first, last = _terminal_span(conn, base)
    result: dict[str, Any] = {
        "jobs": n,
        "processes": processes,
        "concurrency": ctx.concurrency,
        "seconds": elapsed,
        "rate": _rate(n, elapsed),
        "first_job_done_after_s": first - wall_start,
        "steady_rate": _rate(n - 1, last - first),
        "backlog_enqueue_rate": backlog["rate"],
    }
    code: int | None
    if processes == 1:
        try:
            code = worker.wait(30)
            result["exit"] = {
                "exited_by_itself": True,
                "code": code,
                "after_s": time.perf_counter() - started,
            }
        except subprocess.TimeoutExpired:
            code = ctx.procs.stop_worker(worker)
            result["exit"] = {"exited_by_itself": False, "code": code, "stopped_with": "SIGTERM"}
    else:
        # Give the supervisor a fair chance to notice its --burst children are done and exit.
        observe = 5.0
        try:
            code = worker.wait(observe)
            exit_info: dict[str, Any] = {"exited_by_itself": True, "code": code}
        except subprocess.TimeoutExpired:
            code = ctx.procs.stop_worker(worker)
            exit_info = {
                "exited_by_itself": False,
                "observed_s": observe,
                "stopped_with": "SIGTERM after all jobs were Succeeded",
                "code_after_sigterm": code,
            }
        log = ctx.procs.log_text(log_name)
        exit_info["children_started"] = log.count("Supervisor started worker process")
        exit_info["restarts_after_exit_0"] = log.count("exited; starting a fresh one")
        exit_info["jobs_per_child"] = [int(m.group(2)) for m in _CHILD_STOPPED.finditer(log)]
        exit_info["log"] = f"benchmarks/results/logs/{log_name}.log"
        result["exit"] = exit_info
    return result


def process_raw(ctx: Context, processes: int, batch: int) -> dict[str, Any]:
    """The raw drain loop (``raw.drain``) in ``processes`` spawned processes, timed the same way."""
    n, conn = ctx.n, ctx.conn
    base, _ = _prepare_backlog(ctx, n)
    started = time.perf_counter()
    spawned = [ctx.procs.spawn(raw.drain, conninfo(ctx.dbname), batch) for _ in range(processes)]
    done = wait_until(
        lambda: succeeded_since(conn, base) >= n,
        timeout=ctx.timeout_for(n),
        alive=lambda: any(p.is_alive() for p in spawned),
    )
    for process in spawned:
        process.join(30)
    elapsed = done - started
    first, last = _terminal_span(conn, base)
    return {
        "jobs": n,
        "processes": processes,
        "batch": batch,
        "seconds": elapsed,
        "rate": _rate(n, elapsed),
        "steady_rate": _rate(n - 1, last - first),
        "exit_codes": [p.exitcode for p in spawned],
    }


def processing(ctx: Context) -> dict[str, Any]:
    runs: dict[str, Any] = {}
    plan: list[tuple[str, Callable[[], dict[str, Any]]]] = [
        ("raw_batch_1", lambda: process_raw(ctx, 1, 32)),
        ("worker_1", lambda: process_with_worker(ctx, 1, "processing-1")),
        ("raw_batch_2", lambda: process_raw(ctx, 2, 32)),
        ("worker_2", lambda: process_with_worker(ctx, 2, "processing-2")),
        ("raw_single_1", lambda: process_raw(ctx, 1, 1)),
        ("raw_single_2", lambda: process_raw(ctx, 2, 1)),
    ]
    for name, measure in plan:
        reset_tables(ctx.conn)
        runs[name] = measure()
        ctx.results.setdefault("processing", {})[name] = runs[name]  # visible to later steps
    reset_tables(ctx.conn)
    return runs


def priorities(ctx: Context) -> dict[str, Any]:
    """A drain of jobs of three priorities (-10, 0, 10, in turn) against the same of one priority,
    alternating twice; the better run of each counts. The claim walks one priority at a time."""
    runs: dict[str, list[dict[str, Any]]] = {"one": [], "mixed": []}
    for _ in range(2):
        for name, mix in (("one", (0,)), ("mixed", (-10, 0, 10))):
            reset_tables(ctx.conn)
            runs[name].append(process_with_worker(ctx, 1, f"priorities-{name}", priorities=mix))
    reset_tables(ctx.conn)
    best = {name: max(run["rate"] for run in measured) for name, measured in runs.items()}
    return {
        "runs": runs,
        "one_rate": best["one"],
        "mixed_rate": best["mixed"],
        "ratio": best["mixed"] / best["one"],
    }


def timeouts(ctx: Context) -> dict[str, Any]:
    """The watchdog's cost: 1 process on noops that all have a time limit (never reached), against
    the same without one, alternating twice; the better run of each counts."""
    runs: dict[str, list[dict[str, Any]]] = {"without": [], "with": []}
    for _ in range(2):
        for name, job_timeout in (("without", None), ("with", 60.0)):
            reset_tables(ctx.conn)
            runs[name].append(process_with_worker(ctx, 1, f"timeouts-{name}", job_timeout))
    reset_tables(ctx.conn)
    best = {name: max(run["rate"] for run in measured) for name, measured in runs.items()}
    return {
        "runs": runs,
        "without_rate": best["without"],
        "with_rate": best["with"],
        "ratio": best["with"] / best["without"],
    }


# --- 3. Latency -------------------------------------------------------------------------------


def _start_idle_worker(ctx: Context, log_name: str, settle_s: float = 2.0) -> Any:
    worker = ctx.procs.start_worker(["--queues", raw.QUEUE, "--concurrency", str(ctx.concurrency)], log_name)
    wait_until(
        lambda: scalar(ctx.conn, "SELECT count(*) FROM backwave_django_workernode") >= 1,
        timeout=60,
        interval=0.05,
        alive=lambda: worker.poll() is None,
    )
    time.sleep(settle_s)
    return worker


def latency(ctx: Context) -> dict[str, Any]:
    conn, jobs, spacing = ctx.conn, ctx.latency_jobs, 0.020
    reset_tables(conn)
    worker = _start_idle_worker(ctx, "latency")
    try:
        started = time.perf_counter()
        for index in range(jobs):
            delay = started + index * spacing - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            noop.enqueue()
        wait_until(lambda: succeeded_since(conn, 0) >= jobs, timeout=60, alive=lambda: worker.poll() is None)
    finally:
        ctx.procs.stop_worker(worker)
    rows = conn.execute(
        f"""SELECT extract(epoch FROM j.terminal_at - j.enqueued_at),
                   extract(epoch FROM t.recorded_at - j.enqueued_at)
            FROM {T} j LEFT JOIN backwave_django_jobtransition t ON t.job_id = j.sequence AND t.state = 2
            WHERE j.state = 3 ORDER BY j.sequence"""
    ).fetchall()
    total = sorted(float(r[0]) * 1000 for r in rows)
    pickup = sorted(float(r[1]) * 1000 for r in rows if r[1] is not None)
    reset_tables(conn)
    return {
        "jobs": jobs,
        "spacing_ms": spacing * 1000,
        "p50_ms": percentile(total, 0.50),
        "p90_ms": percentile(total, 0.90),
        "p99_ms": percentile(total, 0.99),
        "max_ms": total[-1],
        "min_ms": total[0],
        "pickup_p50_ms": percentile(pickup, 0.50) if pickup else None,
        "pickup_p99_ms": percentile(pickup, 0.99) if pickup else None,
    }


# --- 4. Scale ---------------------------------------------------------------------------------


def _explain(conn: psycopg.Connection[Any], query: str, params: list[Any]) -> str:
    """EXPLAIN (ANALYZE, BUFFERS) in a transaction that is rolled back (the query locks rows)."""
    with conn.transaction(force_rollback=True):
        cursor = psycopg.ClientCursor(conn)  # literal parameters, as Django sends them
        cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + query, params)
        return "\n".join(row[0] for row in cursor.fetchall())


def _orm_claim_sql() -> tuple[str, Any] | None:
    """The SKIP LOCKED query ``store.claim`` really sends, captured from a rolled-back claim."""
    captured: list[tuple[str, Any]] = []

    def capture(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        if "SKIP LOCKED" in sql:
            captured.append((sql, params))  # a list, or a dict for named placeholders
        return execute(sql, params, many, context)

    from datetime import timedelta

    with transaction.atomic():
        with django_connection.execute_wrapper(capture):
            store.claim(
                worker_id="bench-explain",
                queues=[raw.QUEUE],
                max_jobs=32,
                lease_duration=timedelta(seconds=60),
                now=datetime.now(UTC),
            )
        transaction.set_rollback(True)
    return captured[0] if captured else None


def _explain_orm(sql: str, params: Any) -> str:
    with transaction.atomic():
        with django_connection.cursor() as cursor:
            cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, params)
            plan = "\n".join(row[0] for row in cursor.fetchall())
        transaction.set_rollback(True)
    return plan


def scale(ctx: Context) -> dict[str, Any]:
    conn, rows = ctx.conn, ctx.scale_rows
    reset_tables(conn)
    started = time.perf_counter()
    # Retained Succeeded jobs, ended over the past ~rows seconds; time-ordered ids below any new one.
    conn.execute(
        f"""INSERT INTO {T} (job_id, wire_name, queue, payload, state, due_time, attempt,
                             cancel_requested, terminal_at, parents_remaining, mode, enqueued_at,
                             next_ordinal)
            SELECT ('00000000-0000-7000-8000-' || lpad(to_hex(g), 12, '0'))::uuid,
                   %s, %s, '{{"args": [], "kwargs": {{}}}}'::jsonb, 3,
                   now() - make_interval(secs => %s - g), 1, false,
                   now() - make_interval(secs => %s - g), 0, 0,
                   now() - make_interval(secs => %s - g), 3
            FROM generate_series(1, %s) AS g""",
        [raw.WIRE_NAME, raw.QUEUE, rows, rows, rows, rows],
    )
    # ... each with the transition log a real one keeps: enqueued, leased, succeeded.
    conn.execute(
        f"""INSERT INTO backwave_django_jobtransition
                (job_id, ordinal, recorded_at, state, attempt, failure_detail, actor)
            SELECT j.sequence, o.ordinal, j.terminal_at, o.state, o.attempt, NULL, o.actor
            FROM {T} j
            CROSS JOIN (VALUES (0, 0, 0, 'enqueue'), (1, 2, 1, 'bench-retained'),
                               (2, 3, 1, 'bench-retained')) AS o(ordinal, state, attempt, actor)"""
    )
    inserted_s = time.perf_counter() - started
    settle(conn, vacuum=True)
    conn.execute("VACUUM ANALYZE backwave_django_jobtransition")
    prepared_s = time.perf_counter() - started
    table_size = scalar(
        conn,
        f"SELECT pg_size_pretty(pg_total_relation_size('{T}') "
        "+ pg_total_relation_size('backwave_django_jobtransition'))",
    )

    base, _ = _prepare_backlog(ctx, ctx.n)
    hand_plan = _explain(conn, raw.CLAIM_SQL, [raw.QUEUE, datetime.now(UTC), 32])
    orm = _orm_claim_sql()
    orm_plan = _explain_orm(*orm) if orm else None
    # _prepare_backlog already enqueued the jobs: run the worker on them (same code path as the
    # empty-table run, without a second backlog).
    result_run = _process_existing(ctx, base, "scale-1")
    # The empty-table figure, measured right after under the same conditions (this machine's
    # noise is larger than the 10% the target allows); the processing step's figure is kept too.
    reset_tables(conn)
    empty = process_with_worker(ctx, 1, "scale-empty-1")
    earlier = ctx.results.get("processing", {}).get("worker_1")
    reset_tables(conn)
    return {
        "retained_rows": rows,
        "retained_transitions": rows * 3,
        "retained_insert_s": inserted_s,
        "retained_insert_and_vacuum_s": prepared_s,
        "tables_size_with_retained": table_size,
        "run": result_run,
        "empty_run": empty,
        "empty_rate": empty["rate"],
        "empty_steady_rate": empty["steady_rate"],
        "ratio": result_run["rate"] / empty["rate"],
        "steady_ratio": result_run["steady_rate"] / empty["steady_rate"],
        "ratio_vs_processing_step": (result_run["rate"] / earlier["rate"]) if earlier else None,
        "claim_plan": hand_plan,
        "claim_plan_uses_index": "backwave_job_claim" in hand_plan,
        "orm_claim_sql": orm[0] if orm else None,
        "orm_claim_plan": orm_plan,
        "orm_claim_plan_uses_index": ("backwave_job_claim" in orm_plan) if orm_plan else None,
    }


def _process_existing(ctx: Context, base: int, log_name: str) -> dict[str, Any]:
    n, conn = ctx.n, ctx.conn
    wall_start = time.time()
    started = time.perf_counter()
    worker = ctx.procs.start_worker(
        ["--burst", "--queues", raw.QUEUE, "--concurrency", str(ctx.concurrency)], log_name
    )
    done = wait_until(
        lambda: succeeded_since(conn, base) >= n,
        timeout=ctx.timeout_for(n),
        alive=lambda: worker.poll() is None,
    )
    elapsed = done - started
    first, last = _terminal_span(conn, base)
    code: int | None
    try:
        code = worker.wait(30)
    except subprocess.TimeoutExpired:
        code = ctx.procs.stop_worker(worker)
    return {
        "jobs": n,
        "seconds": elapsed,
        "rate": _rate(n, elapsed),
        "first_job_done_after_s": first - wall_start,
        "steady_rate": _rate(n - 1, last - first),
        "exit_code": code,
    }


# --- 5. Memory --------------------------------------------------------------------------------


def _outstanding(conn: psycopg.Connection[Any]) -> int:
    """Scheduled + Leased jobs, counted on their small partial indexes (cheap at any table size)."""
    return int(
        scalar(
            conn,
            f"SELECT (SELECT count(*) FROM {T} WHERE state = 0) + (SELECT count(*) FROM {T} WHERE state = 2)",
        )
    )


def memory(ctx: Context) -> dict[str, Any]:
    conn, marks = ctx.conn, sorted(ctx.memory_marks)
    total, chunk, max_backlog = marks[-1], 2000, 20_000
    reset_tables(conn)
    worker = _start_idle_worker(ctx, "memory", settle_s=1.0)
    samples: dict[int, dict[str, Any]] = {}
    curve: list[dict[str, Any]] = []
    started = time.perf_counter()
    try:
        start_rss = rss_kb(worker.pid)
        enqueued, next_curve = 0, 0
        # A server with autovacuum off (some CI images) would let dead row versions pile up in the
        # job table's indexes for the whole run and slow every claim; stand in for autovacuum
        # (whose 0003 settings would visit the table after about 1,000 + 2 % changes).
        vacuum_every = 0 if autovacuum_on(conn) else 20_000
        next_vacuum = vacuum_every
        vacuums = 0
        deadline = started + ctx.timeout_for(total)
        while len(samples) < len(marks):
            if worker.poll() is not None:
                raise RuntimeError(f"the worker exited with code {worker.returncode}")
            if time.perf_counter() > deadline:
                raise TimeoutError(f"only {enqueued - _outstanding(conn)} of {total} done in time")
            done = enqueued - _outstanding(conn)
            if done >= next_curve:
                curve.append({"succeeded": done, **rss_kb(worker.pid)})
                next_curve += 10_000
            for mark in marks:
                if mark not in samples and done >= mark:
                    samples[mark] = {
                        "succeeded": done,
                        "at_s": time.perf_counter() - started,
                        **rss_kb(worker.pid),
                    }
            if vacuum_every and done >= next_vacuum:
                for table in JOB_TABLES:
                    conn.execute(f"VACUUM {table}")
                vacuums += 1
                next_vacuum += vacuum_every
            if enqueued < total and enqueued - done < max_backlog:
                size = min(chunk, total - enqueued)
                enqueue_many([noop.prepare() for _ in range(size)])
                enqueued += size
            else:
                time.sleep(0.05)
        elapsed = time.perf_counter() - started
        succeeded = succeeded_since(conn, 0)
    finally:
        ctx.procs.stop_worker(worker)
    reset_tables(conn)
    first, last = samples[marks[0]], samples[marks[-1]]
    return {
        "marks": marks,
        "start": start_rss,
        "samples": {str(k): v for k, v in samples.items()},
        "curve": curve,
        "growth_pct": (last["VmRSS"] - first["VmRSS"]) / first["VmRSS"] * 100,
        "succeeded": succeeded,
        "seconds": elapsed,
        "rate": _rate(total, elapsed),
        "harness_vacuums": vacuums,
    }


# --- 6. Dependencies --------------------------------------------------------------------------


def _times(conn: psycopg.Connection[Any], ids: list[uuid.UUID]) -> tuple[float, float, int]:
    """(min, max) terminal_at (epoch seconds) and how many of ``ids`` are Succeeded."""
    row = conn.execute(
        f"SELECT extract(epoch FROM min(terminal_at)), extract(epoch FROM max(terminal_at)), count(*) "
        f"FROM {T} WHERE job_id = ANY(%s) AND state = 3",
        [ids],
    ).fetchone()
    assert row is not None
    return float(row[0] or 0), float(row[1] or 0), int(row[2])


def dependencies(ctx: Context) -> dict[str, Any]:
    conn, fan = ctx.conn, ctx.fan
    reset_tables(conn)
    worker = _start_idle_worker(ctx, "dependencies")
    alive = lambda: worker.poll() is None  # noqa: E731
    try:
        # 1 parent -> fan children, all committed together so the parent cannot run first.
        parent = noop.prepare()
        children = [noop.using(parents=[parent.job_id]).prepare() for _ in range(fan)]
        with transaction.atomic():
            enqueue_many([parent, *children])
        child_ids = [c.job_id for c in children]
        wait_until(lambda: _times(conn, child_ids)[2] >= fan, timeout=ctx.timeout_for(fan), alive=alive)
        parent_done = _times(conn, [parent.job_id])[1]
        first_child, last_child, _ = _times(conn, child_ids)
        fan_out = {
            "children": fan,
            "parent_to_first_child_ms": (first_child - parent_done) * 1000,
            "parent_to_all_children_s": last_child - parent_done,
            "children_rate": _rate(fan, last_child - parent_done),
        }
        # fan parents -> 1 child.
        parents = [noop.prepare() for _ in range(fan)]
        child = noop.using(parents=[p.job_id for p in parents]).prepare()
        with transaction.atomic():
            enqueue_many([*parents, child])
        wait_until(lambda: _times(conn, [child.job_id])[2] == 1, timeout=ctx.timeout_for(fan), alive=alive)
        first_parent, last_parent, _ = _times(conn, [p.job_id for p in parents])
        child_done = _times(conn, [child.job_id])[1]
        enqueued = float(
            scalar(conn, f"SELECT extract(epoch FROM enqueued_at) FROM {T} WHERE job_id = %s", [child.job_id])
        )
        fan_in = {
            "parents": fan,
            "last_parent_to_child_ms": (child_done - last_parent) * 1000,
            "parents_span_s": last_parent - first_parent,
            "enqueue_to_child_done_s": child_done - enqueued,
        }
    finally:
        ctx.procs.stop_worker(worker)
    reset_tables(conn)
    return {"fan_out": fan_out, "fan_in": fan_in}
