"""The raw-psycopg baselines: the same tables, written with plain psycopg 3 and nothing else.

They are the floor the library is compared against, not a competing implementation: no
validation, no transition log, no leases, no tags, no wake-up hints. This module must not import
Django: the processing baselines run it in spawned processes.
"""

from __future__ import annotations

import os
import time
import uuid
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

JOB_TABLE = "backwave_django_jobrecord"
QUEUE = "default"
WIRE_NAME = "bench.noop"
PAYLOAD: dict[str, Any] = {"args": [], "kwargs": {}}

#: The columns an enqueued job needs (the others have no database default but may be NULL, or
#: are written by later transitions). Values match what ``store.enqueue`` writes for a due job.
INSERT_COLUMNS = (
    "job_id",
    "wire_name",
    "queue",
    "payload",
    "state",
    "due_time",
    "attempt",
    "cancel_requested",
    "parents_remaining",
    "mode",
    "enqueued_at",
    "next_ordinal",
)
_COLUMNS_SQL = ", ".join(INSERT_COLUMNS)
_ROW_PLACEHOLDERS = "(" + ", ".join(["%s"] * len(INSERT_COLUMNS)) + ")"
SINGLE_INSERT_SQL = f"INSERT INTO {JOB_TABLE} ({_COLUMNS_SQL}) VALUES {_ROW_PLACEHOLDERS}"

#: The claim query in its plainest form, in the store's order (the partial index
#: ``backwave_job_claim`` is on (queue, lane, priority DESC, due_time, sequence) WHERE state = 0, and
#: the store's claim reads the plain jobs' lane 0 as this does; every benchmark job has priority 0).
CLAIM_SQL = (
    f"SELECT sequence, job_id, wire_name, payload FROM {JOB_TABLE} "
    "WHERE queue = %s AND state = 0 AND lane = 0 AND due_time <= %s "
    "ORDER BY priority DESC, due_time, sequence LIMIT %s FOR UPDATE SKIP LOCKED"
)
FINISH_SQL = (
    f"UPDATE {JOB_TABLE} SET state = 3, attempt = attempt + 1, terminal_at = %s WHERE sequence = ANY(%s)"
)
ANY_DUE_SQL = f"SELECT EXISTS (SELECT 1 FROM {JOB_TABLE} WHERE queue = %s AND state = 0)"


def uuid7() -> uuid.UUID:
    """A time-ordered UUIDv7, like the library's job ids (so both load the unique index alike)."""
    millis = time.time_ns() // 1_000_000
    value = (millis & 0xFFFF_FFFF_FFFF) << 80 | int.from_bytes(os.urandom(10), "big")
    value = (value & ~(0xF << 76)) | (0x7 << 76)
    value = (value & ~(0x3 << 62)) | (0x2 << 62)
    return uuid.UUID(int=value)


def job_row(now: datetime) -> tuple[Any, ...]:
    """One due, Scheduled noop job, as ``store.enqueue`` would write it (minus its log entry)."""
    return (uuid7(), WIRE_NAME, QUEUE, Jsonb(PAYLOAD), 0, now, 0, False, 0, 0, now, 1)


def insert_single(conn: psycopg.Connection[Any], n: int) -> float:
    """``n`` single-row INSERTs, one transaction each (autocommit). Returns elapsed seconds."""
    started = time.perf_counter()
    for _ in range(n):
        conn.execute(SINGLE_INSERT_SQL, job_row(datetime.now(UTC)))
    return time.perf_counter() - started


def insert_bulk(conn: psycopg.Connection[Any], n: int, batch: int = 1000) -> float:
    """``n`` rows as multi-row ``INSERT … VALUES`` statements of ``batch`` rows, one transaction each."""
    full_sql = f"INSERT INTO {JOB_TABLE} ({_COLUMNS_SQL}) VALUES " + ", ".join([_ROW_PLACEHOLDERS] * batch)
    started = time.perf_counter()
    done = 0
    while done < n:
        size = min(batch, n - done)
        sql = (
            full_sql
            if size == batch
            else (f"INSERT INTO {JOB_TABLE} ({_COLUMNS_SQL}) VALUES " + ", ".join([_ROW_PLACEHOLDERS] * size))
        )
        now = datetime.now(UTC)
        params = [value for _ in range(size) for value in job_row(now)]
        with conn.transaction():
            conn.execute(sql, params)
        done += size
    return time.perf_counter() - started


def drain(conninfo: dict[str, Any], batch: int) -> None:
    """Claim up to ``batch`` due jobs with ``FOR UPDATE SKIP LOCKED`` and mark them Succeeded with
    one UPDATE, one transaction per round, until nothing is left Scheduled. The target of the
    processing baselines (run in 1 or 2 spawned processes; ``batch`` 32, or 1 for one job per
    transaction)."""
    with psycopg.connect(**conninfo, autocommit=True) as conn:
        while True:
            now = datetime.now(UTC)
            with conn.transaction():
                rows = conn.execute(CLAIM_SQL, (QUEUE, now, batch)).fetchall()
                if rows:
                    conn.execute(FINISH_SQL, (now, [row[0] for row in rows]))
            if rows:
                continue
            # Nothing claimable: done, unless the other process still holds the last rows locked.
            row = conn.execute(ANY_DUE_SQL, (QUEUE,)).fetchone()
            if not row or not row[0]:
                return
            time.sleep(0.001)
