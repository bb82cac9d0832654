"""Operator actions on the real clock, for code, shells and the admin.

Each is the store operation of the same name with ``now`` taken from the clock (``clock.now``,
which the test harness makes virtual); the store writes the one ``OperatorAudit`` row for an
action that acted. Editing a job's payload is deliberately not an action.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from . import clock, monitor, store
from .conf import get_settings
from .core import actors
from .core.limits import LimitValues
from .core.outcomes import ScheduleSpec
from .core.states import (
    CancelResult,
    ClearLimitResult,
    RemoveQueueResult,
    RequeueResult,
    RetryNowResult,
    TerminalStateClass,
    TriggerScheduleResult,
)
from .core.validation import require_actor, require_concurrency_limit, validate_queue_name
from .store import KEEP as KEEP, Keep as Keep


def cancel(job_id: uuid.UUID, *, actor: str) -> CancelResult:
    """Cancel a pending job now (cascading), or ask a running one to stop."""
    return store.cancel_job(job_id, actor=actor, now=clock.now())


def requeue(job_id: uuid.UUID, *, actor: str) -> RequeueResult:
    """Run a Dead-Lettered or Quarantined job again from attempt 0."""
    return store.requeue(job_id, actor=actor, now=clock.now())


def retry_now(job_id: uuid.UUID, *, actor: str) -> RetryNowResult:
    """Run a job waiting for its next retry (Scheduled, attempt >= 1) now instead of at its due time."""
    return store.retry_now(job_id, actor=actor, now=clock.now())


class UnknownQueueError(ValueError):
    """A queue action named a queue nothing uses (``monitor.is_queue_in_use``), without ``create``.

    Nothing was changed. ``suggestions`` are the queues in use with the closest names.
    """

    def __init__(self, queue: str, suggestions: list[str]) -> None:
        self.queue = queue
        self.suggestions = suggestions
        hint = did_you_mean(suggestions)
        super().__init__(f"no declared job, schedule or stored job uses queue {queue!r}{hint}")


def did_you_mean(suggestions: list[str]) -> str:
    """``"; did you mean 'a' or 'b'?"`` for a refusal's message, or nothing without suggestions."""
    return "; did you mean " + " or ".join(repr(name) for name in suggestions) + "?" if suggestions else ""


def require_queue_in_use(queue: str, *, create: bool = False) -> str:
    """``queue`` if it follows the queue-name rule and something uses it (or ``create``); else
    ``ValueError`` with the rule, or :class:`UnknownQueueError` with close matches."""
    validate_queue_name(queue)
    if not create and not monitor.is_queue_in_use(queue):
        raise UnknownQueueError(queue, monitor.similar_queues(queue))
    return queue


def pause_queue(queue: str, *, actor: str, create: bool = False) -> None:
    """Stop claims from ``queue``; a queue nothing uses is refused unless ``create`` (docs/admin.md,
    "Queues"). Audited."""
    require_actor(actor)
    store.pause_queue(require_queue_in_use(queue, create=create), actor=actor, now=clock.now())


def resume_queue(queue: str, *, actor: str, create: bool = False) -> None:
    """Let claims take from ``queue`` again (the same refusal as :func:`pause_queue`). Audited."""
    require_actor(actor)
    store.resume_queue(require_queue_in_use(queue, create=create), actor=actor, now=clock.now())


def set_concurrency_limit(queue: str, limit: int | None, *, actor: str, create: bool = False) -> None:
    """Cap ``queue`` at ``limit`` Leased jobs (None clears, 0 blocks); the same refusal as
    :func:`pause_queue`. Audited."""
    require_actor(actor)
    require_concurrency_limit(limit)
    store.set_concurrency_limit(
        require_queue_in_use(queue, create=create), limit, actor=actor, now=clock.now()
    )


def remove_queue(queue: str, *, actor: str) -> RemoveQueueResult:
    """Remove ``queue``'s settings row (pause flag and limit) when the queue holds no jobs.

    ``HOLDS_JOBS`` (nothing removed) when it holds any; ``NO_SETTINGS`` when it has no row.
    Audited when it removed the row.
    """
    return store.remove_queue_settings(queue, actor=actor, now=clock.now())


def require_limit_name(name: str) -> str:
    """``name`` if it follows the queue-name rule (which limit names follow), else ``ValueError``."""
    return validate_queue_name(name, "limit name")


class UnknownLimitError(ValueError):
    """An override named a limit nothing uses (``monitor.known_limit``), without ``create``.

    Nothing was changed. ``suggestions`` are the declared or overridden limits with the closest
    names.
    """

    def __init__(self, name: str, suggestions: list[str]) -> None:
        self.name = name
        self.suggestions = suggestions
        super().__init__(f"no worker declares limit {name!r} and no job uses it{did_you_mean(suggestions)}")


