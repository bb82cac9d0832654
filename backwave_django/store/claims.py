"""Claim: leasing due jobs to a worker, queue-major, honouring pause and concurrency limits.

Three shapes of one operation, equivalent by test (the same suites run against each):

* the portable path (SQLite, MariaDB): lock candidate rows with ``SKIP LOCKED`` through the ORM,
  decide in Python, write through the unit of work;
* on PostgreSQL inside the caller's transaction, or for a queue with a concurrency limit: the
  queue gates read exactly (:func:`queue_gates`), then one :data:`CLAIM` statement per queue;
* on PostgreSQL as a transaction of its own (the worker's case): :func:`_claim_pipelined` sends
  the queue locks and one :data:`CLAIM` per queue in one round trip, as one transaction.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from django.db import connections
from django.db.models import Count

from ..conf import BackWaveSettings, get_settings
from ..core import actors
from ..core.frozen import frozen_builder
from ..core.outcomes import ClaimedJob
from ..core.states import HistoryPolicy, JobState
from ..core.tags import tag_from_pair
from ..core.validation import (
    require_aware,
    require_count,
    require_positive_duration,
    require_queues,
    require_worker_id,
)
from ..database import jobs_database
from ..models import JobRecord, JobTag, QueueSettings
from ._rows import Row, UnitOfWork, lock_rows
from ._schema import JOBS, LEASED, QUEUES, SCHEDULED, TAGS, TRANSITIONS
from ._tx import (
    LOCK_QUEUES_SHARED,
    atomic_retrying,
    fetch_bound,
    lock_queues,
    own_transaction,
    pipelined_transaction,
    queue_keys,
    retrying,
    uses_postgres_statements,
)


def claim(
    *,
    worker_id: str,
    queues: Sequence[str],
    max_jobs: int,
    lease_duration: timedelta,
    now: datetime,
) -> list[ClaimedJob]:
    """Lease up to ``max_jobs`` (clamped to ``MAX_CLAIM_BATCH``) due jobs, queue-major in the order given.

    Within a queue jobs come by priority (highest first), then due time, then sequence. Paused
    queues yield nothing and a queue's concurrency limit counts its Leased jobs exactly, across
    all workers.
    """
    require_worker_id(worker_id)
    served = require_queues(queues)
    require_count("max_jobs", max_jobs)
    require_positive_duration("lease_duration", lease_duration)
    require_aware("now", now)
    settings = get_settings()
    limit = min(max_jobs, settings.max_claim_batch)
    if limit == 0 or not served:
        return []
    using = jobs_database()
    expiry = now + lease_duration
    # A claim that is its own transaction commits without waiting for the disk (see _open_claim).
    alone = own_transaction(using)
    postgres = uses_postgres_statements(using)
    head: list[ClaimedJob] = []
    if alone and postgres:
        head, limited_from = retrying(
            lambda: _claim_pipelined(
                using, served, limit, worker_id=worker_id, expiry=expiry, now=now, settings=settings
            )
        )
        if limited_from is None or len(head) >= limit:
            return head
        # A queue with a concurrency limit: it and the queues after it are served exactly, below.
        served, limit = served[limited_from:], limit - len(head)

    def body() -> list[ClaimedJob]:
        gates = queue_gates(using, served, async_commit=alone)
        if postgres:
            claimed: list[ClaimedJob] = []
            for queue in served:
                take = _take(limit - len(claimed), gates[queue])
                if take > 0:
                    params = _claim_params(take, worker_id, expiry, now, settings)
                    rows = fetch_bound(
                        using, CLAIM, {**params, "queue": queue, "before": [], "through": []}, jobs=take
                    )
                    claimed += _claimed_jobs(rows, worker_id, expiry)
            return claimed
        return _claim_portable(using, served, limit, gates, worker_id=worker_id, expiry=expiry, now=now)

    return head + atomic_retrying(using, body)


def _take(wanted: int, slots: int | None) -> int:
    """How many to claim from a queue: what the batch still wants, within the queue's free slots."""
    return max(wanted if slots is None else min(wanted, slots), 0)


