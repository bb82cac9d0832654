"""The retention scenario: do retention and purge keep the job tables at a steady size under a
constant load? (``--only retention``; see docs/performance.md, "Size under constant load".)

On a private PostgreSQL cluster (benchmarks/cluster.py: autovacuum on), a producer enqueues trivial
jobs at a fixed rate (benchmarks/load.py) and one ``backwave_worker`` works them for
``--retention-minutes``, with Succeeded jobs kept only ``--retention-keep`` seconds
(``BACKWAVE["RETENTION"]``, through ``BACKWAVE_BENCH_RETENTION_S`` in benchmarks/settings.py), so
the worker's maintenance purges all along the run. Every ``--retention-interval`` seconds the
harness samples the job table's heap, each of its indexes, the transition log, live and dead tuples
and the jobs completed so far; the report is that curve, the verdict of :data:`RULE`, and the
bytes per processed job in the first minute against the run's last third.

Top-level imports stay light (no Django), like benchmarks/horizon.py.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import psycopg

from . import raw
from .load import MARK, SteadyLoad, private_database, server

if TYPE_CHECKING:
    from .measures import Context

T = raw.JOB_TABLE
TRANSITIONS = "backwave_django_jobtransition"
DATABASE = "backwave_retention"
#: The verdict's bound: the size may grow by at most this fraction over the run's last third.
STEADY_GROWTH = 0.10
RULE = (
    "steady when the total size (the job table's heap + its indexes + the transition log) at the "
    f"end is at most {STEADY_GROWTH:.0%} above its size at the start of the run's last third"
)
#: The server settings that decide when autovacuum visits the tables, reported with the run.
AUTOVACUUM_SETTINGS = (
    "autovacuum_naptime",
    "autovacuum_vacuum_threshold",
    "autovacuum_vacuum_scale_factor",
    "autovacuum_vacuum_insert_threshold",
    "autovacuum_vacuum_insert_scale_factor",
    "autovacuum_vacuum_cost_limit",
    "autovacuum_vacuum_cost_delay",
)


@dataclass(frozen=True)
class SizeSample:
    """What the harness reads every interval. ``at`` counts seconds from the load's start."""

    at: float
    heap_bytes: int
    #: Each index of the job table, by name.
    index_bytes: dict[str, int]
    #: The transition log: heap, indexes and TOAST (``pg_total_relation_size``).
    transitions_bytes: int
    live_tuples: int
    dead_tuples: int
    transitions_live_tuples: int
    transitions_dead_tuples: int
    #: Jobs enqueued so far (the highest ``sequence``).
    enqueued: int
    #: Jobs enqueued so far less the jobs not yet ended.
    completed: int
    #: Ended jobs still in the table (retention keeps them; the rest were purged).
    retained: int
    #: How long ago the oldest retained job ended (purge's lag is this less the retention).
    oldest_ended_s: float | None
    autovacuums: int
    transitions_autovacuums: int

    @property
    def indexes_bytes(self) -> int:
        return sum(self.index_bytes.values())

    @property
    def total_bytes(self) -> int:
        return self.heap_bytes + self.indexes_bytes + self.transitions_bytes

    @property
    def purged(self) -> int:
        return self.completed - self.retained


def sample_times(minutes: float, interval: float) -> list[float]:
    """When to sample, in seconds from the load's start: 0, every ``interval``, and the end."""
    if minutes <= 0 or interval <= 0:
        raise ValueError("the run and the sampling interval must last a positive number of seconds")
    end = minutes * 60
    times = [0.0]
    while times[-1] + interval < end - 1e-9:
        times.append(times[-1] + interval)
    return [*times, end]


def last_third(samples: Sequence[SizeSample]) -> tuple[SizeSample, SizeSample]:
    """The samples that bound the run's last third: the last one taken at or before two thirds of
    the run, and the final one."""
    if len(samples) < 3:
        raise ValueError(f"a size curve needs at least 3 samples, got {len(samples)}")
    first, last = samples[0], samples[-1]
    cut = first.at + (last.at - first.at) * 2 / 3
    start = max((s for s in samples[:-1] if s.at <= cut + 1e-9), key=lambda s: s.at)
    return start, last


def growth(before: int, after: int) -> float | None:
    """The fractional growth from ``before`` to ``after`` (None when ``before`` is 0)."""
    return (after - before) / before if before else None


def verdict(samples: Sequence[SizeSample], limit: float = STEADY_GROWTH) -> dict[str, Any]:
    """Whether the size is steady (:data:`RULE`), and the growth of each relation over the last
    third, so a verdict of *growing* names what grows."""
    start, end = last_third(samples)
    total = growth(start.total_bytes, end.total_bytes)
    relations = {
        "job table heap": (start.heap_bytes, end.heap_bytes),
        **{
            f"index {name}": (start.index_bytes.get(name, 0), size)
            for name, size in sorted(end.index_bytes.items())
        },
        "transition log": (start.transitions_bytes, end.transitions_bytes),
    }
    return {
        "steady": total is not None and total <= limit,
        "growth": total,
        "limit": limit,
        "rule": RULE,
        "from_s": start.at,
        "to_s": end.at,
        "from_bytes": start.total_bytes,
        "to_bytes": end.total_bytes,
        "by_relation": {
            name: {"from_bytes": a, "to_bytes": b, "growth": growth(a, b)}
            for name, (a, b) in relations.items()
        },
    }


