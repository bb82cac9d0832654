"""Procrastinate as the harness runs it (``benchmarks/peers.py``): the app, its task, the defers.

The worker is Procrastinate's own command,
``python -m procrastinate --app benchmarks.peer_procrastinate.app worker``; the schema is applied
with ``… schema --apply``. The app uses ``PsycopgConnector``; the harness defers through the
synchronous side of the same connector (``app.open()``, ``defer``, ``batch_defer``), as a Django
view would. The scratch database is named by ``BACKWAVE_BENCH_PEER_DB``; the server by the usual
libpq variables.

Only the worker processes and the harness's peer step import this module (it needs the ``bench``
extra).
"""

from __future__ import annotations

import os
import time
from typing import Any

from procrastinate import App, PsycopgConnector

DB_ENV = "BACKWAVE_BENCH_PEER_DB"


def conninfo(dbname: str | None = None) -> str:
    """libpq keywords for ``dbname`` (by default the worker's, ``BACKWAVE_BENCH_PEER_DB``)."""
    parts = {
        "host": os.environ.get("PGHOST", "127.0.0.1"),
        "port": os.environ.get("PGPORT", "5432"),
        "user": os.environ.get("PGUSER", "postgres"),
        "password": os.environ.get("PGPASSWORD", ""),
        "dbname": dbname or os.environ.get(DB_ENV, ""),
    }
    return " ".join(f"{key}={value}" for key, value in parts.items() if value)


app = App(connector=PsycopgConnector(conninfo=conninfo()))


@app.task(name="noop")
async def noop() -> None:
    """Does nothing: what is measured is the machinery around it."""


@app.task(name="with_args")
async def with_args(customer_id: int, reference: str, amount: float, options: dict[str, Any]) -> None:
    """Takes what a real job carries (benchmarks/arguments.py), and does nothing with it."""


def enqueue_single(dbname: str, n: int, kwargs: list[dict[str, Any]] | None = None) -> float:
    """``n`` calls of ``noop.defer()`` on ``dbname``, each its own transaction; with ``kwargs`` (a
    dict per job), ``with_args.defer(**kwargs)``. Seconds."""
    with app.replace_connector(PsycopgConnector(conninfo=conninfo(dbname))), app.open():
        started = time.perf_counter()
        if kwargs is None:
            for _ in range(n):
                noop.defer()
        else:
            for call in kwargs[:n]:
                with_args.defer(**call)
        return time.perf_counter() - started


def enqueue_bulk(dbname: str, n: int, batch: int, kwargs: list[dict[str, Any]] | None = None) -> float:
    """``n`` jobs on ``dbname`` through ``noop.batch_defer``, ``batch`` a call (one statement each);
    with ``kwargs`` (a dict per job), ``with_args.batch_defer(*kwargs)``. Seconds."""
    with app.replace_connector(PsycopgConnector(conninfo=conninfo(dbname))), app.open():
        started = time.perf_counter()
        done = 0
        while done < n:
            size = min(batch, n - done)
            if kwargs is None:
                noop.batch_defer(*({} for _ in range(size)))
            else:
                with_args.batch_defer(*kwargs[done : done + size])
            done += size
        return time.perf_counter() - started