def queue_gates(using: str, queues: list[str], *, async_commit: bool = False) -> dict[str, int | None]:
    """How many jobs each queue may lease now: 0 when paused or full, None when unlimited."""
    if uses_postgres_statements(using):
        options = _open_claim(using, queues, async_commit=async_commit)
    else:
        lock_queues(using, queues, exclusive=False)
        options = {
            queue: (paused, limit)
            for queue, paused, limit in QueueSettings.objects.using(using)
            .filter(queue__in=queues)
            .values_list("queue", "paused", "concurrency_limit")
        }
    limited = sorted(q for q, (paused, limit) in options.items() if limit is not None and not paused)
    leased: dict[str, int] = {}
    if limited:
        # Claimers of a limited queue take turns on its settings row (locked in name order), so
        # the Leased count below is exact when they commit.
        options.update(
            (queue, (paused, limit))
            for queue, paused, limit in QueueSettings.objects.using(using)
            .filter(queue__in=limited)
            .order_by("queue")
            .select_for_update()
            .values_list("queue", "paused", "concurrency_limit")
        )
        leased = dict(
            JobRecord.objects.using(using)
            .filter(queue__in=limited, state=JobState.LEASED)
            .values("queue")
            .annotate(n=Count("sequence"))
            .values_list("queue", "n")
        )
    gates: dict[str, int | None] = {}
    for queue in queues:
        paused, limit = options.get(queue, (False, None))
        gates[queue] = 0 if paused else None if limit is None else max(limit - leased.get(queue, 0), 0)
    return gates


# --- The portable path ------------------------------------------------------------------------


def _claim_portable(
    using: str,
    served: list[str],
    limit: int,
    gates: dict[str, int | None],
    *,
    worker_id: str,
    expiry: datetime,
    now: datetime,
) -> list[ClaimedJob]:
    uow = UnitOfWork(get_settings(), now)
    leased: list[tuple[Row, tuple[Any, ...]]] = []
    for queue in served:
        take = _take(limit - len(leased), gates[queue])
        if take <= 0:
            continue
        candidates = lock_rows(
            JobRecord.objects.using(using)
            .filter(queue=queue, state=JobState.SCHEDULED, due_time__lte=now)
            .order_by("-priority", "due_time", "sequence")[:take],
            skip_locked=True,
            extra=("wire_name", "payload", "backoff", "timeout", "trace_context"),
        )
        for row, extra in candidates:
            uow.transition(
                row,
                JobState.LEASED,
                actor=actors.worker(worker_id),
                attempt=row.attempt + 1,
                lease_owner=worker_id,
                lease_expiry=expiry,
            )
            leased.append((row, extra))
    if not leased:
        return []
    uow.flush(using)
    tags = _tags_of(using, [row.sequence for row, _ in leased])
    return [
        ClaimedJob(
            job_id=row.job_id,
            wire_name=wire_name,
            queue=row.queue,
            payload=payload,
            attempt=row.attempt,
            due_time=row.due_time,
            lease_owner=worker_id,
            lease_expiry=expiry,
            tags=tags.get(row.sequence, ()),
            cancel_requested=row.cancel_requested,
            max_attempts=row.max_attempts,
            backoff=None if backoff is None else tuple(backoff),
            timeout=timeout,
            trace_context=trace_context,
        )
        for row, (wire_name, payload, backoff, timeout, trace_context) in leased
    ]


def _tags_of(using: str, sequences: list[int]) -> dict[int, tuple[Any, ...]]:
    result: dict[int, list[Any]] = {}
    rows = (
        JobTag.objects.using(using)
        .filter(job_id__in=sequences)
        .order_by("id")
        .values_list("job_id", "key", "value")
    )
    for sequence, key, value in rows:
        result.setdefault(sequence, []).append(tag_from_pair((key, value)))
    return {sequence: tuple(tags) for sequence, tags in result.items()}


