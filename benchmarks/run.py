"""Run the benchmarks: ``make bench`` (``make bench ARGS=--quick``), or ``python -m benchmarks.run``.

Prints a Markdown table (each figure next to its raw-psycopg baseline and its target, marked
PASS or MISS) and writes everything measured to ``benchmarks/results/latest.json``. Timings are
reported, never asserted: the exit status is 0 unless the harness itself could not run (a
measurement that errors is reported as ERROR and the run goes on). See docs/performance.md.

Top-level imports stay light: spawned baseline processes re-import this module.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import platform
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any

MEASUREMENTS = (
    "enqueue",
    "processing",
    "peers",
    "timeouts",
    "priorities",
    "observers",
    "latency",
    "scale",
    "memory",
    "dependencies",
    "horizon",
    "flow",
    "retention",
)
HEAVY = ("scale", "memory", "horizon", "retention")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=None, help="jobs per throughput run (default 10000)")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="n=2000 and, unless --only says otherwise, skip the scale, memory, horizon and retention "
        "measurements",
    )
    parser.add_argument("--only", help=f"comma-separated subset of: {', '.join(MEASUREMENTS)}")
    parser.add_argument(
        "--db",
        default=os.environ.get("BACKWAVE_BENCH_DB", "backwave_bench"),
        help="scratch database, dropped and re-created (default backwave_bench, or $BACKWAVE_BENCH_DB)",
    )
    parser.add_argument(
        "--synchronous-commit",
        choices=("on", "off", "local", "remote_write", "remote_apply"),
        help="set synchronous_commit for the scratch database only (ALTER DATABASE … SET); "
        "default: the server's setting",
    )
    parser.add_argument("--keep-db", action="store_true", help="leave the scratch database behind")
    parser.add_argument(
        "--concurrency", type=int, default=None, help="worker --concurrency (default BACKWAVE['CONCURRENCY'])"
    )
    parser.add_argument(
        "--enqueue-n", type=int, default=2000, help="jobs for the one-per-transaction enqueue"
    )
    parser.add_argument("--latency-jobs", type=int, default=200)
    parser.add_argument("--scale-rows", type=int, default=1_000_000, help="retained jobs for the scale run")
    parser.add_argument(
        "--memory-marks", default="50000,200000", help="Succeeded counts at which worker RSS is sampled"
    )
    parser.add_argument("--fan", type=int, default=1000, help="children (fan-out) and parents (fan-in)")
    parser.add_argument(
        "--peers",
        default="pgqueuer,procrastinate",
        help="the peer queues the peers step measures beside backwave_django (default: both; a peer "
        "that is not installed is reported as skipped)",
    )
    parser.add_argument(
        "--horizon-rate",
        type=float,
        default=200.0,
        help="jobs/s the long-horizon producer offers (default 200)",
    )
    parser.add_argument(
        "--horizon-phase",
        type=float,
        default=None,
        help="seconds of the long-horizon clean and recovery phases (default 60, 20 with --quick)",
    )
    parser.add_argument(
        "--horizon-hold",
        type=float,
        default=None,
        help="seconds of the long-horizon held-transaction phase (default 300, 60 with --quick)",
    )
    parser.add_argument(
        "--horizon-batch-window",
        type=float,
        default=0.0,
        metavar="MS",
        help="the worker's BATCH_WINDOW in the long-horizon scenario, in milliseconds (default 0: "
        "none; at most 1000; docs/worker.md)",
    )
    parser.add_argument(
        "--retention-rate",
        type=float,
        default=200.0,
        help="jobs/s the retention producer offers (default 200)",
    )
    parser.add_argument(
        "--retention-minutes",
        type=float,
        default=None,
        help="minutes of the retention scenario's run (default 10, 3 with --quick)",
    )
    parser.add_argument(
        "--retention-keep",
        type=float,
        default=60.0,
        help="seconds the retention scenario keeps Succeeded jobs before the worker purges them (default 60)",
    )
    parser.add_argument(
        "--retention-interval",
        type=float,
        default=30.0,
        help="seconds between the retention scenario's size samples (default 30)",
    )
    parser.add_argument(
        "--results-dir",
        help="write the JSON and the worker logs here instead of benchmarks/results",
    )
    args = parser.parse_args(argv)
    from .peer_report import PEERS

    args.peers = [name.strip() for name in args.peers.split(",") if name.strip()]
    if unknown_peers := sorted(set(args.peers) - set(PEERS)):
        parser.error(f"--peers: unknown peer(s) {', '.join(unknown_peers)}; choose from {', '.join(PEERS)}")
    if args.n is None:
        args.n = 2000 if args.quick else 10_000
    if args.horizon_phase is None:
        args.horizon_phase = 20.0 if args.quick else 60.0
    if args.horizon_hold is None:
        args.horizon_hold = 60.0 if args.quick else 300.0
    if min(args.horizon_rate, args.horizon_phase, args.horizon_hold) <= 0:
        parser.error("--horizon-rate, --horizon-phase and --horizon-hold must be positive")
    if not 0 <= args.horizon_batch_window <= 1000:
        parser.error("--horizon-batch-window must be 0 to 1000 milliseconds")
    if args.retention_minutes is None:
        args.retention_minutes = 3.0 if args.quick else 10.0
    if min(args.retention_rate, args.retention_minutes, args.retention_keep, args.retention_interval) <= 0:
        parser.error(
            "--retention-rate, --retention-minutes, --retention-keep and --retention-interval "
            "must be positive"
        )
    if args.only:
        chosen = [name.strip() for name in args.only.split(",") if name.strip()]
        unknown = sorted(set(chosen) - set(MEASUREMENTS))
        if unknown:
            parser.error(
                f"--only: unknown measurement(s) {', '.join(unknown)}; choose from {', '.join(MEASUREMENTS)}"
            )
        args.selected = [m for m in MEASUREMENTS if m in chosen]
    else:
        args.selected = [m for m in MEASUREMENTS if not (args.quick and m in HEAVY)]
    args.memory_marks = tuple(int(m) for m in args.memory_marks.split(","))
    return args


# --- Environment ------------------------------------------------------------------------------


def _git(*args: str) -> str:
    from .harness import ROOT

    try:
        return subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _prepare_threshold(database: Any) -> Any:
    return database.get("OPTIONS", {}).get("prepare_threshold")


def environment(conn: Any, args: argparse.Namespace) -> dict[str, Any]:
    import django
    import psycopg
    from django.conf import settings

    from .harness import scalar

    pg = {
        name: scalar(conn, f"SHOW {name}")
        for name in (
            "server_version",
            "synchronous_commit",
            "fsync",
            "shared_buffers",
            "max_wal_size",
            "autovacuum",
        )
    }
    busy = scalar(
        conn,
        "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND pid <> pg_backend_pid() "
        "AND backend_type = 'client backend'",
    )
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "git_commit": _git("rev-parse", "--short", "HEAD"),
        "uncommitted_changes_under_backwave_django": _git(
            "status", "--porcelain", "--", "backwave_django"
        ).splitlines(),
        "cpus": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "loadavg_at_start": os.getloadavg(),
        "other_active_pg_backends_at_start": busy,
        "postgresql": pg,
        "database": args.db,
        "python": platform.python_version(),
        "django": django.get_version(),
        "psycopg": psycopg.__version__,
        "prepare_threshold": _prepare_threshold(settings.DATABASES["default"]),
        "history": str(settings.BACKWAVE.get("HISTORY")),
        "max_claim_batch": settings.BACKWAVE.get("MAX_CLAIM_BATCH"),
        "args": {k: v for k, v in vars(args).items() if k != "selected"},
        "selected": args.selected,
    }


# --- The table --------------------------------------------------------------------------------


def _status(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def _jobs(rate: float) -> str:
    return f"{rate:,.0f} jobs/s"


def _ms(value: float) -> str:
    return f"{value:.1f} ms"


def rows(results: dict[str, Any], args: argparse.Namespace) -> list[dict[str, str]]:
    """One table row per figure: measurement, result, baseline, ratio, target, status."""
    table: list[dict[str, str]] = []

    def add(
        measurement: str,
        result: str,
        baseline: str = "—",
        ratio: str = "—",
        target: str = "—",
        status: str = "info",
    ) -> None:
        table.append(
            {
                "measurement": measurement,
                "result": result,
                "baseline": baseline,
                "ratio": ratio,
                "target": target,
                "status": status,
            }
        )

    def error_row(name: str) -> bool:
        if name in results and "error" in results[name]:
            add(f"{name}", f"ERROR: {results[name]['error']}", status="ERROR")
            return True
        return name not in results

    if not error_row("enqueue"):
        r = results["enqueue"]
        ratio = r["single"]["rate"] / r["raw_single"]["rate"]
        add(
            f"Enqueue, one job per transaction (`noop.enqueue()`, n={r['single']['jobs']:,})",
            _jobs(r["single"]["rate"]),
            f"{_jobs(r['raw_single']['rate'])} (single-row INSERT, autocommit)",
            f"{ratio:.0%}",
            "≥ 60% of raw",
            _status(ratio >= 0.60),
        )
        unique = r["unique"]
        add(
            f"Enqueue a unique job, one per transaction (`.using(unique=Unique()).enqueue(n)`, "
            f"n={unique['jobs']:,})",
            _jobs(unique["rate"]),
            f"{_jobs(r['single']['rate'])} (`noop.enqueue()` above)",
            f"{unique['rate'] / r['single']['rate']:.0%}",
        )
        ratio = r["many"]["rate"] / r["raw_bulk"]["rate"]
        add(
            f"Enqueue, `.prepare()` + `enqueue_many` (1,000 per transaction, n={r['many']['jobs']:,})",
            _jobs(r["many"]["rate"]),
            f"{_jobs(r['raw_bulk']['rate'])} (multi-row INSERT, 1,000 per tx)",
            f"{ratio:.0%}",
            "≥ 30% of raw",
            _status(ratio >= 0.30),
        )

    if not error_row("processing"):
        r = results["processing"]
        for procs, flag in ((1, f"1 process, `--concurrency {args.concurrency}`"), (2, "`--processes 2`")):
            worker, batch, single = (
                r.get(f"worker_{procs}"),
                r.get(f"raw_batch_{procs}"),
                r.get(f"raw_single_{procs}"),
            )
            if not (worker and batch):
                continue
            ratio = worker["rate"] / batch["rate"]
            note = ""
            if procs > 1 and not worker["exit"].get("exited_by_itself", True):
                note = " ¹"
            add(
                f"Processing, {flag}, n={worker['jobs']:,}{note}",
                _jobs(worker["rate"]),
                f"{_jobs(batch['rate'])} (raw claim-32 loop, {procs} proc)",
                f"{ratio:.0%}",
                "≥ 50% of raw",
                _status(ratio >= 0.50),
            )
            if single:
                add(
                    f"Processing, {flag}, vs one job per transaction",
                    _jobs(worker["rate"]),
                    f"{_jobs(single['rate'])} (raw claim-1 loop, {procs} proc)",
                    f"{worker['rate'] / single['rate']:.0%}",
                )

    if not error_row("timeouts"):
        r = results["timeouts"]
        add(
            "Processing, 1 process, every job with a `timeout` (never reached), "
            f"n={r['runs']['with'][0]['jobs']:,}",
            _jobs(r["with_rate"]),
            f"{_jobs(r['without_rate'])} (the same jobs without one, alternating)",
            f"{r['ratio']:.0%}",
            "≥ 95% of without",
            _status(r["ratio"] >= 0.95),
        )

    if not error_row("priorities"):
        r = results["priorities"]
        add(
            f"Processing, 1 process, three priorities mixed, n={r['runs']['mixed'][0]['jobs']:,}",
            _jobs(r["mixed_rate"]),
            f"{_jobs(r['one_rate'])} (the same jobs at one priority, alternating)",
            f"{r['ratio']:.0%}",
            "≥ 95% of one",
            _status(r["ratio"] >= 0.95),
        )

    if not error_row("observers"):
        r = results["observers"]
        add(
            "Processing, 1 process, one observer subscribed to every state, "
            f"n={r['runs']['with'][0]['jobs']:,}",
            _jobs(r["with_rate"]),
            f"{_jobs(r['without_rate'])} (the same worker without it, alternating)",
            f"{r['ratio']:.0%}",
        )
        add(
            "Observer deliveries (3 transitions a job; until the cursor passed the last), "
            f"{r['lag_after_processing_s']:.1f} s behind the last job",
            f"{r['delivery_rate']:,.0f} transitions/s",
        )

    if not error_row("latency"):
        r = results["latency"]
        what = f"idle worker, {r['jobs']} jobs {r['spacing_ms']:.0f} ms apart"
        add(f"Latency p50 ({what})", _ms(r["p50_ms"]), target="≤ 10 ms", status=_status(r["p50_ms"] <= 10))
        add(
            f"Latency p99 (max {_ms(r['max_ms'])})",
            _ms(r["p99_ms"]),
            target="≤ 30 ms",
            status=_status(r["p99_ms"] <= 30),
        )

    if not error_row("scale"):
        r = results["scale"]
        add(
            f"Processing, 1 process, {r['retained_rows']:,} retained jobs, n={r['run']['jobs']:,}",
            _jobs(r["run"]["rate"]),
            f"{_jobs(r['empty_rate'])} (same on an empty table, measured just after)",
            f"{r['ratio']:.0%}",
            "≥ 90% of empty",
            _status(r["ratio"] >= 0.90),
        )
        used = r["claim_plan_uses_index"] and r["orm_claim_plan_uses_index"] is not False
        add(
            f"Claim query plan with {r['retained_rows']:,} retained jobs uses `backwave_job_claim` "
            "(hand-written and captured from `store.claim`)",
            "yes" if used else "no",
            target="uses the partial index",
            status=_status(bool(used)),
        )

    if not error_row("memory"):
        r = results["memory"]
        first, last = (r["samples"][str(m)] for m in (r["marks"][0], r["marks"][-1]))
        add(
            f"Worker RSS after {r['marks'][0]:,} → {r['marks'][-1]:,} jobs (one long-running worker)",
            f"{first['VmRSS'] / 1024:.1f} → {last['VmRSS'] / 1024:.1f} MiB ({r['growth_pct']:+.1f}%)",
            target="≤ 10% growth",
            status=_status(r["growth_pct"] <= 10),
        )

    if not error_row("dependencies"):
        r = results["dependencies"]
        out, fan_in = r["fan_out"], r["fan_in"]
        add(
            f"1 parent → {out['children']:,} children: parent Succeeded → all children Succeeded",
            f"{out['parent_to_all_children_s']:.2f} s ({_jobs(out['children_rate'])})",
        )
        add(
            f"{fan_in['parents']:,} parents → 1 child: last parent Succeeded → child Succeeded",
            _ms(fan_in["last_parent_to_child_ms"]),
        )
    if not error_row("horizon"):
        from .horizon import ratio

        r = results["horizon"]
        held = ratio(r, "claim_p99_ms")
        p99 = {phase["phase"]: phase["claim_p99_ms"] for phase in r["phases"]}
        add(
            f"Long-horizon: claim p99 under a {r['hold_s']:g} s held transaction, {r['rate']:g} jobs/s "
            "(table of its own below)",
            _ms(p99["held"]) if p99.get("held") is not None else "—",
            f"{_ms(p99['clean'])} (clean phase)" if p99.get("clean") is not None else "—",
            f"{held:.0%}" if held is not None else "—",
            "≤ 150% of clean",
            _status(held <= 1.5) if held is not None else "—",
        )
    if not error_row("flow"):
        flow_rows(results["flow"], add)
    if not error_row("retention"):
        r = results["retention"]
        v = r["verdict"]
        add(
            f"Retention: total size growth over the last third of {r['minutes']:g} min at {r['rate']:g} "
            f"jobs/s, Succeeded jobs kept {r['keep_s']:g} s (curve of its own below)",
            f"{v['from_bytes'] / 1048576:.1f} → {v['to_bytes'] / 1048576:.1f} MB"
            + (f" ({v['growth']:+.1%})" if v["growth"] is not None else ""),
            "—",
            "—",
            f"≤ {v['limit']:.0%} growth",
            _status(v["steady"]),
        )
    error_row("peers")  # its figures have a table of their own (benchmarks/peer_report.py)
    return table


def flow_rows(r: dict[str, Any], add: Callable[..., None]) -> None:
    """The ``flow`` step's rows (benchmarks/flow.py): the unlimited reference, a limit that never
    binds against it, and how much of a binding rate was used."""
    jobs = r["runs"]["plain"][0]["jobs"]
    add(f"Flow: processing, 1 process, plain noops, n={jobs:,} (the reference)", _jobs(r["plain_rate"]))
    add(
        f"Flow: processing, 1 process, noops under a concurrency limit that never binds (10,000), n={jobs:,}",
        _jobs(r["loose_rate"]),
        f"{_jobs(r['plain_rate'])} (plain noops, alternating)",
        f"{r['loose_ratio']:.0%}",
        "≥ 80% of plain",
        _status(r["loose_ratio"] >= 0.80),
    )
    paced = r["paced"]
    used = paced["used"]
    add(
        f"Flow: a binding rate limit ({paced['rate_limit']}/{paced['period_s']:g} s), 1 process, "
        f"{paced['jobs']:,} due noops; at most {paced['most_in_a_window']} claims in any window",
        f"{paced['claims_in_whole_periods'] / paced['whole_periods']:,.0f} claims per period"
        if paced["whole_periods"]
        else "—",
        f"{paced['rate_limit']} per period (the limit)",
        f"{used:.0%}" if used is not None else "—",
        "≥ 95% of the rate",
        _status(used >= 0.95) if used is not None else "—",
    )


def details(results: dict[str, Any]) -> list[str]:
    """Supporting figures, one bullet each, for the reader who wants to know why."""
    lines: list[str] = []

    def ok(name: str) -> dict[str, Any] | None:
        value = results.get(name)
        return value if value and "error" not in value else None

    if r := ok("enqueue"):
        many = r["many"]
        lines.append(
            f"enqueue_many: {many['jobs']:,} jobs took {many['prepare_s']:.2f} s in `.prepare()` and "
            f"{many['enqueue_many_s']:.2f} s in `enqueue_many` "
            f"({_jobs(many['jobs'] / many['enqueue_many_s'])} for the write alone); the table's figure "
            "includes both."
        )
    if r := ok("processing"):
        for name, label in (
            ("worker_1", "worker, 1 process"),
            ("worker_2", "worker, --processes 2"),
            ("raw_batch_1", "raw claim-32, 1 proc"),
            ("raw_batch_2", "raw claim-32, 2 procs"),
            ("raw_single_1", "raw claim-1, 1 proc"),
            ("raw_single_2", "raw claim-1, 2 procs"),
        ):
            if run := r.get(name):
                startup = run.get("first_job_done_after_s")
                lines.append(
                    f"{label}: {run['jobs']:,} jobs in {run['seconds']:.2f} s; steady state (first to last "
                    f"job Succeeded) {_jobs(run['steady_rate'])}"
                    + (f"; first job Succeeded {startup:.2f} s after start" if startup is not None else "")
                )
    if r := ok("latency"):
        lines.append(
            f"latency: min {_ms(r['min_ms'])}, p90 {_ms(r['p90_ms'])}; enqueue → Leased (pickup) "
            f"p50 {_ms(r['pickup_p50_ms'])}, p99 {_ms(r['pickup_p99_ms'])}"
        )
    if r := ok("scale"):
        earlier = r.get("ratio_vs_processing_step")
        lines.append(
            f"scale: {r['retained_rows']:,} retained jobs + {r['retained_transitions']:,} transitions "
            f"inserted and vacuumed in {r['retained_insert_and_vacuum_s']:.0f} s "
            f"({r['tables_size_with_retained']}); "
            f"steady-state ratio {r['steady_ratio']:.0%}"
            + (f"; ratio against the processing step's empty-table run {earlier:.0%}" if earlier else "")
        )
    if r := ok("memory"):
        hwm = max(s.get("VmHWM", 0) for s in r["samples"].values())
        lines.append(
            f"memory: RSS {r['start']['VmRSS'] / 1024:.1f} MiB once idle, peak (VmHWM) {hwm / 1024:.1f} MiB; "
            f"{r['succeeded']:,} jobs Succeeded in {r['seconds']:.0f} s while being fed by enqueue_many"
            + (
                f"; autovacuum is off on this server, so the harness ran VACUUM on the job tables "
                f"{r['harness_vacuums']} times (every 20,000 jobs)"
                if r.get("harness_vacuums")
                else ""
            )
        )
    if r := ok("dependencies"):
        lines.append(
            f"dependencies: first child Succeeded {_ms(r['fan_out']['parent_to_first_child_ms'])} after its "
            f"parent; the {r['fan_in']['parents']:,} parents ran over {r['fan_in']['parents_span_s']:.2f} s"
        )
    return lines


def heading(env: dict[str, Any]) -> str:
    dirty = (
        " (+ uncommitted changes in backwave_django/)"
        if env["uncommitted_changes_under_backwave_django"]
        else ""
    )
    pg = env["postgresql"]
    return (
        f"backwave_django benchmarks — {env['date']}, commit {env['git_commit']}{dirty}, {env['cpus']} CPUs, "
        f"PostgreSQL {pg['server_version']} on loopback (synchronous_commit={pg['synchronous_commit']}, "
        f"autovacuum={pg.get('autovacuum')}), "
        f"worker prepare_threshold={env.get('prepare_threshold')} (raw baselines: psycopg's default, 5), "
        f"HISTORY={env.get('history')}, MAX_CLAIM_BATCH={env.get('max_claim_batch')}"
    )


def markdown(table: list[dict[str, str]]) -> str:
    header = ["Measurement", "Result", "Raw psycopg baseline", "Ratio", "Target", "Status"]
    keys = ["measurement", "result", "baseline", "ratio", "target", "status"]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] * len(header)) + "|"]
    lines += ["| " + " | ".join(row[k] for k in keys) + " |" for row in table]
    return "\n".join(lines)


def footnotes(results: dict[str, Any]) -> list[str]:
    notes = []
    worker_2 = (
        results.get("processing", {}).get("worker_2")
        if "error" not in results.get("processing", {})
        else None
    )
    if worker_2 and not worker_2["exit"].get("exited_by_itself", True):
        e = worker_2["exit"]
        notes.append(
            "¹ The `--processes 2 --burst` supervisor did not exit once its children were drained: "
            f"within {e['observed_s']:.0f} s it restarted children {e['restarts_after_exit_0']} time(s) "
            f"after they exited 0 ({e['children_started']} children started in all; jobs per child "
            f"that stopped: {e['jobs_per_child']}). Timed to the moment all jobs were Succeeded (DB "
            f"poll); the harness then sent SIGTERM. Log: {e['log']}."
        )
    return notes


def _shown(path: Path, root: Path) -> Path:
    return path.relative_to(root) if path.is_relative_to(root) else path


# --- Main -------------------------------------------------------------------------------------


class Interrupted(BaseException):
    pass


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise Interrupted(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _on_sigterm)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even if started with SIGINT ignored
    os.environ["DJANGO_SETTINGS_MODULE"] = "benchmarks.settings"
    os.environ["BACKWAVE_BENCH_DB"] = args.db

    from . import harness

    if args.results_dir:
        harness.set_results_dir(Path(args.results_dir).resolve())
    harness.RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    # Byte-compile the package and the harness first, as an installed package is: with
    # PYTHONDONTWRITEBYTECODE set, every worker process would otherwise compile them from source
    # at start-up (about 0.1 s), which the throughput runs count.
    for package in ("backwave_django", "benchmarks"):
        compileall.compile_dir(harness.ROOT / package, quiet=1)
    procs = harness.Processes(args.db)
    run_started = time.perf_counter()
    results: dict[str, Any] = {}
    conn = None
    created = False  # drop only a database this run created
    interrupted = False
    try:
        print(f"Scratch database {args.db}: re-creating and migrating …", flush=True)
        harness.recreate_database(args.db)
        created = True
        if args.synchronous_commit:
            harness.set_database_option(args.db, "synchronous_commit", args.synchronous_commit)
        import django
        from django.core.management import call_command

        django.setup()
        call_command("migrate", verbosity=0)
        from backwave_django.conf import get_settings

        if args.concurrency is None:
            args.concurrency = get_settings().concurrency
        conn = harness.connect(args.db)
        env = environment(conn, args)
        print(
            f"commit {env['git_commit']}, {env['cpus']} CPUs, "
            f"PostgreSQL {env['postgresql']['server_version']}, "
            f"n={args.n}, measurements: {', '.join(args.selected)}",
            flush=True,
        )

        from . import flow, horizon, measures, observing, peers, retention

        ctx = measures.Context(
            dbname=args.db,
            conn=conn,
            procs=procs,
            n=args.n,
            enqueue_n=args.enqueue_n,
            concurrency=args.concurrency,
            latency_jobs=args.latency_jobs,
            scale_rows=args.scale_rows,
            memory_marks=args.memory_marks,
            fan=args.fan,
            results=results,
            peers=tuple(args.peers),
            keep_db=args.keep_db,
            horizon_rate=args.horizon_rate,
            horizon_phase=args.horizon_phase,
            horizon_hold=args.horizon_hold,
            horizon_batch_window_ms=args.horizon_batch_window,
            retention_rate=args.retention_rate,
            retention_minutes=args.retention_minutes,
            retention_keep=args.retention_keep,
            retention_interval=args.retention_interval,
        )
        steps: dict[str, Callable[[measures.Context], dict[str, Any]]] = {
            "enqueue": measures.enqueue,
            "processing": measures.processing,
            "peers": peers.peers,
            "timeouts": measures.timeouts,
            "priorities": measures.priorities,
            "observers": observing.observers,
            "latency": measures.latency,
            "scale": measures.scale,
            "memory": measures.memory,
            "dependencies": measures.dependencies,
            "horizon": horizon.horizon,
            "flow": flow.flow,
            "retention": retention.retention,
        }
        timings: dict[str, float] = {}
        for name in args.selected:
            print(f"… {name}", end="", flush=True)
            step_started = time.perf_counter()
            try:
                results[name] = steps[name](ctx)
            except Exception as exc:
                traceback.print_exc()
                results[name] = {**results.get(name, {}), "error": f"{type(exc).__name__}: {exc}"}
                procs.stop_all()  # nothing of a failed step may linger into the next
                harness.reset_tables(conn)
            timings[name] = time.perf_counter() - step_started
            results[name]["loadavg_after"] = os.getloadavg()
            print(f" {timings[name]:.0f} s", flush=True)
    except (KeyboardInterrupt, Interrupted) as exc:
        interrupted = True
        print(f"\nInterrupted ({str(exc) or 'Ctrl-C'}): stopping workers …", file=sys.stderr, flush=True)
    finally:
        procs.stop_all()
        if conn is not None:
            conn.close()
        if "django" in sys.modules:
            from django.db import connections

            connections.close_all()
        if created and not args.keep_db:
            try:
                harness.drop_database(args.db)
            except Exception as exc:  # cleanup must not mask the real outcome
                print(f"Could not drop {args.db}: {exc}", file=sys.stderr)
    if interrupted:
        return 130

    total = time.perf_counter() - run_started
    table = rows(results, args)
    report = markdown(table)
    side_by_side: list[dict[str, str]] = []
    if "peers" in results and "error" not in results["peers"]:
        from . import peer_report

        side_by_side = peer_report.rows(results)
        env["peers_details"] = peer_report.details(results)
        env["peers_targets"] = peer_report.targets(results)
        env["peers_needs"] = peer_report.needs(results)
    horizon_table: list[dict[str, str]] = []
    if "horizon" in results and "error" not in results["horizon"]:
        from . import horizon

        horizon_table = horizon.table(results["horizon"])
    notes = footnotes(results)
    env["total_runtime_s"] = total
    env["step_runtime_s"] = timings
    env["loadavg_at_end"] = os.getloadavg()
    out = harness.RESULTS_DIR / "latest.json"
    # latest.json, plus a dated copy per run so a quick run does not erase the last full one.
    stamp = env["date"].replace(":", "").replace("+0000", "Z")
    kind = "quick" if args.quick else ("partial" if args.only else "full")
    dated = harness.RESULTS_DIR / f"{stamp}-{env['git_commit']}-{kind}.json"
    out.write_text(
        json.dumps(
            {
                "environment": env,
                "table": table,
                "peers_table": side_by_side,
                "horizon_table": horizon_table,
                "notes": notes,
                "details": details(results),
                "results": results,
            },
            indent=2,
            default=str,
        )
    )
    dated.write_text(out.read_text())

    print()
    print(heading(env))
    print()
    print(report)
    for note in notes:
        print()
        print(note)
    if side_by_side:
        print()
        print("Side by side with the peers (the same method for each queue; see docs/performance.md):")
        print()
        print(peer_report.markdown(results, side_by_side))
        print()
        for line in env["peers_details"]:
            print(f"- {line}")
        print()
        print(env["peers_targets"])
        if env["peers_needs"]:
            print()
            print("What the missed processing targets needed in this run:")
            for line in env["peers_needs"]:
                print(f"- {line}")
    if horizon_table:
        print()
        print(horizon.heading(results["horizon"]))
        print()
        print(horizon.markdown(results["horizon"]))
        print()
        for line in horizon.details(results["horizon"]):
            print(f"- {line}")
    if "retention" in results and "error" not in results["retention"]:
        from . import retention

        print()
        print(retention.report(results["retention"]))
    print()
    for line in details(results):
        print(f"- {line}")
    print()
    print(
        f"Total runtime {total:.0f} s; load average at start {env['loadavg_at_start'][0]:.2f}, "
        f"at end {env['loadavg_at_end'][0]:.2f}. JSON: {_shown(out, harness.ROOT)} (and {dated.name})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
