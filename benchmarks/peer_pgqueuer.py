"""PgQueuer as the harness runs it (``benchmarks/peers.py``): the worker factory and the enqueues.

The worker is ``python -m benchmarks.peer_pgqueuer [--max-concurrent-tasks N --batch-size B]``:
PgQueuer's own runner, ``pgqueuer.run(create, mode=drain, …)``, the Python API behind ``pgq run``
(PgQueuer 1.6.0's ``pgq run`` fails at start-up under typer 0.29: its ``--log-level`` default
reaches the logger as a plain string). The schema is installed with ``python -m pgqueuer install``
(``pgq install``). Both use asyncpg, the driver of PgQueuer's quick start and the one its CLI
picks when it is installed. The scratch database is named by
``BACKWAVE_BENCH_PEER_DB``; the server by the usual libpq variables.

Only the worker processes and the harness's peer step import this module (it needs the ``bench``
extra).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import quote

import asyncpg
import pgqueuer
from pgqueuer import PgQueuer
from pgqueuer.db import AsyncpgDriver
from pgqueuer.models import Job
from pgqueuer.queries import Queries
from pgqueuer.types import QueueExecutionMode

DB_ENV = "BACKWAVE_BENCH_PEER_DB"
ENTRYPOINT = "noop"
#: The job with arguments: its keyword arguments as a JSON payload (``json.dumps(...).encode()``,
#: the form PgQueuer's documentation gives), decoded by its handler.
WITH_ARGS = "with_args"


def dsn(dbname: str | None = None) -> str:
    """``dbname`` (by default the worker's, ``BACKWAVE_BENCH_PEER_DB``) as a libpq URL."""
    user = quote(os.environ.get("PGUSER", "postgres"), safe="")
    password = quote(os.environ.get("PGPASSWORD", ""), safe="")
    host = os.environ.get("PGHOST", "127.0.0.1")
    port = os.environ.get("PGPORT", "5432")
    auth = f"{user}:{password}" if password else user
    return f"postgresql://{auth}@{host}:{port}/{quote(dbname or os.environ[DB_ENV], safe='')}"


@asynccontextmanager
async def create() -> AsyncIterator[PgQueuer]:
    """The worker factory (PgQueuer 1.6 takes an async context manager): one asyncpg connection
    and the noop entrypoint."""
    connection = await asyncpg.connect(dsn())
    try:
        pgq = PgQueuer(AsyncpgDriver(connection))

        @pgq.entrypoint(ENTRYPOINT)
        async def noop(job: Job) -> None:
            """Does nothing: what is measured is the machinery around it."""

        @pgq.entrypoint(WITH_ARGS)
        async def with_args(job: Job) -> None:
            """Reads its arguments, and does nothing with them."""
            json.loads(job.payload or b"{}")

        yield pgq
    finally:
        await connection.close()


async def _enqueue(
    dbname: str, single: int, bulk: int, batch: int, kwargs: list[dict[str, Any]] | None
) -> float:
    connection = await asyncpg.connect(dsn(dbname))
    try:
        queries = Queries(AsyncpgDriver(connection))
        started = time.perf_counter()
        if kwargs is None:
            for _ in range(single):
                await queries.enqueue(ENTRYPOINT, None)
        else:
            for call in kwargs[:single]:
                await queries.enqueue(WITH_ARGS, json.dumps(call).encode())
        done = 0
        while done < bulk:
            size = min(batch, bulk - done)
            if kwargs is None:
                await queries.enqueue([ENTRYPOINT] * size, [None] * size, [0] * size)
            else:
                chunk = kwargs[done : done + size]
                payloads: list[bytes | None] = [json.dumps(call).encode() for call in chunk]
                await queries.enqueue([WITH_ARGS] * size, payloads, [0] * size)
            done += size
        return time.perf_counter() - started
    finally:
        await connection.close()


def enqueue_single(dbname: str, n: int, kwargs: list[dict[str, Any]] | None = None) -> float:
    """``n`` calls of ``Queries.enqueue(entrypoint, None)`` on ``dbname``, each its own
    transaction; with ``kwargs`` (a dict per job), ``Queries.enqueue("with_args", payload)`` with
    each dict as JSON. Seconds."""
    return asyncio.run(_enqueue(dbname, n, 0, 1, kwargs))


def enqueue_bulk(dbname: str, n: int, batch: int, kwargs: list[dict[str, Any]] | None = None) -> float:
    """``n`` jobs on ``dbname`` through ``Queries.enqueue`` with lists of ``batch`` (one statement
    each), their payloads None or, with ``kwargs``, each dict as JSON. Seconds."""
    return asyncio.run(_enqueue(dbname, 0, n, batch, kwargs))


def main(argv: list[str] | None = None) -> None:
    """One worker that drains the queue and exits, as ``pgq run … --mode drain`` would run it."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.peer_pgqueuer")
    parser.add_argument("--batch-size", type=int, default=10, help="PgQueuer's default: 10")
    parser.add_argument("--max-concurrent-tasks", type=int, default=None, help="default: no limit")
    args = parser.parse_args(argv)
    asyncio.run(
        pgqueuer.run(
            create,
            mode=QueueExecutionMode.drain,
            batch_size=args.batch_size,
            max_concurrent_tasks=args.max_concurrent_tasks,
        )
    )


if __name__ == "__main__":
    main()
