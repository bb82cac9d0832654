"""The long-horizon scenario: what the queue costs its database at a steady rate, before, during
and after a transaction that holds the horizon (``--only horizon``; see docs/performance.md).

A producer process enqueues trivial jobs at a fixed rate through the public API (``noop.enqueue()``,
one job per transaction) into a private PostgreSQL cluster (benchmarks/cluster.py: autovacuum on,
``pg_stat_statements`` loaded), and one ``backwave_worker`` works them. The run is cut into phases:

- **clean**: nothing else on the server;
- **held**: another connection ran ``BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT txid_current();``
  and sits idle in the transaction, holding a snapshot and a transaction id (so no row version
  that died since can be removed);
- **recovery**: that transaction has committed.

At each phase boundary the harness samples the CPU of the cluster's processes and of the worker's
(``/proc``), ``pg_stat_statements`` and the job table's sizes; afterwards it reads the phase's jobs
from their rows and transition log. Every figure is per phase, and the costs per completed job.

Top-level imports stay light (no Django): the producer is a spawned process that imports this
module before it configures Django for the private cluster.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg

from . import raw
from .harness import ProcStat, parse_stat, percentile, scalar
from .load import MARK, SteadyLoad, conninfo_of, private_database, server
from .settings import BATCH_WINDOW_ENV

if TYPE_CHECKING:
    from .measures import Context

T = raw.JOB_TABLE
TRANSITIONS = "backwave_django_jobtransition"
CLAIM_INDEX = "backwave_job_claim"
DATABASE = "backwave_horizon"
#: Picks the claim out of pg_stat_statements (backwave_django/store/postgres/sql/claims.sql).
CLAIM_LIKE = "%FOR UPDATE SKIP LOCKED%"
PHASES = ("clean", "held", "recovery")


@dataclass(frozen=True)
class Sample:
    """The counters read at a phase boundary; a phase's figures are differences of two."""

    at: float
    postgres_cpu_s: float
    worker_cpu_s: float
    statements: int
    claim_calls: int
    claim_ms: float
    claim_hits: int
    table_bytes: int
    index_bytes: int
    claim_index_bytes: int
    transitions_bytes: int
    dead_tuples: int
    autovacuums: int
    #: Calls so far per statement (its text, shortened), for the statements behind the count.
    by_statement: dict[str, int] = field(default_factory=dict)
    #: Execution time so far per statement (ms), for where the server's time goes.
    time_by_statement: dict[str, float] = field(default_factory=dict)
    #: Plans made so far per statement, and their planning time (ms): a prepared statement whose
    #: plans keep pace with its calls is planned afresh at each call (``track_planning``).
    plans_by_statement: dict[str, int] = field(default_factory=dict)
    plan_time_by_statement: dict[str, float] = field(default_factory=dict)
    #: The server's CPU so far by role (:func:`cpu_by_role`).
    postgres_cpu_by_role: dict[str, float] = field(default_factory=dict)


def phase_plan(phase_s: float, hold_s: float) -> list[tuple[str, float]]:
    """The phases in order with their lengths: clean and recovery ``phase_s``, held ``hold_s``."""
    if phase_s <= 0 or hold_s <= 0:
        raise ValueError("phases must last a positive number of seconds")
    return [("clean", phase_s), ("held", hold_s), ("recovery", phase_s)]


def read_stats(proc: Path = Path("/proc")) -> dict[int, ProcStat]:
    """Every process's ``stat`` (processes that end while being read are left out)."""
    stats = {}
    for entry in proc.glob("[0-9]*/stat"):
        try:
            stats[int(entry.parent.name)] = parse_stat(entry.read_text())
        except (OSError, ValueError, IndexError):
            continue
    return stats


def cluster_ticks(stats: Mapping[int, ProcStat], postmaster: int) -> int:
    """CPU ticks of a PostgreSQL cluster: the postmaster with the backends it has reaped (its
    children's ticks), and every live process it started (backends, autovacuum, checkpointer …)."""
    return sum(
        stat.ticks + stat.children_ticks
        for pid, stat in stats.items()
        if pid == postmaster or stat.ppid == postmaster
    )


