"""Profile the worker's hot path in one process: ``make profile``, or ``python -m benchmarks.profile``.

Drains N pre-enqueued noops with the worker's own loop (``Worker.run`` in burst mode, the same
code ``backwave_worker --burst`` runs) inside this process, so that a sampling profiler attached
to it sees the pump, the job threads and the outcome writer together, without interpreter and
Django start-up. ``make profile`` runs it under py-spy and writes a flame graph to
``benchmarks/results/profile.svg``. Printed either way:

- the rate (wall clock from the first claim to the last outcome written);
- CPU per job of this process (its threads together) and of PostgreSQL (every ``postgres``
  process on the machine, so run it on an otherwise idle server);
- every claim and outcome write: how many, their batch sizes, and their median wall time, and
  the median gap between one claim's return and the next claim (the jobs running, the pump's
  wake-ups).

It uses the harness's scratch database (``backwave_bench``, or ``--db``), re-created and dropped.
See docs/performance.md#profiling.
"""

from __future__ import annotations

import argparse
import collections
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    description = __doc__.split("\n\n")[0]
    parser = argparse.ArgumentParser(prog="python -m benchmarks.profile", description=description)
    parser.add_argument("--n", type=int, default=20_000, help="noops to drain (default 20000)")
    parser.add_argument(
        "--concurrency", type=int, default=None, help="the worker's slots (default BACKWAVE['CONCURRENCY'])"
    )
    parser.add_argument(
        "--prefetch", type=int, default=None, help="the worker's prefetch (default BACKWAVE['PREFETCH'])"
    )
    parser.add_argument(
        "--db",
        default=os.environ.get("BACKWAVE_BENCH_DB", "backwave_bench"),
        help="scratch database, dropped and re-created (default backwave_bench, or $BACKWAVE_BENCH_DB)",
    )
    parser.add_argument("--keep-db", action="store_true", help="leave the scratch database behind")
    parser.add_argument(
        "--job",
        choices=("noop", "loose"),
        default="noop",
        help="noop (default), or loose: noops under a concurrency limit that never binds "
        "(benchmarks/flow_jobs.py), the flow claim's path",
    )
    args = parser.parse_args(argv)
    if args.n < 1:
        parser.error("--n must be at least 1")
    if args.concurrency is not None and args.concurrency < 1:
        parser.error("--concurrency must be at least 1")
    if args.prefetch is not None and args.prefetch < 0:
        parser.error("--prefetch must be at least 0")
    return args


#: The counters read around the drain: row writes per job table, and commits.
TABLE_STATS = """
SELECT relname, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del FROM pg_stat_user_tables
WHERE relname LIKE 'backwave_django_%'
"""


def table_stats(conn: Any) -> dict[str, int]:
    """Rows inserted, updated (and of those HOT), deleted per table, and the database's commits."""
    counters: dict[str, int] = {}
    for table, *values in conn.execute(TABLE_STATS).fetchall():
        short = table.removeprefix("backwave_django_")
        for kind, value in zip(("ins", "upd", "hot_upd", "del"), values, strict=True):
            counters[f"{short}.{kind}"] = int(value)
    row = conn.execute("SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()")
    counters["commits"] = int(row.fetchone()[0])
    return counters