def bytes_per_job(before: SizeSample, after: SizeSample) -> float | None:
    """Growth of the total size per job completed between two samples (None when none was)."""
    jobs = after.completed - before.completed
    return (after.total_bytes - before.total_bytes) / jobs if jobs > 0 else None


def per_job(samples: Sequence[SizeSample], first_s: float = 60.0) -> dict[str, float | None]:
    """Bytes per processed job in the first ``first_s`` seconds (nothing purged yet when that is
    the retention or less) and over the last third (the steady state), and the whole footprint
    at the end per job still retained."""
    start, end = last_third(samples)
    first = next((s for s in samples if s.at >= first_s - 1e-9), samples[-1])
    return {
        "first_s": first.at,
        "first_minute": bytes_per_job(samples[0], first),
        "last_third": bytes_per_job(start, end),
        "footprint_per_retained_job": end.total_bytes / end.retained if end.retained else None,
    }


# --- Reading the server ----------------------------------------------------------------------

_SIZES_SQL = f"""{MARK} SELECT pg_relation_size('{T}'), pg_total_relation_size('{TRANSITIONS}'),
       j.n_live_tup, j.n_dead_tup, j.autovacuum_count, t.n_live_tup, t.n_dead_tup, t.autovacuum_count
FROM pg_stat_user_tables j, pg_stat_user_tables t
WHERE j.relname = '{T}' AND t.relname = '{TRANSITIONS}'"""
_INDEXES_SQL = f"""{MARK} SELECT indexrelname, pg_relation_size(indexrelid)
FROM pg_stat_user_indexes WHERE relname = '{T}' ORDER BY indexrelname"""
_JOBS_SQL = f"""{MARK} SELECT coalesce(max(sequence), 0), count(*) FILTER (WHERE terminal_at IS NULL),
       count(*) FILTER (WHERE terminal_at IS NOT NULL), extract(epoch FROM now() - min(terminal_at))
FROM {T}"""


def read_sample(conn: psycopg.Connection[Any], at: float) -> SizeSample:
    sizes = conn.execute(_SIZES_SQL).fetchone()
    jobs = conn.execute(_JOBS_SQL).fetchone()
    assert sizes is not None
    assert jobs is not None
    return SizeSample(
        at=at,
        heap_bytes=int(sizes[0]),
        index_bytes={str(name): int(size) for name, size in conn.execute(_INDEXES_SQL)},
        transitions_bytes=int(sizes[1]),
        live_tuples=int(sizes[2]),
        dead_tuples=int(sizes[3]),
        autovacuums=int(sizes[4]),
        transitions_live_tuples=int(sizes[5]),
        transitions_dead_tuples=int(sizes[6]),
        transitions_autovacuums=int(sizes[7]),
        enqueued=int(jobs[0]),
        completed=int(jobs[0]) - int(jobs[1]),
        retained=int(jobs[2]),
        oldest_ended_s=None if jobs[3] is None else float(jobs[3]),
    )


def _sample_along(
    load: SteadyLoad, conn: psycopg.Connection[Any], times: Sequence[float]
) -> list[SizeSample]:
    samples = []
    try:
        load.start()
        started = time.time()
        for at in times:
            load.run_until(started + at, f"{at:.0f} s into the run")
            samples.append(read_sample(conn, time.time() - started))
            print(f" {at:.0f}s", end="", flush=True)
        load.finish()
    finally:
        load.stop()
    return samples


def retention(ctx: Context) -> dict[str, Any]:
    """The scenario on a private cluster, started here and stopped and removed on every way out."""
    keep = ctx.retention_keep
    with private_database(ctx, DATABASE, {"BACKWAVE_BENCH_RETENTION_S": f"{keep:g}"}) as (cluster, conn, env):
        server_settings = server(conn, cluster, *AUTOVACUUM_SETTINGS)
        times = sample_times(ctx.retention_minutes, ctx.retention_interval)
        load = SteadyLoad(
            ctx,
            conn,
            cluster,
            env,
            rate=ctx.retention_rate,
            seconds=times[-1],
            timings=cluster.folder / "enqueues.txt",
            log_name="retention",
        )
        samples = _sample_along(load, conn, times)
    return {
        "server": server_settings,
        "rate": ctx.retention_rate,
        "concurrency": ctx.concurrency,
        "minutes": ctx.retention_minutes,
        "keep_s": keep,
        "interval_s": ctx.retention_interval,
        "samples": [{**asdict(s), "total_bytes": s.total_bytes, "purged": s.purged} for s in samples],
        "verdict": verdict(samples),
        "per_job": per_job(samples),
    }