#: The application names the load's connections announce (benchmarks/load.py: ``PGAPPNAME``).
WORKER_APP, PRODUCER_APP = "backwave-worker", "backwave-producer"
#: The roles the server's CPU is split into, in the report's order.
ROLES = ("worker", "producer", "autovacuum", "background", "ended", "harness")


def role_of(backend_type: str, application_name: str) -> str:
    """Which role a server process plays: a backend of the worker or of the producer, an
    autovacuum process, another background process (WAL writer, checkpointer …), or a backend
    of this harness (its own reads)."""
    if backend_type == "client backend":
        return {WORKER_APP: "worker", PRODUCER_APP: "producer"}.get(application_name, "harness")
    return "autovacuum" if backend_type.startswith("autovacuum") else "background"


def cpu_by_role(stats: Mapping[int, ProcStat], postmaster: int, roles: Mapping[int, str]) -> dict[str, int]:
    """:func:`cluster_ticks` split by role (``roles``: pid → role, from ``pg_stat_activity``): a
    live process by its role, and the processes that ended (backends, autovacuum workers: their
    ticks are the postmaster's children's) with the postmaster itself as ``ended``."""
    ticks = dict.fromkeys(ROLES, 0)
    for pid, stat in stats.items():
        if pid == postmaster:
            ticks["ended"] += stat.ticks + stat.children_ticks
        elif stat.ppid == postmaster:
            ticks[roles.get(pid, "background")] += stat.ticks + stat.children_ticks
    return ticks


def group_ticks(stats: Mapping[int, ProcStat], pgrp: int) -> int:
    """CPU ticks of a process group (a worker started in a session of its own, and its children)."""
    return sum(stat.ticks + stat.children_ticks for stat in stats.values() if stat.pgrp == pgrp)


def _per_job(value: float, jobs: int) -> float | None:
    return value / jobs if jobs else None


def _ranked(
    before: Mapping[str, float], after: Mapping[str, float], jobs: int, top: int
) -> list[tuple[str, float]]:
    """Each statement's growth in a phase per completed job, most first (the first ``top``)."""
    if not jobs:
        return []
    grown = {text: value - before.get(text, 0) for text, value in after.items()}
    ranked = sorted(((value / jobs, text) for text, value in grown.items() if value > 0), reverse=True)
    return [(text, per_job) for per_job, text in ranked[:top]]


def statement_time(before: Sample, after: Sample, jobs: int, top: int = 8) -> list[tuple[str, float]]:
    """The statements that took the most execution time in a phase, with their ms per completed
    job, most first."""
    return _ranked(before.time_by_statement, after.time_by_statement, jobs, top)


def top_statements(before: Sample, after: Sample, jobs: int, top: int = 8) -> list[tuple[str, float]]:
    """The statements called most in a phase, with their calls per completed job, most first."""
    return _ranked(before.by_statement, after.by_statement, jobs, top)


def planning(before: Sample, after: Sample, jobs: int, top: int = 8) -> list[tuple[str, float, float]]:
    """The statements planned most in a phase: plans and planning time (ms) per completed job."""
    plans = _ranked(before.plans_by_statement, after.plans_by_statement, jobs, top)
    every = len(after.plan_time_by_statement)
    spent = dict(_ranked(before.plan_time_by_statement, after.plan_time_by_statement, jobs, every))
    return [(text, per_job, spent.get(text, 0.0)) for text, per_job in plans]


