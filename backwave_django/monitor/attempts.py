"""A job's attempts, read off its transition log: one row per time a worker ran it.

Every claim writes a Leased entry (the attempt's number, the worker as its actor) and whatever
ends the attempt writes the next entry: the worker's outcome (Succeeded; Scheduled for a retry
or a snooze; Dead-Lettered, Cancelled or Quarantined), or the lease sweep's (``lease-expiry``)
when the worker never answered. So an attempt is a Leased entry and the entry after it, and its
outcome follows from that entry's state, its actor and whether it recorded a failure. The log may
be trimmed (``MAX_TRANSITIONS_PER_JOB``) or off (``HISTORY``): then the attempts shown are the ones
still recorded. Costs: one read of the transition table's ``(job, ordinal)`` index
(:func:`.history.transition_log`).
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Exists, OuterRef, QuerySet

from ..core import actors
from ..core.states import JobState
from ..core.validation import require_uuid
from ..database import jobs_database
from ..models import JobTransition
from .history import HistoryEntry, transition_log

#: The attribute :func:`with_lease_expiry` sets on each job of a queryset.
LEASE_EXPIRED_ATTRIBUTE = "bw_lease_expired"


class AttemptOutcome(enum.Enum):
    """How an attempt ended, in the words the console shows."""

    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED_WILL_RETRY = "failed, retry scheduled"
    FAILED = "failed, dead-lettered"
    LEASE_EXPIRED_WILL_RETRY = "lease expired, retry scheduled"
    LEASE_EXPIRED = "lease expired, dead-lettered"
    #: Back to Scheduled without a recorded failure: a snooze, a worker shutting down, or a
    #: failure logged while ``HISTORY`` kept no failure detail.
    RESCHEDULED = "back to Scheduled"
    CANCELLED = "cancelled"
    QUARANTINED = "quarantined"
    #: The log holds no entry that ended it (trimmed, or written while recording was off).
    NOT_RECORDED = "end not recorded"

    @property
    def failed(self) -> bool:
        """Whether the attempt failed (the console marks these)."""
        return self in _FAILED


_FAILED = frozenset(
    {
        AttemptOutcome.FAILED_WILL_RETRY,
        AttemptOutcome.FAILED,
        AttemptOutcome.LEASE_EXPIRED_WILL_RETRY,
        AttemptOutcome.LEASE_EXPIRED,
    }
)


@dataclass(frozen=True, kw_only=True)
class Attempt:
    """One attempt: its number, the worker that ran it, when it started and ended, how it ended.

    ``failure_detail`` is the failure the attempt recorded (``{type}: {message}\\n{traceback}``),
    sensitive: None unless it was read (see :func:`attempts_from_log`).
    """

    number: int
    worker: str
    started_at: datetime
    ended_at: datetime | None
    outcome: AttemptOutcome
    failure_detail: str | None = None

    @property
    def failed(self) -> bool:
        return self.outcome.failed

    @property
    def duration(self) -> timedelta | None:
        """How long it ran; None while running or when its end was not recorded."""
        return None if self.ended_at is None else self.ended_at - self.started_at


def _outcome(end: HistoryEntry) -> AttemptOutcome:
    expired = end.actor == actors.LEASE_EXPIRY
    if end.state is JobState.SUCCEEDED:
        return AttemptOutcome.SUCCEEDED
    if end.state is JobState.SCHEDULED:
        if expired:
            return AttemptOutcome.LEASE_EXPIRED_WILL_RETRY
        return AttemptOutcome.FAILED_WILL_RETRY if end.failed else AttemptOutcome.RESCHEDULED
    if end.state is JobState.DEAD_LETTERED:
        return AttemptOutcome.LEASE_EXPIRED if expired else AttemptOutcome.FAILED
    if end.state is JobState.CANCELLED:
        return AttemptOutcome.CANCELLED
    if end.state is JobState.QUARANTINED:
        return AttemptOutcome.QUARANTINED
    return AttemptOutcome.NOT_RECORDED


def attempts_from_log(entries: Sequence[HistoryEntry]) -> list[Attempt]:
    """The attempts a transition log (oldest first) records, oldest first."""
    attempts: list[Attempt] = []
    start: HistoryEntry | None = None
    for entry in entries:
        if start is not None:
            ended = entry.state is not JobState.LEASED
            attempts.append(
                Attempt(
                    number=start.attempt,
                    worker=start.actor,
                    started_at=start.recorded_at,
                    ended_at=entry.recorded_at if ended else None,
                    outcome=_outcome(entry) if ended else AttemptOutcome.NOT_RECORDED,
                    failure_detail=entry.failure_detail if ended else None,
                )
            )
            start = None
        if entry.state is JobState.LEASED:
            start = entry
    if start is not None:
        attempts.append(
            Attempt(
                number=start.attempt,
                worker=start.actor,
                started_at=start.recorded_at,
                ended_at=None,
                outcome=AttemptOutcome.RUNNING,
            )
        )
    return attempts


def job_attempts(job_id: uuid.UUID, *, failure_detail: bool = True) -> list[Attempt]:
    """The job's recorded attempts, oldest first; each failure's detail only when
    ``failure_detail`` (it is sensitive). Empty for an unknown or purged job."""
    return attempts_from_log(transition_log(job_id, failure_detail=failure_detail))


# --- Dead-lettered by the lease sweep ------------------------------------------------------------


def lease_expired_condition(job: str = "pk") -> Exists:
    """The job (``OuterRef(job)``) was dead-lettered by the lease sweep: its log holds a
    Dead-Lettered entry whose actor is the sweep's (``lease-expiry``). A probe of the transition
    table's ``(job, ordinal)`` index; never true for a job whose log was not kept (``HISTORY``)."""
    entries = JobTransition.objects.filter(
        job_id=OuterRef(job), state=JobState.DEAD_LETTERED, actor=actors.LEASE_EXPIRY
    )
    return Exists(entries)


def with_lease_expiry(jobs: QuerySet[Any]) -> QuerySet[Any]:
    """``jobs``, each annotated with ``bw_lease_expired`` (:func:`lease_expired_condition`): a page
    of jobs learns which of them the lease sweep dead-lettered in the page's one query."""
    annotated: QuerySet[Any] = jobs.annotate(**{LEASE_EXPIRED_ATTRIBUTE: lease_expired_condition()})
    return annotated


def dead_lettered_by_lease_expiry(job_id: uuid.UUID) -> bool:
    """Whether the lease sweep dead-lettered the job with this id (:func:`lease_expired_condition`),
    in one read; False for an unknown or purged job."""
    require_uuid("job_id", job_id)
    entries = JobTransition.objects.using(jobs_database()).filter(
        job__job_id=job_id, state=JobState.DEAD_LETTERED, actor=actors.LEASE_EXPIRY
    )
    return entries.exists()