# --- The PostgreSQL path ----------------------------------------------------------------------

#: Lease up to ``take`` due jobs of one queue, log the claims, trim logs over the cap, and return
#: the claimed jobs with their tags.
#:
#: The batch size (``gate``) is worked out in the statement: nothing from a paused queue, and
#: nothing when a queue in ``through`` (this one or an earlier one of the same claim) has a
#: concurrency limit: such queues are served on the exact path, whose caller passes empty
#: ``before`` and ``through`` because it has gated the claim itself. What earlier queues of the
#: same transaction leased (rows whose version this transaction wrote: ``xmin``) is taken off
#: ``take``.
#:
#: Order: priority (highest first), then due time, then sequence. The claim index holds
#: (queue, priority DESC, due_time, sequence), and the statement walks it one priority at a time
#: (``priorities``, a loose index scan: one probe per priority in use), taking the due jobs of
#: each by a range scan that stops at the first job not yet due. So jobs due later, at any
#: priority, are never read, and ``SKIP LOCKED`` skips rows other claimers hold before ``LIMIT``
#: counts, as a single range scan would. The walk stops as soon as the batch is full.
#:
#: ``ANY(ARRAY(…))`` rather than a join, here and below: a prepared statement's generic plan
#: guesses the LIMIT at a tenth of the table and would hash-join a full scan; an array probes the
#: primary key.
CLAIM = f"""
WITH RECURSIVE gate AS (
    SELECT CASE
        WHEN coalesce(bool_or(s.paused) FILTER (WHERE s.queue = %(queue)s), false) THEN 0
        WHEN coalesce(bool_or(s.concurrency_limit IS NOT NULL AND NOT s.paused), false) THEN 0
        ELSE greatest(%(take)s - (
            SELECT count(*) FROM {JOBS} AS e
            WHERE e.state = {LEASED} AND e.queue = ANY(%(before)s) AND e.lease_expiry = %(expiry)s
              AND e.lease_owner = %(worker)s AND e.xmin = pg_current_xact_id_if_assigned()::xid
        ), 0)
    END AS take
    FROM {QUEUES} AS s WHERE s.queue = ANY(%(through)s)
), priorities AS (
    (SELECT priority FROM {JOBS}
     WHERE queue = %(queue)s AND state = {SCHEDULED}
     ORDER BY priority DESC LIMIT 1)
    UNION ALL
    SELECT (SELECT j.priority FROM {JOBS} AS j
            WHERE j.queue = %(queue)s AND j.state = {SCHEDULED} AND j.priority < p.priority
            ORDER BY j.priority DESC LIMIT 1)
    FROM priorities AS p
    WHERE p.priority IS NOT NULL
), picked AS (
    SELECT due.sequence
    FROM priorities AS p
    CROSS JOIN LATERAL (
        SELECT j.sequence FROM {JOBS} AS j
        WHERE j.queue = %(queue)s AND j.state = {SCHEDULED} AND j.priority = p.priority
          AND j.due_time <= %(now)s
        ORDER BY j.due_time, j.sequence
        LIMIT (SELECT take FROM gate)
        FOR UPDATE SKIP LOCKED
    ) AS due
    WHERE p.priority IS NOT NULL
    LIMIT (SELECT take FROM gate)
), leased AS (
    UPDATE {JOBS} AS j
    SET state = {LEASED}, attempt = j.attempt + 1, lease_owner = %(worker)s, lease_expiry = %(expiry)s,
        next_ordinal = j.next_ordinal + 1
    WHERE j.sequence = ANY(ARRAY(SELECT sequence FROM picked))
    RETURNING j.sequence, j.job_id, j.wire_name, j.queue, j.payload, j.attempt, j.due_time, j.priority,
              j.next_ordinal - 1 AS ordinal, j.cancel_requested, j.max_attempts, j.backoff, j.timeout,
              j.trace_context
), logged AS (
    INSERT INTO {TRANSITIONS} (job_id, ordinal, recorded_at, state, attempt, failure_detail, actor)
    SELECT sequence, ordinal, %(now)s, {LEASED}, attempt, NULL, %(worker)s FROM leased WHERE %(history)s
), trimmed AS (
    DELETE FROM {TRANSITIONS} AS t
    USING (SELECT sequence, ordinal FROM leased WHERE ordinal >= %(cap)s) AS l
    WHERE %(history)s AND t.job_id = l.sequence AND t.ordinal <= l.ordinal - %(cap)s
      AND t.job_id = ANY(ARRAY(SELECT sequence FROM leased WHERE ordinal >= %(cap)s))
)
SELECT l.job_id, l.wire_name, l.queue, l.payload, l.attempt, l.due_time,
       (SELECT json_agg(json_build_array(t.key, t.value) ORDER BY t.id) FROM {TAGS} AS t
        WHERE t.job_id = l.sequence),
       l.cancel_requested, l.max_attempts, l.backoff, l.timeout, l.trace_context
FROM leased AS l
ORDER BY l.priority DESC, l.due_time, l.sequence
"""