def phase_figures(
    name: str,
    before: Sample,
    after: Sample,
    *,
    enqueued: int,
    completed: int,
    claim_ms: Sequence[float],
    not_started: int,
    enqueue_ms: Sequence[float] = (),
) -> dict[str, Any]:
    """One phase's figures from the samples at its ends and the jobs read back from their rows:
    rates per second of the phase, costs per completed job, claim latency percentiles."""
    seconds = after.at - before.at
    latencies = sorted(claim_ms)
    enqueues = sorted(enqueue_ms)
    claims = after.claim_calls - before.claim_calls
    postgres_s = after.postgres_cpu_s - before.postgres_cpu_s
    worker_s = after.worker_cpu_s - before.worker_cpu_s
    return {
        "phase": name,
        "seconds": seconds,
        "enqueued": enqueued,
        "completed": completed,
        "enqueue_rate": enqueued / seconds,
        "completion_rate": completed / seconds,
        "claim_p50_ms": percentile(latencies, 0.50) if latencies else None,
        "claim_p99_ms": percentile(latencies, 0.99) if latencies else None,
        "claim_max_ms": latencies[-1] if latencies else None,
        "not_started_at_end": not_started,
        "enqueue_p50_ms": percentile(enqueues, 0.50) if enqueues else None,
        "enqueue_p99_ms": percentile(enqueues, 0.99) if enqueues else None,
        "postgres_cores": postgres_s / seconds,
        "worker_cores": worker_s / seconds,
        "postgres_cpu_ms_per_job": _per_job(postgres_s * 1000, completed),
        "postgres_cpu_ms_per_job_by_role": {
            role: _per_job(
                (after.postgres_cpu_by_role.get(role, 0.0) - before.postgres_cpu_by_role.get(role, 0.0))
                * 1000,
                completed,
            )
            for role in ROLES
        },
        "worker_cpu_ms_per_job": _per_job(worker_s * 1000, completed),
        "statements_per_job": _per_job(after.statements - before.statements, completed),
        "top_statements_per_job": top_statements(before, after, completed),
        "statement_ms_per_job": statement_time(before, after, completed),
        "plans_per_job": planning(before, after, completed),
        "table_bytes_per_job": _per_job(after.table_bytes - before.table_bytes, completed),
        "index_bytes_per_job": _per_job(after.index_bytes - before.index_bytes, completed),
        "transitions_bytes_per_job": _per_job(after.transitions_bytes - before.transitions_bytes, completed),
        "claim_index_bytes_end": after.claim_index_bytes,
        "claim_calls": claims,
        "claim_mean_ms": (after.claim_ms - before.claim_ms) / claims if claims else None,
        "claim_hits_per_call": (after.claim_hits - before.claim_hits) / claims if claims else None,
        "dead_tuples_end": after.dead_tuples,
        "autovacuums": after.autovacuums - before.autovacuums,
        "table_bytes_end": after.table_bytes,
        "index_bytes_end": after.index_bytes,
    }


# --- Reading the server ----------------------------------------------------------------------

_STATEMENTS_SQL = f"""{MARK} SELECT coalesce(sum(calls), 0),
       coalesce(sum(calls) FILTER (WHERE claim), 0),
       coalesce(sum(total_exec_time) FILTER (WHERE claim), 0),
       coalesce(sum(shared_blks_hit) FILTER (WHERE claim), 0)
FROM (SELECT calls, total_exec_time, shared_blks_hit, query LIKE %s AND query LIKE %s AS claim
      FROM pg_stat_statements
      WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
        AND query NOT LIKE %s) s"""
_BY_STATEMENT_SQL = f"""{MARK} SELECT left(regexp_replace(query, '\\s+', ' ', 'g'), 100), sum(calls),
       sum(total_exec_time), sum(plans), sum(total_plan_time)
FROM pg_stat_statements
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND query NOT LIKE %s
GROUP BY 1"""
_SIZES_SQL = f"""{MARK} SELECT pg_relation_size('{T}'), pg_indexes_size('{T}'),
       coalesce(pg_relation_size(to_regclass('{CLAIM_INDEX}')), 0), pg_total_relation_size('{TRANSITIONS}'),
       coalesce((SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = '{T}'), 0),
       coalesce((SELECT autovacuum_count FROM pg_stat_user_tables WHERE relname = '{T}'), 0)"""


