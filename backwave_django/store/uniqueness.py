"""Unique jobs at enqueue: serializing the enqueues of one key, and finding the job that holds it.

A unique job (``NewJob.unique``) is a ``DUPLICATE`` of the first existing job that holds its key
in one of its ``states``, enqueued within its ``period``; within a batch, a later member with the
key of an earlier one is a ``DUPLICATE`` of it. Enqueues of one key are serialized until their
transaction ends (an advisory lock on PostgreSQL, a lock row on MariaDB, the single writer on
SQLite), so any number of concurrent enqueuers store exactly one job.

Both enqueue paths use this module: the ORM path through :func:`unique_holders`, PostgreSQL's
statement path through :data:`LOOK_UP_UNIQUE` and :func:`judge_unique` (see
``enqueueing._enqueue_unique``). The rule that picks the holder is :func:`first_holders`, once.
"""

from __future__ import annotations

import uuid
import zlib
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from django.db import connections

from ..core.outcomes import NewJob
from ..core.states import EnqueueResult
from ..core.unique import UniqueKey
from ..models import JobRecord, UniqueKeyLock
from .postgres.statements import statement

#: Take the advisory locks of unique keys (their ``unique_lock_key``), in key order
#: (``store/postgres/sql/uniqueness.sql``).
LOCK_UNIQUE_KEYS = statement("LOCK_UNIQUE_KEYS")
#: After :data:`LOCK_UNIQUE_KEYS`, as a statement of its own: the jobs that hold these keys, in the
#: order :func:`first_holders` reads them, and those of these ids that already exist.
LOOK_UP_UNIQUE = statement("LOOK_UP_UNIQUE")

#: A row of :data:`LOOK_UP_UNIQUE`: unique key, job id, state, enqueued at.
Row = tuple[str | None, uuid.UUID, int, datetime]


def unique_lock_key(key: str) -> int:
    """A unique key's advisory-lock key (a collision only serializes two unrelated keys)."""
    return zlib.crc32(key.encode()) - 0x8000_0000


def lock_params(keys: Iterable[str]) -> dict[str, Any]:
    """:data:`LOCK_UNIQUE_KEYS`'s parameters: the keys' lock keys, sorted (every enqueuer takes
    them in the same order, so two batches sharing keys never deadlock)."""
    return {"unique_keys": sorted({unique_lock_key(k) for k in keys})}


def wanted_keys(jobs: Sequence[NewJob], results: Sequence[EnqueueResult | None]) -> dict[str, UniqueKey]:
    """The unique keys of the jobs of a batch still to be judged (``results[i] is None``)."""
    return {j.unique.key: j.unique for j, r in zip(jobs, results, strict=True) if r is None and j.unique}


def first_holders(wanted: dict[str, UniqueKey], rows: Iterable[Row], now: datetime) -> dict[str, uuid.UUID]:
    """Per wanted key, the first job (rows ordered by key, ``enqueued_at``, sequence) that
    conflicts: in one of the key's ``states``, enqueued within its ``period``."""
    holders: dict[str, uuid.UUID] = {}
    for key, job_id, state, enqueued_at in rows:
        if key is None or key in holders:
            continue
        unique = wanted.get(key)
        if unique is None or state not in unique.states:
            continue
        if unique.period is None or enqueued_at >= now - unique.period:
            holders[key] = job_id
    return holders


def lock_unique_keys(using: str, keys: list[str]) -> None:
    """Serialize enqueues of these unique keys until the transaction ends."""
    connection = connections[using]
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(LOCK_UNIQUE_KEYS, lock_params(keys))
    elif connection.vendor == "mysql":
        locks = UniqueKeyLock.objects.using(using)
        for key in keys:
            locks.get_or_create(key=key)
        list(locks.filter(key__in=keys).order_by("key").select_for_update().values_list("id", flat=True))
    # SQLite: one writer at a time already.


def unique_holders(using: str, unique_jobs: list[NewJob], now: datetime) -> dict[str, uuid.UUID]:
    """The ORM path: lock the keys of these unique jobs and find each key's holder."""
    wanted = {j.unique.key: j.unique for j in unique_jobs if j.unique is not None}
    if not wanted:
        return {}
    lock_unique_keys(using, sorted(wanted))
    rows = (
        JobRecord.objects.using(using)
        .filter(unique_key__in=list(wanted))
        .order_by("unique_key", "enqueued_at", "sequence")
        .values_list("unique_key", "job_id", "state", "enqueued_at")
    )
    return first_holders(wanted, rows, now)


def duplicate_of(new_job: NewJob, known: set[uuid.UUID], holders: dict[str, uuid.UUID]) -> uuid.UUID | None:
    """The job ``new_job`` is a ``DUPLICATE`` of: itself when its id is ``known`` (stored, or
    earlier in the batch), its key's holder, or None (it is to be stored)."""
    if new_job.job_id in known:
        return new_job.job_id
    if new_job.unique is not None:
        return holders.get(new_job.unique.key)
    return None


def mark_accepted(new_job: NewJob, known: set[uuid.UUID], holders: dict[str, uuid.UUID]) -> None:
    """``new_job`` is to be stored: a later member of its batch with its id or key is its ``DUPLICATE``."""
    known.add(new_job.job_id)
    if new_job.unique is not None:
        holders[new_job.unique.key] = new_job.job_id


def judge_unique(
    jobs: Sequence[NewJob],
    results: list[EnqueueResult | None],
    wanted: dict[str, UniqueKey],
    rows: list[Row],
    now: datetime,
) -> list[uuid.UUID]:
    """The statement path: from :data:`LOOK_UP_UNIQUE`'s rows, mark in ``results`` each job that
    is a ``DUPLICATE`` (:func:`duplicate_of`); returns the id each job stands for (its holder's,
    for a key)."""
    known = {row[1] for row in rows}
    holders = first_holders(wanted, rows, now)
    stands_for = [j.job_id for j in jobs]
    for index, new_job in enumerate(jobs):
        if results[index] is not None:
            continue
        duplicate = duplicate_of(new_job, known, holders)
        if duplicate is not None:
            results[index], stands_for[index] = EnqueueResult.DUPLICATE, duplicate
        else:
            mark_accepted(new_job, known, holders)
    return stands_for
