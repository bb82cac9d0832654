"""The flow-control step (``--only flow``; docs/flow-control.md): what a limit costs the worker,
and how much of a binding rate it uses.

- **Reference and non-binding limit.** One worker process (``--burst``) drains ``n`` noops, against
  the same number of noops under a concurrency limit of 10,000 (checked on every claim, never
  binding), alternating :data:`ROUNDS` times; the best run of each counts (this machine's
  run-to-run noise is larger than the difference measured). Both workers load the same jobs
  (benchmarks/flow_jobs.py), so the only difference is the limit.
- **Binding rate.** One worker drains noops under a rate of 200 per second, plenty of them due from
  the start. The claims' own log entries say how much of the rate was used: over every whole period
  from the first claim, the claims per period against the rate (a limiter that used it all scores
  100 %, however it spreads its claims within each period), and the most claims in any sliding
  window (never above the rate).
"""

from __future__ import annotations

import math
import time
from typing import Any

from backwave_django import enqueue_many

from . import raw
from .harness import max_sequence, reset_tables, settle, succeeded_since, wait_until
from .measures import Context, _rate, _terminal_span

#: Set in the flow step's workers' environment: they load benchmarks/flow_jobs.py (which is
#: imported here only when the step runs, so importing this module declares no limit).
FLOW_ENV = "BACKWAVE_BENCH_FLOW"
#: How many times the reference and the non-binding drains alternate (the best of each counts).
ROUNDS = 3
#: Seconds of claims the binding-rate run asks for (half that with ``--quick``'s smaller n).
PACED_SECONDS = 10


def _worker_args(ctx: Context, *, burst: bool) -> list[str]:
    return [*(["--burst"] if burst else []), "--queues", raw.QUEUE, "--concurrency", str(ctx.concurrency)]


def _backlog(ctx: Context, definition: Any, jobs: int) -> int:
    """Enqueue ``jobs`` of ``definition`` (``.prepare()`` + ``enqueue_many``); the sequence before them."""
    base = max_sequence(ctx.conn)
    enqueue_many([definition.prepare() for _ in range(jobs)])
    settle(ctx.conn)
    return base


def drain(ctx: Context, definition: Any, log_name: str) -> dict[str, Any]:
    """``backwave_worker --burst`` on ``ctx.n`` pre-enqueued jobs of ``definition``, timed from its
    start until all of them are Succeeded."""
    n, conn = ctx.n, ctx.conn
    base = _backlog(ctx, definition, n)
    started = time.perf_counter()
    worker = ctx.procs.start_worker(_worker_args(ctx, burst=True), log_name, env={FLOW_ENV: "1"})
    done = wait_until(
        lambda: succeeded_since(conn, base) >= n,
        timeout=ctx.timeout_for(n),
        alive=lambda: worker.poll() is None,
    )
    elapsed = done - started
    first, last = _terminal_span(conn, base)
    ctx.procs.stop_worker(worker)
    return {
        "jobs": n,
        "seconds": elapsed,
        "rate": _rate(n, elapsed),
        "steady_rate": _rate(n - 1, last - first),
    }


def rate_use(stamps: list[float], rate: int, period: float) -> dict[str, Any]:
    """From sorted claim times: the share of the rate used over the whole periods since the first
    claim, and the most claims in any window ``(t - period, t]``."""
    periods = math.floor((stamps[-1] - stamps[0]) / period) if stamps else 0
    in_periods = sum(1 for t in stamps if t < stamps[0] + periods * period)
    most = 0
    low = 0
    for high, t in enumerate(stamps):
        while stamps[low] <= t - period:
            low += 1
        most = max(most, high - low + 1)
    return {
        "claims": len(stamps),
        "whole_periods": periods,
        "claims_in_whole_periods": in_periods,
        "used": in_periods / (periods * rate) if periods else None,
        "most_in_a_window": most,
    }


def paced(ctx: Context, jobs: int) -> dict[str, Any]:
    """One worker on ``jobs`` due noops under the binding rate (benchmarks/flow_jobs.py)."""
    from .flow_jobs import PACED_PERIOD, PACED_RATE, paced as paced_job

    conn = ctx.conn
    base = _backlog(ctx, paced_job, jobs)
    started = time.perf_counter()
    # Not --burst: a worker whose next jobs are held by the rate must wait for them, not exit.
    worker = ctx.procs.start_worker(_worker_args(ctx, burst=False), "flow-paced", env={FLOW_ENV: "1"})
    done = wait_until(
        lambda: succeeded_since(conn, base) >= jobs,
        timeout=ctx.timeout_for(jobs) + jobs / PACED_RATE * PACED_PERIOD,
        alive=lambda: worker.poll() is None,
    )
    ctx.procs.stop_worker(worker)
    stamps = [
        float(t)
        for (t,) in conn.execute(
            "SELECT extract(epoch FROM t.recorded_at) FROM backwave_django_jobtransition t "
            "WHERE t.job_id > %s AND t.state = 2 ORDER BY 1",
            [base],
        ).fetchall()
    ]
    return {
        "jobs": jobs,
        "rate_limit": PACED_RATE,
        "period_s": PACED_PERIOD,
        "seconds": done - started,
        **rate_use(stamps, PACED_RATE, PACED_PERIOD),
    }


def flow(ctx: Context) -> dict[str, Any]:
    from .flow_jobs import PACED_RATE, loose
    from .jobs import noop

    runs: dict[str, list[dict[str, Any]]] = {"plain": [], "loose": []}
    for _ in range(ROUNDS):
        for name, definition in (("plain", noop), ("loose", loose)):
            reset_tables(ctx.conn)
            runs[name].append(drain(ctx, definition, f"flow-{name}"))
    reset_tables(ctx.conn)
    best = {name: max(run["rate"] for run in measured) for name, measured in runs.items()}
    paced_jobs = min(ctx.n, PACED_RATE * PACED_SECONDS)
    rate = paced(ctx, paced_jobs)
    reset_tables(ctx.conn)
    return {
        "runs": runs,
        "plain_rate": best["plain"],
        "loose_rate": best["loose"],
        "loose_ratio": best["loose"] / best["plain"],
        "paced": rate,
    }