def sample(conn: psycopg.Connection[Any], postmaster: int, worker_pgrp: int) -> Sample:
    roles = {
        int(pid): role_of(str(kind or ""), str(name or ""))
        for pid, kind, name in conn.execute(
            f"{MARK} SELECT pid, backend_type, application_name FROM pg_stat_activity"
        )
    }
    stats = read_stats()
    tick = os.sysconf("SC_CLK_TCK")
    statements = conn.execute(_STATEMENTS_SQL, [CLAIM_LIKE, f"%{T}%", f"%{MARK}%"]).fetchone()
    sizes = conn.execute(_SIZES_SQL).fetchone()
    by_text = [
        (str(text), int(calls), float(ms), int(plans), float(plan_ms))
        for text, calls, ms, plans, plan_ms in conn.execute(_BY_STATEMENT_SQL, [f"%{MARK}%"])
    ]
    assert statements is not None
    assert sizes is not None
    return Sample(
        at=time.time(),
        postgres_cpu_s=cluster_ticks(stats, postmaster) / tick,
        worker_cpu_s=group_ticks(stats, worker_pgrp) / tick,
        statements=int(statements[0]),
        claim_calls=int(statements[1]),
        claim_ms=float(statements[2]),
        claim_hits=int(statements[3]),
        table_bytes=int(sizes[0]),
        index_bytes=int(sizes[1]),
        claim_index_bytes=int(sizes[2]),
        transitions_bytes=int(sizes[3]),
        dead_tuples=int(sizes[4]),
        autovacuums=int(sizes[5]),
        by_statement={text: calls for text, calls, *_ in by_text},
        time_by_statement={text: ms for text, _, ms, *_ in by_text},
        plans_by_statement={text: plans for text, _, _, plans, _ in by_text},
        plan_time_by_statement={text: plan_ms for text, *_, plan_ms in by_text},
        postgres_cpu_by_role={role: n / tick for role, n in cpu_by_role(stats, postmaster, roles).items()},
    )


def jobs_of_phase(conn: psycopg.Connection[Any], start: float, end: float) -> dict[str, Any]:
    """The jobs enqueued in ``[start, end)`` (their claim latency: enqueue → Leased, from the
    transition log) and the jobs that finished in it."""
    window = [start, end]
    started = conn.execute(
        f"""{MARK} SELECT extract(epoch FROM min(t.recorded_at) - j.enqueued_at) * 1000
            FROM {T} j LEFT JOIN {TRANSITIONS} t ON t.job_id = j.sequence AND t.state = 2
            WHERE j.enqueued_at >= to_timestamp(%s) AND j.enqueued_at < to_timestamp(%s)
            GROUP BY j.sequence""",
        window,
    ).fetchall()
    completed = scalar(
        conn,
        f"{MARK} SELECT count(*) FROM {T} WHERE state = 3 "
        "AND terminal_at >= to_timestamp(%s) AND terminal_at < to_timestamp(%s)",
        window,
    )
    latencies = [float(row[0]) for row in started if row[0] is not None]
    return {
        "enqueued": len(started),
        "completed": int(completed),
        "claim_ms": latencies,
        "not_started": len(started) - len(latencies),
    }


# --- The producer's timings and the holder --------------------------------------------------


def read_timings(text: str) -> list[tuple[float, float]]:
    """The producer's timings file: (wall-clock start, duration in ms) per enqueue."""
    return [(float(at), float(ms)) for at, ms in (line.split() for line in text.splitlines() if line.strip())]


def enqueue_ms(timings: Sequence[tuple[float, float]], start: float, end: float) -> list[float]:
    """The durations of the enqueues that began in ``[start, end)``."""
    return [ms for at, ms in timings if start <= at < end]


class Holder:
    """A connection idle in a REPEATABLE READ transaction that has a snapshot and an xid."""

    def __init__(self, conninfo: dict[str, Any]) -> None:
        self.conn = psycopg.connect(**conninfo, autocommit=True)
        self.xid: int | None = None

    def hold(self) -> None:
        self.conn.execute(f"{MARK} BEGIN ISOLATION LEVEL REPEATABLE READ")
        self.xid = int(scalar(self.conn, f"{MARK} SELECT txid_current()"))

    def release(self) -> None:
        self.conn.execute("COMMIT")

    def close(self) -> None:
        self.conn.close()


# --- The scenario ----------------------------------------------------------------------------


def _run_phases(
    load: SteadyLoad, conn: psycopg.Connection[Any], ctx: Context, warmup_s: float
) -> tuple[list[Sample], int | None]:
    """Start the worker and the producer, run the phases, and stop both; returns the samples at the
    phases' boundaries and the held transaction's id."""
    plan = phase_plan(ctx.horizon_phase, ctx.horizon_hold)
    postmaster = load.cluster.postmaster_pid()
    holder = Holder({**conninfo_of(load.cluster.port), "dbname": DATABASE})
    try:
        load.start()
        time.sleep(warmup_s)
        samples = [sample(conn, postmaster, load.worker_pid)]
        for name, seconds in plan:
            if name == "held":
                holder.hold()
            load.run_until(samples[-1].at + seconds, f"in the {name} phase")
            samples.append(sample(conn, postmaster, load.worker_pid))
            if name == "held":
                holder.release()
        load.finish()
    finally:
        holder.close()
        load.stop()
    return samples, holder.xid