class Calls:
    """Batch sizes and wall times of one store function, recorded by wrapping it."""

    def __init__(self) -> None:
        self.sizes: collections.Counter[int] = collections.Counter()
        self.spans: list[tuple[float, float]] = []

    def wrap(self, function: Callable[..., Any], size: Callable[..., int]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            result = function(*args, **kwargs)
            self.spans.append((started, time.perf_counter()))
            self.sizes[size(args, kwargs, result)] += 1
            return result

        return wrapper

    def summary(self) -> str:
        calls = sum(self.sizes.values())
        jobs = sum(size * count for size, count in self.sizes.items())
        common = ", ".join(f"{count} of {size}" for size, count in self.sizes.most_common(4))
        walls = [end - start for start, end in self.spans]
        return (
            f"{calls} calls, {jobs / max(calls, 1):.1f} jobs each on average (most common: {common}); "
            f"median wall {statistics.median(walls) * 1e6:,.0f} µs"
        )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ["DJANGO_SETTINGS_MODULE"] = "benchmarks.settings"
    os.environ["BACKWAVE_BENCH_DB"] = args.db
    from . import harness

    print(f"Scratch database {args.db}: re-creating and migrating …", flush=True)
    harness.recreate_database(args.db)
    try:
        return _profile(args, harness)
    finally:
        from django.db import connections

        connections.close_all()
        if not args.keep_db:
            harness.drop_database(args.db)


def _profile(args: argparse.Namespace, harness: Any) -> int:
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    from django.db import connections

    from backwave_django import store
    from backwave_django.client import enqueue_many
    from backwave_django.conf import get_settings
    from backwave_django.core.dispatch import StrictDispatch
    from backwave_django.worker import Worker, WorkerOptions

    from .jobs import noop

    definition = noop
    if args.job == "loose":
        from .flow_jobs import loose as definition
    for start in range(0, args.n, 1000):
        enqueue_many([definition.prepare() for _ in range(min(1000, args.n - start))])
    with harness.connect(args.db) as conn:
        harness.settle(conn, vacuum=True)
    connections.close_all()

    claims, writes = Calls(), Calls()
    store_claim, store_report = store.claim, store.report_outcomes
    store.claim = claims.wrap(store_claim, lambda args_, kwargs, result: len(result))
    store.report_outcomes = writes.wrap(store_report, lambda args_, kwargs, result: len(args_[0]))
    concurrency = args.concurrency or get_settings().concurrency
    options = WorkerOptions(
        dispatch=StrictDispatch(["default"]), concurrency=concurrency, burst=True, prefetch=args.prefetch
    )
    worker = Worker(options)
    with harness.connect(args.db) as conn:
        stats_before = table_stats(conn)
    try:
        cpu_before, pg_before = time.process_time(), harness.postgres_cpu_seconds()
        worker.run()
        cpu, pg = time.process_time() - cpu_before, harness.postgres_cpu_seconds() - pg_before
    finally:
        store.claim, store.report_outcomes = store_claim, store_report
    connections.close_all()  # a session reports its statistics when it ends
    time.sleep(1.0)
    with harness.connect(args.db) as conn:
        stats_after = table_stats(conn)
    done = sum(size * count for size, count in writes.sizes.items())
    if done != args.n:
        print(f"Only {done} of {args.n} jobs were written: see the log above.", file=sys.stderr)
        return 1
    elapsed = writes.spans[-1][1] - claims.spans[0][0]
    gaps = [later[0] - earlier[1] for earlier, later in zip(claims.spans, claims.spans[1:], strict=False)]
    prefetch = worker.prefetch
    grown = f" (grown from {prefetch.base} for short jobs)" if prefetch.limit != prefetch.base else ""
    print(
        f"{args.n:,} {args.job}s, --concurrency {concurrency}, prefetch {prefetch.limit}{grown}: "
        f"{args.n / elapsed:,.0f} jobs/s "
        f"({elapsed:.2f} s from the first claim to the last write)\n"
        f"CPU per job: this process {cpu / args.n * 1e6:.0f} µs, PostgreSQL {pg / args.n * 1e6:.0f} µs\n"
        f"claims: {claims.summary()}\n"
        f"  median gap from a claim's return to the next claim: {statistics.median(gaps) * 1e6:,.0f} µs\n"
        f"outcome writes: {writes.summary()}\n"
        f"per job, from pg_stat_user_tables and pg_stat_database: "
        + ", ".join(
            f"{name} {(stats_after[name] - stats_before[name]) / args.n:.2f}"
            for name in stats_before
            if stats_after[name] != stats_before[name]
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
