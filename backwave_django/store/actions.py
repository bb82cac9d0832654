"""Operator actions on jobs and queues: cancel, requeue, pause, resume, concurrency limits, and
removing a queue's settings row.

Each writes exactly one ``OperatorAudit`` row, in its own transaction, when it acts (cancel when
it cancelled or raised the flag, requeue when it requeued; queue changes always; a removal when
it removed the row). The actor is
whoever acts: an operator's name, ``settings``, ``cli:{user}``.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from ..conf import get_settings
from ..core import actors
from ..core.states import (
    CancelResult,
    JobState,
    OperatorAction,
    RemoveQueueResult,
    RequeueResult,
    RetryNowResult,
)
from ..core.validation import (
    require_actor,
    require_aware,
    require_concurrency_limit,
    require_uuid,
    validate_queue_name,
)
from ..database import jobs_database
from ..models import JobRecord, QueueSettings
from ._rows import UnitOfWork, cascade, lock_rows
from ._tx import atomic_retrying, audit, lock_queues, notify
from .postgres.notifications import CANCEL_CHANNEL


def cancel_job(job_id: uuid.UUID, *, actor: str, now: datetime) -> CancelResult:
    """Cancel a pending job at once (cascading), or raise the cancel flag of a running one."""
    require_uuid("job_id", job_id)
    require_actor(actor)
    require_aware("now", now)
    settings = get_settings()
    using = jobs_database()

    def body() -> CancelResult:
        found = lock_rows(JobRecord.objects.using(using).filter(job_id=job_id))
        if not found:
            return CancelResult.NOT_CANCELLABLE
        row = found[0][0]
        uow = UnitOfWork(settings, now)
        if row.state in (JobState.SCHEDULED, JobState.AWAITING_PARENT):
            uow.transition(
                row,
                JobState.CANCELLED,
                actor=actor,
                terminal_at=now,
                terminal_cause=actors.cancelled_by(actor),
            )
            cascade(uow, using, [(row, JobState.CANCELLED)])
            result = CancelResult.CANCELLED_IMMEDIATELY
        elif row.state == JobState.LEASED:
            uow.set(row, cancel_requested=True)
            # Tell the worker now (it listens on PostgreSQL); its next heartbeat would tell it too.
            notify(using, str(job_id), channel=CANCEL_CHANNEL)
            result = CancelResult.CANCELLATION_REQUESTED
        else:
            return CancelResult.NOT_CANCELLABLE
        uow.flush(using)
        audit(using, actor, OperatorAction.CANCEL, str(job_id), now)
        return result

    return atomic_retrying(using, body)


def requeue(job_id: uuid.UUID, *, actor: str, now: datetime) -> RequeueResult:
    """Give a Dead-Lettered or Quarantined job a fresh start: Scheduled, due now, attempt 0."""
    require_uuid("job_id", job_id)
    require_actor(actor)
    require_aware("now", now)
    settings = get_settings()
    using = jobs_database()

    def body() -> RequeueResult:
        found = lock_rows(
            JobRecord.objects.using(using).filter(
                job_id=job_id, state__in=[JobState.DEAD_LETTERED, JobState.QUARANTINED]
            )
        )
        if not found:
            return RequeueResult.NOT_REQUEUEABLE
        row = found[0][0]
        uow = UnitOfWork(settings, now)
        uow.transition(
            row,
            JobState.SCHEDULED,
            actor=actor,
            attempt=0,
            due_time=now,
            lease_owner=None,
            lease_expiry=None,
            cancel_requested=False,
            terminal_at=None,
            terminal_cause=None,
        )
        uow.flush(using)
        audit(using, actor, OperatorAction.REQUEUE, str(job_id), now)
        return RequeueResult.REQUEUED

    return atomic_retrying(using, body)


def retry_now(job_id: uuid.UUID, *, actor: str, now: datetime) -> RetryNowResult:
    """Run a job that is waiting for its next retry now: a Scheduled job that has run before
    (attempt >= 1) becomes due at ``now``. Its attempts and policy are unchanged; audited."""
    require_uuid("job_id", job_id)
    require_actor(actor)
    require_aware("now", now)
    using = jobs_database()

    def body() -> RetryNowResult:
        found = lock_rows(
            JobRecord.objects.using(using).filter(job_id=job_id, state=JobState.SCHEDULED, attempt__gte=1)
        )
        if not found:
            return RetryNowResult.NOT_RETRYING
        row = found[0][0]
        if row.due_time > now:
            JobRecord.objects.using(using).filter(sequence=row.sequence).update(due_time=now)
        audit(using, actor, OperatorAction.RETRY_NOW, str(job_id), now)
        notify(using, row.queue)
        return RetryNowResult.RETRIED_NOW

    return atomic_retrying(using, body)


def pause_queue(queue: str, *, actor: str, now: datetime) -> None:
    """Stop claims from ``queue`` (running jobs carry on); idempotent, always audited."""
    _update_queue_settings(queue, actor, now, OperatorAction.PAUSE_QUEUE, paused=True)


def resume_queue(queue: str, *, actor: str, now: datetime) -> None:
    """Let claims take from ``queue`` again; idempotent, always audited."""
    _update_queue_settings(queue, actor, now, OperatorAction.RESUME_QUEUE, paused=False)


def set_concurrency_limit(queue: str, limit: int | None, *, actor: str, now: datetime) -> None:
    """Cap ``queue`` at ``limit`` Leased jobs across all workers (``None`` clears, 0 blocks)."""
    require_concurrency_limit(limit)
    _update_queue_settings(queue, actor, now, OperatorAction.SET_CONCURRENCY_LIMIT, concurrency_limit=limit)


def _update_queue_settings(
    queue: str, actor: str, now: datetime, action: OperatorAction, **fields: Any
) -> None:
    validate_queue_name(queue)
    require_actor(actor)
    require_aware("now", now)
    using = jobs_database()

    def body() -> None:
        lock_queues(using, [queue], exclusive=True)
        QueueSettings.objects.using(using).update_or_create(queue=queue, defaults=fields)
        audit(using, actor, action, queue, now)

    atomic_retrying(using, body)


def remove_queue_settings(queue: str, *, actor: str, now: datetime) -> RemoveQueueResult:
    """Delete ``queue``'s settings row (its pause flag and limit) if the queue holds no jobs.

    A queue that holds jobs in any state keeps its row (``HOLDS_JOBS``); one without a row answers
    ``NO_SETTINGS``. A removal is audited (``remove_queue``). It takes the queue's lock
    exclusively, like a pause, so no claim is planned against a row that is going away.
    """
    validate_queue_name(queue)
    require_actor(actor)
    require_aware("now", now)
    using = jobs_database()

    def body() -> RemoveQueueResult:
        lock_queues(using, [queue], exclusive=True)
        if JobRecord.objects.using(using).filter(queue=queue).exists():
            return RemoveQueueResult.HOLDS_JOBS
        deleted, _ = QueueSettings.objects.using(using).filter(queue=queue).delete()
        if not deleted:
            return RemoveQueueResult.NO_SETTINGS
        audit(using, actor, OperatorAction.REMOVE_QUEUE, queue, now)
        return RemoveQueueResult.REMOVED

    return atomic_retrying(using, body)