#: Open a claim's transaction: take the queues' shared locks, then read their settings, whose
#: snapshot is taken after the locks were acquired (two statements, one round trip). A claim that
#: is its own transaction also commits without waiting for the WAL flush and runs :data:`CLAIM`
#: on its generic plan (see :func:`_open_claim`).
OPEN_CLAIM = f"""{LOCK_QUEUES_SHARED};
SELECT queue, paused, concurrency_limit FROM {QUEUES} WHERE queue = ANY(%(queues)s)"""
OPEN_CLAIM_OWN = f"""SET LOCAL synchronous_commit = off; SET LOCAL plan_cache_mode = force_generic_plan;
{OPEN_CLAIM}"""

#: The first statement of a pipelined claim: the asynchronous commit, the generic plan (see
#: :func:`_open_claim`), the shared queue locks, and which of the queues are limited (read beside
#: the locks: this snapshot may predate a change the locks waited for, so it only picks the path;
#: the claim statements' own, later reads decide).
PIPELINED_OPEN = f"""
SELECT set_config('synchronous_commit', 'off', true),
       set_config('plan_cache_mode', 'force_generic_plan', true),
       ({LOCK_QUEUES_SHARED}),
       ARRAY(SELECT queue FROM {QUEUES}
             WHERE queue = ANY(%(queues)s) AND concurrency_limit IS NOT NULL AND NOT paused)
"""


def _claim_params(
    take: int, worker_id: str, expiry: datetime, now: datetime, settings: BackWaveSettings
) -> dict[str, Any]:
    """The parameters a claim statement shares across queues (the queue and its bounds are added)."""
    return {
        "now": now,
        "take": take,
        "worker": worker_id,
        "expiry": expiry,
        "history": settings.history is not HistoryPolicy.OFF,
        "cap": settings.max_transitions_per_job,
    }


def _open_claim(using: str, queues: list[str], *, async_commit: bool) -> dict[str, tuple[bool, int | None]]:
    """Open a claim (see :data:`OPEN_CLAIM`) in one round trip; returns the queues' settings.

    A claim's durability is not needed for any guarantee, so its commit does not wait for the
    disk (``SET LOCAL synchronous_commit = off``, this transaction only). If PostgreSQL crashes
    and loses a claim that a worker already acted on, the job is simply Scheduled again, as if
    the claim had never happened: the worker's outcome for it is fenced off (the job is not
    Leased by it), and the job runs again, which at-least-once execution allows. Outcomes,
    enqueues and operator actions keep waiting for the flush.

    Such a claim also runs :data:`CLAIM` on its generic plan (``SET LOCAL plan_cache_mode =
    force_generic_plan``). The statement is written for that plan (see its comment), and left to
    choose, PostgreSQL keeps planning it afresh for every claim of a connection whose first
    claims found a queue empty or nearly so, as a worker started before its jobs arrive does:
    about 0.4 ms of the server's CPU per claim (docs/performance.md, "The claim's plan").

    A claim made inside the caller's own transaction leaves that transaction's settings alone
    (``async_commit=False``).
    """
    params: dict[str, Any] = {"queue_keys": queue_keys(queues), "queues": queues}
    with connections[using].cursor() as cursor:
        opening = OPEN_CLAIM_OWN if async_commit else OPEN_CLAIM
        cursor.execute(opening, params)
        for _ in range(opening.count(";")):  # to the last statement's rows: the settings
            cursor.nextset()
        return {queue: (paused, limit) for queue, paused, limit in cursor.fetchall()}