def require_known_limit(name: str, *, create: bool = False) -> str:
    """``name`` if it follows the limit-name rule and something uses it (or ``create``); else
    ``ValueError`` with the rule, or :class:`UnknownLimitError` with close matches."""
    require_limit_name(name)
    if not create and not monitor.known_limit(name):
        raise UnknownLimitError(name, monitor.similar_limits(name))
    return name


def set_limit(
    name: str,
    *,
    concurrency: int | Keep | None = KEEP,
    rate: int | Keep | None = KEEP,
    period: float | timedelta | Keep = KEEP,
    actor: str,
    create: bool = False,
) -> LimitValues:
    """Override flow-control limit ``name`` cluster-wide (docs/flow-control.md, "Overrides"); the
    bounds now in force, which the next claim obeys.

    An argument not given keeps the value in force now; None removes that bound; at least one of
    ``concurrency`` and ``rate`` must remain (else ``ValueError``, nothing changed). A limit
    nothing uses (no worker declares it, no override or lease names it, and no job that has not
    ended names it: ``monitor.known_limit``) is most likely a typo, and is refused with
    :class:`UnknownLimitError` (nothing stored, nothing audited) unless ``create``: then the
    override creates it, in force for its jobs at once. Audited.
    """
    require_actor(actor)
    require_known_limit(name, create=create)
    seconds = period.total_seconds() if isinstance(period, timedelta) else period
    return store.set_limit(
        name, concurrency=concurrency, rate=rate, period=seconds, actor=actor, now=clock.now()
    )


def clear_limit(name: str, *, actor: str) -> ClearLimitResult:
    """Remove the override of limit ``name``: the declared bounds apply again. ``NOT_OVERRIDDEN``
    or ``UNKNOWN_LIMIT`` when there is nothing to clear (nothing changed); audited when cleared."""
    return store.clear_limit(name, actor=actor, now=clock.now())


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


@dataclass(frozen=True)
class PurgedClass:
    """What a purge did (or, on a dry run, would do) to one retention class."""

    state_class: TerminalStateClass
    #: ``RETENTION`` for the class; None when it is kept forever (nothing was looked at).
    retention: timedelta | None
    #: Jobs that ended at or before this instant were eligible (None with ``retention``).
    terminal_before: datetime | None
    #: Jobs deleted; on a dry run, jobs that would be deleted.
    jobs: int


@dataclass(frozen=True)
class PurgeReport:
    dry_run: bool
    now: datetime
    classes: tuple[PurgedClass, ...]

    @property
    def jobs(self) -> int:
        return sum(entry.jobs for entry in self.classes)


#: ``on_batch(state_class, purged_so_far)``: called after every batch of a purge that deleted jobs.
PurgeProgress = Callable[[TerminalStateClass, int], None]


def _retention(state_class: TerminalStateClass) -> timedelta | None:
    settings = get_settings()
    if state_class is TerminalStateClass.SUCCEEDED_OR_CANCELLED:
        return settings.retention_succeeded_or_cancelled
    return settings.retention_dead_lettered_or_quarantined


def purge(*, actor: str, dry_run: bool = False, on_batch: PurgeProgress | None = None) -> PurgeReport:
    """Purge the terminal jobs past ``RETENTION`` now, as the worker's maintenance does, until done.

    Each class whose retention is set is purged in batches of ``MAX_PURGE_BATCH`` (one transaction
    each) until a batch finds nothing; the cutoff is fixed at the start (``now - RETENTION``).
    A run writes one ``OperatorAudit`` row at the end, whatever it deleted; ``dry_run`` counts
    what would go and deletes and audits nothing.
    """
    require_actor(actor)
    now = clock.now()
    classes = []
    for state_class in TerminalStateClass:
        keep = _retention(state_class)
        if keep is None:
            classes.append(PurgedClass(state_class, None, None, 0))
            continue
        cutoff = now - keep
        if dry_run:
            jobs = store.count_purgeable(state_class, terminal_before=cutoff)
        else:
            jobs = 0
            while batch := store.purge_terminal(
                state_class, terminal_before=cutoff, max_jobs=get_settings().max_purge_batch
            ):
                jobs += batch
                if on_batch is not None:
                    on_batch(state_class, jobs)
        classes.append(PurgedClass(state_class, keep, cutoff, jobs))
    report = PurgeReport(dry_run, now, tuple(classes))
    if not dry_run:
        per_class = {entry.state_class.name.lower(): entry.jobs for entry in classes}
        store.record_purge(actor=actor, summary=actors.purge_summary(report.jobs, per_class), now=clock.now())
    return report
