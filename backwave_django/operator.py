"""Operator actions on the real clock, for code, shells and the admin.

Each is the store operation of the same name with ``now`` taken from the clock (``clock.now``,
which the test harness makes virtual); the store writes the one ``OperatorAudit`` row for an
action that acted. Editing a job's payload is deliberately not an action.
"""

from __future__ import annotations

import uuid

from . import clock, store
from .core.outcomes import ScheduleSpec
from .core.states import CancelResult, RequeueResult, RetryNowResult, TriggerScheduleResult


def cancel(job_id: uuid.UUID, *, actor: str) -> CancelResult:
    """Cancel a pending job now (cascading), or ask a running one to stop."""
    return store.cancel_job(job_id, actor=actor, now=clock.now())


def requeue(job_id: uuid.UUID, *, actor: str) -> RequeueResult:
    """Run a Dead-Lettered or Quarantined job again from attempt 0."""
    return store.requeue(job_id, actor=actor, now=clock.now())


def retry_now(job_id: uuid.UUID, *, actor: str) -> RetryNowResult:
    """Run a job waiting for its next retry (Scheduled, attempt >= 1) now instead of at its due time."""
    return store.retry_now(job_id, actor=actor, now=clock.now())


def pause_queue(queue: str, *, actor: str) -> None:
    store.pause_queue(queue, actor=actor, now=clock.now())


def resume_queue(queue: str, *, actor: str) -> None:
    store.resume_queue(queue, actor=actor, now=clock.now())


def set_concurrency_limit(queue: str, limit: int | None, *, actor: str) -> None:
    store.set_concurrency_limit(queue, limit, actor=actor, now=clock.now())


def trigger_schedule(schedule_id: str, *, actor: str) -> TriggerScheduleResult:
    """Mint one instance of a schedule now (ignores no-overlap; the schedule's cursor is untouched)."""
    return store.trigger_schedule(schedule_id, actor=actor, now=clock.now())


def save_schedule(spec: ScheduleSpec, *, actor: str) -> None:
    """Create a schedule or redefine it (its cursor and skipped ticks are kept); always audited.

    The cron and zone are validated first: ``ValueError``, nothing stored and nothing audited.
    """
    store.upsert_schedule(spec, now=clock.now(), actor=actor)


def remove_schedule(schedule_id: str, *, actor: str) -> bool:
    """Remove a schedule (instances already minted stay); audited when one was removed."""
    return store.remove_schedule(schedule_id, actor=actor, now=clock.now())