def _claim_pipelined(
    using: str,
    queues: list[str],
    take: int,
    *,
    worker_id: str,
    expiry: datetime,
    now: datetime,
    settings: BackWaveSettings,
) -> tuple[list[ClaimedJob], int | None]:
    """A claim that is its own transaction, sent to PostgreSQL in one round trip.

    The asynchronous commit and the shared queue locks (with a look at which queues are
    limited) and one :data:`CLAIM` per queue go out together in psycopg's pipeline mode, and the
    server runs them in order; the worker waits once instead of once per statement. They need no
    ``BEGIN`` and ``COMMIT``: in a pipeline, the statements before its Sync are one transaction,
    committed at the Sync (or rolled back there, with the statements after a failed one
    skipped), and the locks and the local setting last until then (two statements fewer, for
    the client and for the server). Each claim statement works out its own batch size (paused
    queues take nothing, and later queues take what earlier ones left). Queues with a concurrency
    limit need the exact, locked count of :func:`queue_gates`: the pipeline takes nothing from the
    first such queue on, and returns its index so that :func:`claim` serves the rest on the exact
    path.
    """
    common = _claim_params(take, worker_id, expiry, now, settings)
    with pipelined_transaction(using, jobs=take) as (pipeline, cursor):
        opening, *claims = (cursor() for _ in range(1 + len(queues)))
        with pipeline():  # one transaction: its Sync, at the end of the block, commits it
            opening.execute(PIPELINED_OPEN, {"queue_keys": queue_keys(queues), "queues": queues})
            for index, (queue, claim_cursor) in enumerate(zip(queues, claims, strict=True)):
                bounds = {"queue": queue, "before": queues[:index], "through": queues[: index + 1]}
                claim_cursor.execute(CLAIM, {**common, **bounds})
        limited = set(opening.fetchone()[-1])
        claimed = [job for c in claims for job in _claimed_jobs(c.fetchall(), worker_id, expiry)]
    limited_from = next((index for index, queue in enumerate(queues) if queue in limited), None)
    return claimed, limited_from


#: Builds a :class:`ClaimedJob` in a fifth of the time its frozen ``__init__`` takes (see
#: :func:`core.frozen.frozen_builder`): a claim builds one per job.
_build_claimed = frozen_builder(ClaimedJob)


def _claimed_jobs(rows: list[tuple[Any, ...]], worker_id: str, expiry: datetime) -> list[ClaimedJob]:
    return [
        _build_claimed(
            job_id=job_id,
            wire_name=wire_name,
            queue=queue_name,
            payload=json.loads(payload) if isinstance(payload, str) else payload,
            attempt=attempt,
            due_time=due_time,
            lease_owner=worker_id,
            lease_expiry=expiry,
            tags=tuple(tag_from_pair((k, v)) for k, v in _json(tags)) if tags else (),
            cancel_requested=cancel_requested,
            max_attempts=max_attempts,
            backoff=None if backoff is None else tuple(_json(backoff)),
            timeout=timeout,
            trace_context=trace_context,
        )
        for (
            job_id,
            wire_name,
            queue_name,
            payload,
            attempt,
            due_time,
            tags,
            cancel_requested,
            max_attempts,
            backoff,
            timeout,
            trace_context,
        ) in rows
    ]


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value
