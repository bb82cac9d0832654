"""PostgreSQL's path of one enqueue batch (``backends.Inserts``): jobs without parents in one
statement (``inserts``), after the lock and look-up of their unique keys when some are unique.
A batch with parents takes the portable path (``store.enqueueing``), which also locks the
parents.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from django.db import IntegrityError

from ....conf import BackWaveSettings
from ....core.outcomes import NewJob
from ....core.states import EnqueueResult
from ..._tx import atomic_retrying, retrying
from ...enqueueing import PortableInserts
from ...job_inserts import Enqueued, enqueued_entries
from ...uniqueness import LOCK_UNIQUE_KEYS, LOOK_UP_UNIQUE, judge_unique, lock_params, wanted_keys
from ..connection import fetch_bound, own_transaction, pipelined_transaction, server_bound
from .inserts import insert_statement, stored_ids, with_on_conflict


class PostgresInserts:
    """PostgreSQL's path of ``backends.Inserts``."""

    def __init__(self) -> None:
        self._portable = PortableInserts()

    def insert(
        self,
        using: str,
        jobs: list[NewJob],
        results: list[EnqueueResult | None],
        now: datetime,
        settings: BackWaveSettings,
        raise_refusals: bool,
    ) -> list[Enqueued]:
        if any(j.parents for j in jobs):
            return self._portable.insert(using, jobs, results, now, settings, raise_refusals)
        if any(j.unique for j in jobs):
            return _enqueue_unique(using, jobs, results, now, settings)
        return _enqueue_without_parents(using, jobs, results, now, settings)


def _enqueue_without_parents(
    using: str,
    jobs: list[NewJob],
    results: list[EnqueueResult | None],
    now: datetime,
    settings: BackWaveSettings,
) -> list[Enqueued]:
    """Insert jobs that have no parents in one statement (atomic by itself, so it needs no
    transaction of its own and simply joins the caller's). A job id already stored, or repeated
    earlier in the batch, is a DUPLICATE.

    Outside the caller's transaction, jobs whose ids are all new go without ``ON CONFLICT``
    (``inserts.ENQUEUE_NEW``); if one of them was stored before after all (the same
    prepared job sent twice), that statement fails and changes nothing, and the batch is sent
    again with it."""
    sql, params, first = insert_statement(
        jobs, results, now, settings, new_ids_allowed=own_transaction(using)
    )
    if not first:
        return enqueued_entries(jobs, results, first, [])
    try:
        rows = fetch_bound(using, sql, params, jobs=len(first))
    except IntegrityError:
        checked = with_on_conflict(sql)
        if checked is None:
            raise
        sql = checked
        rows = fetch_bound(using, sql, params, jobs=len(first))
    return enqueued_entries(jobs, results, first, stored_ids(sql, first, rows))


def _enqueue_unique(
    using: str,
    jobs: list[NewJob],
    results: list[EnqueueResult | None],
    now: datetime,
    settings: BackWaveSettings,
) -> list[Enqueued]:
    """Jobs without parents, some of them unique: lock their keys, look up the keys' holders and
    the ids that exist (a statement of its own, after the lock), judge the batch
    (``uniqueness.judge_unique``), then insert the rest as :func:`_enqueue_without_parents` does.

    In a transaction of its own this takes two round trips: BEGIN, the lock and the look-up in
    one flight, then the insert and COMMIT in another. Inside the caller's transaction the same
    statements run one by one under a savepoint."""
    wanted = wanted_keys(jobs, results)
    look_up = {
        "keys": list(wanted),
        "job_ids": [j.job_id for j, r in zip(jobs, results, strict=True) if r is None and j.unique],
    }

    def judged(rows: list[Any]) -> tuple[list[EnqueueResult | None], list[uuid.UUID]]:
        decided = list(results)
        return decided, judge_unique(jobs, decided, wanted, rows, now)

    def in_callers_transaction() -> list[Enqueued]:
        with server_bound(using) as cursor:
            cursor.execute(LOCK_UNIQUE_KEYS, lock_params(wanted))
            cursor.execute(LOOK_UP_UNIQUE, look_up)
            decided, stands_for = judged(cursor.fetchall())
        enqueued = _enqueue_without_parents(using, jobs, decided, now, settings)
        return _standing_for(enqueued, stands_for)

    def own() -> list[Enqueued]:
        with pipelined_transaction(using, jobs=len(jobs)) as tx:
            locking, looking, inserting = tx.cursor(), tx.cursor(), tx.cursor()
            with tx.round_trip():
                tx.begin()
                locking.execute(LOCK_UNIQUE_KEYS, lock_params(wanted))
                looking.execute(LOOK_UP_UNIQUE, look_up)
            decided, stands_for = judged(looking.fetchall())
            sql, params, first = insert_statement(jobs, decided, now, settings)
            with tx.round_trip():
                if first:
                    inserting.execute(sql, params)
                tx.commit()
            rows = inserting.fetchall() if first else []
        entries = enqueued_entries(jobs, decided, first, stored_ids(sql, first, rows))
        return _standing_for(entries, stands_for)

    if own_transaction(using):
        return retrying(own)
    return atomic_retrying(using, in_callers_transaction)


def _standing_for(enqueued: list[Enqueued], stands_for: list[uuid.UUID]) -> list[Enqueued]:
    return [Enqueued(e.result, job_id) for e, job_id in zip(enqueued, stands_for, strict=True)]