def horizon(ctx: Context) -> dict[str, Any]:
    """The scenario on a private cluster, started here and stopped and removed on every way out."""
    with private_database(ctx, DATABASE) as (cluster, conn, env):
        if ctx.horizon_batch_window_ms:
            env = {**env, BATCH_WINDOW_ENV: f"{ctx.horizon_batch_window_ms:g}"}
        server_settings = server(conn, cluster)
        warmup_s = min(5.0, ctx.horizon_phase / 4)
        timings = cluster.folder / "enqueues.txt"
        plan = phase_plan(ctx.horizon_phase, ctx.horizon_hold)
        load = SteadyLoad(
            ctx,
            conn,
            cluster,
            env,
            rate=ctx.horizon_rate,
            seconds=warmup_s + sum(seconds for _, seconds in plan),
            timings=timings,
            log_name="horizon",
        )
        samples, held_xid = _run_phases(load, conn, ctx, warmup_s)
        enqueues = read_timings(timings.read_text()) if timings.exists() else []
        phases = []
        for (name, _), before, after in zip(plan, samples[:-1], samples[1:], strict=True):
            jobs = jobs_of_phase(conn, before.at, after.at)
            phases.append(
                phase_figures(
                    name,
                    before,
                    after,
                    enqueued=jobs["enqueued"],
                    completed=jobs["completed"],
                    claim_ms=jobs["claim_ms"],
                    not_started=jobs["not_started"],
                    enqueue_ms=enqueue_ms(enqueues, before.at, after.at),
                )
            )
    return {
        "server": server_settings,
        "rate": ctx.horizon_rate,
        "concurrency": ctx.concurrency,
        "phase_s": ctx.horizon_phase,
        "hold_s": ctx.horizon_hold,
        "batch_window_ms": ctx.horizon_batch_window_ms,
        "held_xid": held_xid,
        "warmup_s": warmup_s,
        "phases": phases,
    }


# --- The report ------------------------------------------------------------------------------


def _fmt(value: float | None, spec: str, unit: str = "") -> str:
    return "—" if value is None else f"{value:{spec}}{unit}"


#: The table's rows: a label, the phase figure and its format.
FIGURES = (
    ("Completion rate", "completion_rate", ",.0f", " jobs/s"),
    ("Enqueue rate (producer)", "enqueue_rate", ",.0f", " jobs/s"),
    ("Claim latency p50 (enqueue → Leased)", "claim_p50_ms", ".1f", " ms"),
    ("Claim latency p99", "claim_p99_ms", ".1f", " ms"),
    ("`noop.enqueue()` p50", "enqueue_p50_ms", ".2f", " ms"),
    ("`noop.enqueue()` p99", "enqueue_p99_ms", ".2f", " ms"),
    ("PostgreSQL CPU per job", "postgres_cpu_ms_per_job", ".2f", " ms"),
    ("… in the worker's backends", "postgres_cpu_ms_per_job_by_role.worker", ".2f", " ms"),
    ("… in the producer's backend", "postgres_cpu_ms_per_job_by_role.producer", ".2f", " ms"),
    ("… in autovacuum", "postgres_cpu_ms_per_job_by_role.autovacuum", ".2f", " ms"),
    (
        "… in background processes (WAL writer, checkpointer …)",
        "postgres_cpu_ms_per_job_by_role.background",
        ".2f",
        " ms",
    ),
    ("… in processes that ended (and the postmaster)", "postgres_cpu_ms_per_job_by_role.ended", ".2f", " ms"),
    ("… in this harness's own reads", "postgres_cpu_ms_per_job_by_role.harness", ".2f", " ms"),
    ("PostgreSQL CPU", "postgres_cores", ".2f", " cores"),
    ("Worker CPU per job", "worker_cpu_ms_per_job", ".2f", " ms"),
    ("Statements per job (pg_stat_statements calls)", "statements_per_job", ".1f", ""),
    ("Job table (heap) growth per job", "table_bytes_per_job", ",.0f", " B"),
    ("Job table indexes growth per job", "index_bytes_per_job", ",.0f", " B"),
    ("Transition log growth per job", "transitions_bytes_per_job", ",.0f", " B"),
    ("Claim statement mean time", "claim_mean_ms", ".3f", " ms"),
    ("Claim statement shared buffers hit per call", "claim_hits_per_call", ",.1f", ""),
    ("Claim index size at the phase's end", "claim_index_bytes_end", ",.0f", " B"),
    ("Dead tuples in the job table at the phase's end", "dead_tuples_end", ",.0f", ""),
    ("Autovacuums of the job table in the phase", "autovacuums", ",.0f", ""),
)


