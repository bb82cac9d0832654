"""The observer measurement: the worker's throughput with one observer subscribed to every state.

A worker drains noops with the observer declared (``benchmarks/jobs.py``, switched on by the
worker's environment), against the same worker without it, alternating twice; the better run of
each counts. Each run is timed from the worker's start until every job is Succeeded (the
processing rate), and, with the observer, until its cursor has passed every transition of those
jobs (three each: Scheduled, Leased, Succeeded), which gives the delivery rate.
"""

from __future__ import annotations

import time
from typing import Any

from . import raw
from .harness import reset_tables, scalar, succeeded_since, wait_until
from .jobs import OBSERVER_ENV, OBSERVER_ID
from .measures import Context, _prepare_backlog, _rate

TRANSITIONS = "backwave_django_jobtransition"
OBSERVERS = "backwave_django_observer"


def _delivered(ctx: Context) -> bool:
    """Every entry is numbered and the observer's cursor has passed the last one."""
    row = ctx.conn.execute(
        f"SELECT (SELECT count(*) FROM {TRANSITIONS} WHERE position IS NULL), "
        f"(SELECT max(position) FROM {TRANSITIONS}), "
        f"(SELECT cursor FROM {OBSERVERS} WHERE observer_id = %s)",
        [OBSERVER_ID],
    ).fetchone()
    assert row is not None
    unnumbered, last, cursor = row
    return unnumbered == 0 and last is not None and cursor is not None and cursor >= last


def _drain(ctx: Context, observed: bool) -> dict[str, Any]:
    n, conn = ctx.n, ctx.conn
    base, _ = _prepare_backlog(ctx, n)
    entries = int(scalar(conn, f"SELECT count(*) FROM {TRANSITIONS}")) + 2 * n  # + Leased, Succeeded
    name = "observers-with" if observed else "observers-without"
    args = ["--queues", raw.QUEUE, "--concurrency", str(ctx.concurrency)]
    started = time.perf_counter()
    worker = ctx.procs.start_worker(args, name, env={OBSERVER_ENV: "1" if observed else "0"})
    alive = lambda: worker.poll() is None  # noqa: E731
    try:
        processed = wait_until(
            lambda: succeeded_since(conn, base) >= n, timeout=ctx.timeout_for(n), alive=alive
        )
        result: dict[str, Any] = {
            "jobs": n,
            "seconds": processed - started,
            "rate": _rate(n, processed - started),
        }
        if observed:
            delivered = wait_until(lambda: _delivered(ctx), timeout=ctx.timeout_for(entries), alive=alive)
            result.update(
                transitions=entries,
                delivered_after_s=delivered - started,
                delivery_rate=_rate(entries, delivered - started),
                lag_after_processing_s=delivered - processed,
            )
    finally:
        ctx.procs.stop_worker(worker)
    return result


def observers(ctx: Context) -> dict[str, Any]:
    runs: dict[str, list[dict[str, Any]]] = {"without": [], "with": []}
    for _ in range(2):
        for name in ("without", "with"):
            reset_tables(ctx.conn)
            runs[name].append(_drain(ctx, observed=name == "with"))
    reset_tables(ctx.conn)
    best = {name: max(measured, key=lambda run: run["rate"]) for name, measured in runs.items()}
    return {
        "runs": runs,
        "without_rate": best["without"]["rate"],
        "with_rate": best["with"]["rate"],
        "ratio": best["with"]["rate"] / best["without"]["rate"],
        "delivery_rate": max(run["delivery_rate"] for run in runs["with"]),
        "lag_after_processing_s": min(run["lag_after_processing_s"] for run in runs["with"]),
    }