# --- The report ------------------------------------------------------------------------------


def samples_of(result: Mapping[str, Any]) -> list[SizeSample]:
    """The samples back from the JSON form :func:`retention` returns."""
    names = SizeSample.__dataclass_fields__
    return [SizeSample(**{k: v for k, v in s.items() if k in names}) for s in result["samples"]]


def _mb(size: int) -> str:
    return f"{size / 1024 / 1024:.2f}"


def curve(result: Mapping[str, Any]) -> str:
    """The size curve as a Markdown table, a row per sample (sizes in MB)."""
    header = (
        "t (s) | enqueued | completed | retained | purged | heap MB | indexes MB | transitions MB | "
        "total MB | live / dead tuples | oldest ended (s) | autovacuums (jobs / transitions)"
    )
    lines = [f"| {header} |", "|" + "|".join(["---"] * (header.count("|") + 1)) + "|"]
    for s in samples_of(result):
        oldest = "—" if s.oldest_ended_s is None else f"{s.oldest_ended_s:.0f}"
        lines.append(
            f"| {s.at:.0f} | {s.enqueued:,} | {s.completed:,} | {s.retained:,} | {s.purged:,} | "
            f"{_mb(s.heap_bytes)} | {_mb(s.indexes_bytes)} | {_mb(s.transitions_bytes)} | "
            f"{_mb(s.total_bytes)} | {s.live_tuples:,} / {s.dead_tuples:,} | {oldest} | "
            f"{s.autovacuums} / {s.transitions_autovacuums} |"
        )
    return "\n".join(lines)


def index_curve(result: Mapping[str, Any]) -> str:
    """Each index of the job table, in kB, a row per sample."""
    samples = samples_of(result)
    names = sorted({name for s in samples for name in s.index_bytes})
    lines = ["| t (s) | " + " | ".join(names) + " |", "|" + "|".join(["---"] * (len(names) + 1)) + "|"]
    for s in samples:
        sizes = " | ".join(f"{s.index_bytes.get(name, 0) // 1024:,}" for name in names)
        lines.append(f"| {s.at:.0f} | {sizes} |")
    return "\n".join(lines)


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value:+.1%}"


def _bytes(value: float | None) -> str:
    return "—" if value is None else f"{value:,.0f} B"


def summary(result: Mapping[str, Any]) -> list[str]:
    """The verdict, the rule it applies, what grew over the last third, and the bytes per job."""
    v, p = result["verdict"], result["per_job"]
    end = samples_of(result)[-1]
    rates = (
        f"Over {end.at:.0f} s the producer enqueued {end.enqueued / end.at:,.0f} jobs/s (offered "
        f"{result['rate']:g}) and the worker completed {end.completed / end.at:,.0f} jobs/s; "
        f"{end.enqueued - end.completed:,} not ended at the end"
        if end.at > 0
        else "No time elapsed"
    )
    growing = [
        f"{name} {_pct(r['growth'])} ({r['from_bytes'] // 1024:,} → {r['to_bytes'] // 1024:,} kB)"
        for name, r in v["by_relation"].items()
        if r["growth"] is not None and r["growth"] > v["limit"]
    ]
    return [
        f"Verdict: {'STEADY' if v['steady'] else 'GROWING'}: total size {_mb(v['from_bytes'])} → "
        f"{_mb(v['to_bytes'])} MB from {v['from_s']:.0f} s to {v['to_s']:.0f} s ({_pct(v['growth'])}). "
        f"Rule: {v['rule']}.",
        "Grew by more than the bound over the last third: " + (", ".join(growing) if growing else "nothing"),
        f"Bytes per processed job: first {p['first_s']:.0f} s {_bytes(p['first_minute'])}; last third "
        f"{_bytes(p['last_third'])}; footprint at the end per retained job "
        f"{_bytes(p['footprint_per_retained_job'])}",
        rates,
    ]


def heading(result: Mapping[str, Any]) -> str:
    s = result["server"]
    return (
        f"Retention scenario: {result['rate']:g} jobs/s offered by `noop.enqueue()` (one per transaction) "
        f"for {result['minutes']:g} min, one `backwave_worker --concurrency {result['concurrency']}`, "
        f"Succeeded jobs retained {result['keep_s']:g} s, a sample every {result['interval_s']:g} s; "
        f"PostgreSQL {s['server_version']} on a {s['kind']}, port {s['port']}, autovacuum={s['autovacuum']} "
        f"(naptime {s.get('autovacuum_naptime')}, vacuum scale factor "
        f"{s.get('autovacuum_vacuum_scale_factor')}, threshold {s.get('autovacuum_vacuum_threshold')})"
    )


def report(result: Mapping[str, Any]) -> str:
    """What the run prints: the heading, the size curve, each index's curve and the summary."""
    return "\n\n".join(
        [
            heading(result),
            curve(result),
            "Each index of the job table (kB):",
            index_curve(result),
            "\n".join(f"- {line}" for line in summary(result)),
        ]
    )
