"""Claim: leasing due jobs to a worker, queue-major, honouring pause and concurrency limits.

The store backend (``backends.store_backend``) does the work, equivalent by test (the same suites
run against each):

* the portable path here (:class:`PortableClaims`, the reference; SQLite, MariaDB, PostgreSQL
  without psycopg 3): lock candidate rows with ``SKIP LOCKED`` through the ORM, decide in Python,
  write through the unit of work;
* PostgreSQL's fast path (``store/postgres/claims.py``): one ``CLAIM`` statement per queue,
  pipelined with the queue locks as one round trip when the claim is a transaction of its own.

Both gate each queue by :func:`queue_gates` (paused, or full under its concurrency limit). A queue
holding jobs under limits or partitions (a lane above 0) is served by the flow claim
(``store/flow.py``) on both paths.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count

from ..conf import BackWaveSettings, get_settings
from ..core import actors
from ..core.claim_floors import ClaimFloors
from ..core.limits import PLAIN_LANE
from ..core.outcomes import ClaimedJob
from ..core.states import JobState
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
from ._tx import atomic_retrying, lock_queues
from .backends import store_backend
from .flow import CLAIM_EXTRA, PortableFlowReads, has_flow_jobs, pick
from .limits import record_claims


def claim(
    *,
    worker_id: str,
    queues: Sequence[str],
    max_jobs: int,
    lease_duration: timedelta,
    now: datetime,
    floors: ClaimFloors | None = None,
) -> list[ClaimedJob]:
    """Lease up to ``max_jobs`` (clamped to ``MAX_CLAIM_BATCH``) due jobs, queue-major in the order given.

    Within a queue jobs come by priority (highest first), then due time, then sequence. Paused
    queues yield nothing and a queue's concurrency limit counts its Leased jobs exactly, across
    all workers.

    ``floors`` are a worker's own (``core.claim_floors``): on PostgreSQL, a claim that is its own
    transaction starts reading each plain queue where the worker's earlier claims got to, and
    records what it leased; a job that becomes visible behind them is read once its hint lowers
    them, or by the next full scan.
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
    return store_backend(using).claims.claim(
        using,
        served,
        limit,
        worker_id=worker_id,
        expiry=now + lease_duration,
        now=now,
        settings=settings,
        floors=floors,
    )


def within_gate(wanted: int, slots: int | None) -> int:
    """How many to claim from a queue: what the batch still wants, within the queue's free slots."""
    return max(wanted if slots is None else min(wanted, slots), 0)


#: Each queue's settings as a claim reads them: ``{queue: (paused, concurrency_limit)}``.
QueueOptions = dict[str, tuple[bool, int | None]]


def queue_gates(using: str, queues: list[str], options: QueueOptions) -> dict[str, int | None]:
    """How many jobs each queue may lease now: 0 when paused or full, None when unlimited.

    ``options`` are the queues' settings, read after their shared locks (each backend reads them
    its own way); a limited queue's are read again here, under its settings row's lock.
    """
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


class PortableClaims:
    """The portable path of ``backends.Claims``: :func:`_claim_portable` in one transaction."""

    def claim(
        self,
        using: str,
        served: list[str],
        limit: int,
        *,
        worker_id: str,
        expiry: datetime,
        now: datetime,
        settings: BackWaveSettings,
        floors: ClaimFloors | None = None,
    ) -> list[ClaimedJob]:
        # Floors (PostgreSQL's) are not used: every claim reads from the heads.
        def body() -> list[ClaimedJob]:
            gates = queue_gates(using, served, _queue_options(using, served))
            return _claim_portable(using, served, limit, gates, worker_id=worker_id, expiry=expiry, now=now)

        return atomic_retrying(using, body)


def _queue_options(using: str, queues: list[str]) -> QueueOptions:
    """Take the queues' shared locks, then read their settings."""
    lock_queues(using, queues, exclusive=False)
    return {
        queue: (paused, limit)
        for queue, paused, limit in QueueSettings.objects.using(using)
        .filter(queue__in=queues)
        .values_list("queue", "paused", "concurrency_limit")
    }


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
        take = within_gate(limit - len(leased), gates[queue])
        if take <= 0:
            continue
        if has_flow_jobs(using, queue):
            picked = pick(PortableFlowReads(), using, queue, take, now)
            candidates = [kept for _, kept, _ in picked.jobs]
            record_claims(using, [(c.sequence, keys) for c, _, keys in picked.jobs], picked.bounds, now)
        else:
            candidates = lock_rows(
                JobRecord.objects.using(using)
                .filter(queue=queue, state=JobState.SCHEDULED, lane=PLAIN_LANE, due_time__lte=now)
                .order_by("-priority", "due_time", "sequence")[:take],
                skip_locked=True,
                extra=CLAIM_EXTRA,
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
