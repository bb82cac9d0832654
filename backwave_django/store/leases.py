"""Leases: renewing them (heartbeats), disposing expired ones, and releasing them at shutdown.

A lease is dead at its expiry instant: a heartbeat or outcome at exactly ``lease_expiry`` fails.
Every way a lease ends here (the sweep, a release) frees the job's flow-control slots in the same
transaction (``limits.free_slots``), as outcomes do.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ..conf import get_settings
from ..core import actors
from ..core.limits import PLAIN_LANE
from ..core.outcomes import HeartbeatResult
from ..core.retry import RetryPolicy, ceiling_given_back, job_retry_policy
from ..core.states import JobState
from ..core.validation import (
    require_aware,
    require_count,
    require_positive_duration,
    require_queues,
    require_uuid,
    require_worker_id,
)
from ..database import jobs_database
from ..models import JobRecord
from ._rows import Row, UnitOfWork, cascade, lock_rows
from ._tx import atomic_retrying, notify
from .limits import free_slots


def heartbeat(
    *, worker_id: str, job_ids: Sequence[uuid.UUID], lease_duration: timedelta, now: datetime
) -> list[HeartbeatResult]:
    """Renew every live lease ``worker_id`` holds among ``job_ids``; results in input order.

    A lease that is not renewed (expired, taken over, or the job ended) is lost: the worker
    must abandon that job and report nothing. ``cancel_requested`` carries the cancel flag.
    """
    require_worker_id(worker_id)
    ids = [require_uuid("job_ids[]", j) for j in job_ids]
    require_positive_duration("lease_duration", lease_duration)
    require_aware("now", now)
    if not ids:
        return []
    using = jobs_database()

    def body() -> dict[uuid.UUID, tuple[int, bool]]:
        live = {
            job_id: (sequence, flag)
            for sequence, job_id, flag in JobRecord.objects.using(using)
            .filter(job_id__in=set(ids), state=JobState.LEASED, lease_owner=worker_id, lease_expiry__gt=now)
            .order_by("sequence")
            .select_for_update()
            .values_list("sequence", "job_id", "cancel_requested")
        }
        if live:
            JobRecord.objects.using(using).filter(sequence__in=[s for s, _ in live.values()]).update(
                lease_expiry=now + lease_duration
            )
        return live

    live = atomic_retrying(using, body)
    return [
        HeartbeatResult(job_id=j, renewed=j in live, cancel_requested=j in live and live[j][1]) for j in ids
    ]


@dataclass(frozen=True, slots=True)
class ExpiredLeases:
    """What one sweep of expired leases did to the jobs it disposed."""

    #: Scheduled again for another attempt (the retry policy had one left).
    redelivered: int = 0
    #: Dead-Lettered: the lease expired on the job's last attempt.
    dead_lettered: int = 0

    @property
    def disposed(self) -> int:
        return self.redelivered + self.dead_lettered


def expire_leases(*, now: datetime, queues: Sequence[str], retry: RetryPolicy, max_jobs: int = 32) -> int:
    """:func:`sweep_expired_leases`, returning how many leases were disposed."""
    return sweep_expired_leases(now=now, queues=queues, retry=retry, max_jobs=max_jobs).disposed


def sweep_expired_leases(
    *, now: datetime, queues: Sequence[str], retry: RetryPolicy, max_jobs: int = 32
) -> ExpiredLeases:
    """Dispose up to ``max_jobs`` expired leases in ``queues``: retry them, or dead-letter at the ceiling.

    Each job is judged by its own stored policy (``max_attempts``, ``backoff``); ``retry`` (the
    settings' ``RETRY``) stands in for what a row does not store. Concurrent sweeps skip each
    other's rows, so each lease is disposed exactly once. Returns how many went each way.
    """
    require_aware("now", now)
    served = require_queues(queues)
    if not isinstance(retry, RetryPolicy):
        raise TypeError(f"retry must be a RetryPolicy, got {type(retry).__name__}")
    require_count("max_jobs", max_jobs)
    if not served or max_jobs == 0:
        return ExpiredLeases()
    settings = get_settings()
    using = jobs_database()

    def body() -> ExpiredLeases:
        rows = lock_rows(
            JobRecord.objects.using(using)
            .filter(queue__in=served, state=JobState.LEASED, lease_expiry__lte=now)
            .order_by("lease_expiry", "sequence")[:max_jobs],
            skip_locked=True,
            extra=("backoff", "lane"),
        )
        uow = UnitOfWork(settings, now)
        ended: list[tuple[Row, JobState]] = []
        released = {"lease_owner": None, "lease_expiry": None}
        for row, (backoff, _) in rows:
            retry_at = job_retry_policy(row.max_attempts, backoff, retry).next_attempt_at(row.attempt, now)
            if retry_at is not None:
                uow.transition(
                    row, JobState.SCHEDULED, actor=actors.LEASE_EXPIRY, due_time=retry_at, **released
                )
            else:
                uow.transition(
                    row,
                    JobState.DEAD_LETTERED,
                    actor=actors.LEASE_EXPIRY,
                    terminal_at=now,
                    terminal_cause=actors.lease_expired(row.attempt),
                    **released,
                )
                ended.append((row, JobState.DEAD_LETTERED))
        cascade(uow, using, ended)
        uow.flush(using)
        free_slots(using, [(row.sequence, row.queue) for row, (_, lane) in rows if lane != PLAIN_LANE])
        return ExpiredLeases(redelivered=len(rows) - len(ended), dead_lettered=len(ended))

    return atomic_retrying(using, body)


def release_leases(*, worker_id: str, job_ids: Sequence[uuid.UUID], now: datetime) -> int:
    """Give back ``worker_id``'s live leases on ``job_ids``: each job goes Leased → Scheduled, due
    ``now``, for any worker to run again. Used by a worker shutting down with jobs still running.

    A release never dead-letters and does not spend the job's retry budget: its ``max_attempts``
    is raised by one, so the attempt it cut short is given back. Returns how many were released.
    """
    require_worker_id(worker_id)
    ids = [require_uuid("job_ids[]", j) for j in job_ids]
    require_aware("now", now)
    if not ids:
        return 0
    settings = get_settings()
    using = jobs_database()

    def body() -> int:
        rows = lock_rows(
            JobRecord.objects.using(using)
            .filter(job_id__in=ids, state=JobState.LEASED, lease_owner=worker_id, lease_expiry__gt=now)
            .order_by("sequence"),
            extra=("lane",),
        )
        uow = UnitOfWork(settings, now)
        for row, _ in rows:
            uow.transition(
                row,
                JobState.SCHEDULED,
                actor=actors.worker(worker_id),
                due_time=now,
                lease_owner=None,
                lease_expiry=None,
                max_attempts=ceiling_given_back(row.max_attempts, settings.retry),
            )
        uow.flush(using)
        free_slots(using, [(row.sequence, row.queue) for row, (lane,) in rows if lane != PLAIN_LANE])
        for queue in sorted({row.queue for row, _ in rows}):
            notify(using, queue)
        return len(rows)

    return atomic_retrying(using, body)


def record_progress(*, worker_id: str, progress: Sequence[tuple[uuid.UUID, int, Any]], now: datetime) -> int:
    """Store running attempts' progress, each only while ``worker_id`` holds that attempt's live
    lease (a lost lease drops it). ``progress`` holds ``(job_id, attempt, value)``; the value is
    JSON (``{"done", "total", "note", "at"}``). One transaction; returns how many were stored."""
    require_worker_id(worker_id)
    require_aware("now", now)
    wanted = {require_uuid("progress[][0]", job_id): (attempt, value) for job_id, attempt, value in progress}
    if not wanted:
        return 0
    using = jobs_database()

    def body() -> int:
        live = list(
            JobRecord.objects.using(using)
            .filter(job_id__in=wanted, state=JobState.LEASED, lease_owner=worker_id, lease_expiry__gt=now)
            .order_by("sequence")
            .select_for_update()
            .only("sequence", "job_id", "attempt")
        )
        fresh = [record for record in live if wanted[record.job_id][0] == record.attempt]
        for record in fresh:
            record.progress = wanted[record.job_id][1]
        if fresh:
            JobRecord.objects.using(using).bulk_update(fresh, ["progress"])
        return len(fresh)

    return atomic_retrying(using, body)