def _figure(phase: dict[str, Any], key: str) -> Any:
    """A phase's figure by key; ``a.b`` reads entry ``b`` of figure ``a``."""
    value: Any = phase
    for part in key.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def table(result: dict[str, Any]) -> list[dict[str, str]]:
    """One row per figure, one column per phase."""
    rows = []
    for label, key, spec, unit in FIGURES:
        row = {"figure": label}
        for phase in result["phases"]:
            row[phase["phase"]] = _fmt(_figure(phase, key), spec, unit)
        rows.append(row)
    return rows


def markdown(result: dict[str, Any]) -> str:
    names = [phase["phase"] for phase in result["phases"]]
    header = [
        "Figure",
        *(f"{name} ({phase['seconds']:.0f} s)" for name, phase in zip(names, result["phases"], strict=True)),
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] * len(header)) + "|"]
    lines += [
        "| " + " | ".join([row["figure"], *(row[name] for name in names)]) + " |" for row in table(result)
    ]
    return "\n".join(lines)


def _window(ms: float | None) -> str:
    return f" with `BATCH_WINDOW` {ms:g} ms" if ms else ""


def heading(result: dict[str, Any]) -> str:
    server = result["server"]
    return (
        f"Long-horizon scenario: {result['rate']:g} jobs/s offered by `noop.enqueue()` (one per "
        f"transaction), one `backwave_worker --concurrency {result['concurrency']}`"
        f"{_window(result.get('batch_window_ms'))}, phases clean "
        f"{result['phase_s']:g} s → held (idle in a REPEATABLE READ transaction with xid "
        f"{result['held_xid']}) {result['hold_s']:g} s → "
        f"recovery {result['phase_s']:g} s; PostgreSQL {server['server_version']} on a {server['kind']}, "
        f"port {server['port']}, autovacuum={server['autovacuum']}"
    )


def ratio(result: dict[str, Any], key: str) -> float | None:
    """The held phase's figure over the clean phase's (None when either is missing or zero)."""
    by_name = {phase["phase"]: phase for phase in result["phases"]}
    clean, held = by_name.get("clean", {}).get(key), by_name.get("held", {}).get(key)
    return held / clean if clean and held is not None else None


def details(result: dict[str, Any], top: int = 5) -> list[str]:
    """Per phase, the statements behind the count (calls per completed job, most first) and where
    their execution time goes (ms per completed job, most first)."""
    lines = [
        f"{phase['phase']}: statements per job "
        + "; ".join(f"`{text[:70]}` {per_job:.2f}" for text, per_job in phase["top_statements_per_job"][:top])
        for phase in result["phases"]
        if phase.get("top_statements_per_job")
    ]
    lines += [
        f"{phase['phase']}: execution time per job "
        + "; ".join(f"`{text[:70]}` {ms:.3f} ms" for text, ms in phase["statement_ms_per_job"][:top])
        for phase in result["phases"]
        if phase.get("statement_ms_per_job")
    ]
    lines += [
        f"{phase['phase']}: plans per job "
        + "; ".join(
            f"`{text[:70]}` {plans:.2f} ({ms:.3f} ms)" for text, plans, ms in phase["plans_per_job"][:top]
        )
        for phase in result["phases"]
        if phase.get("plans_per_job")
    ]
    return lines
