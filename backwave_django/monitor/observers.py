"""Transition observers as operators read them: cursor, lag, dead letters, one entry as an event.

The subscription filter (``Observer.matching_entries``) and the event's fields
(``core.observing.EVENT_FIELDS``) are the ones a claim uses, so what is read here as pending is
what a claim would deliver. Costs: the cursor is one primary-key read;
the lag walks the numbered entries after the cursor through the log's position index (and the
observer's settled deliveries after it); dead letters one read of the observer's dead-letter rows.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from django.db.models import OuterRef, QuerySet, Subquery

from ..core.observing import (
    EVENT_FIELDS,
    ObserverDeadLetterEntry,
    ObserverLag,
    TransitionEvent,
    event_values,
    require_states,
)
from ..core.states import JobState
from ..core.validation import require_count
from ..database import jobs_database
from ..models import JobRecord, JobTransition, Observer, ObserverDeadLetter, ObserverDelivery


def observer_cursor(observer_id: str) -> int:
    """The last position the observer has passed; -1 when unknown or nothing passed yet."""
    cursor = (
        Observer.objects.using(jobs_database())
        .filter(observer_id=observer_id)
        .values_list("cursor", flat=True)
        .first()
    )
    return -1 if cursor is None else int(cursor)


def observer_lag(
    observer_id: str, *, states: Iterable[JobState], wire_name: str | None = None, queue: str | None = None
) -> ObserverLag:
    """The cursor, how many numbered entries after it match the subscription and are not settled,
    and the time of the oldest of them."""
    using = jobs_database()
    observer = Observer(
        observer_id=observer_id,
        cursor=observer_cursor(observer_id),
        states=[int(s) for s in require_states(states)],
        wire_name=wire_name,
        queue=queue,
    )
    settled = list(
        ObserverDelivery.objects.using(using)
        .filter(observer_id=observer_id, position__gt=observer.cursor)
        .exclude(resolution=ObserverDelivery.PENDING)
        .values_list("position", flat=True)
    )
    pending = (
        JobTransition.objects.using(using)
        .filter(observer.matching_entries(), position__gt=observer.cursor)
        .exclude(position__in=settled)
    )
    oldest = pending.order_by("position").values_list("recorded_at", flat=True).first()
    return ObserverLag(observer.cursor, pending.count(), oldest)


def observer_dead_letters(observer_id: str) -> list[ObserverDeadLetterEntry]:
    """The deliveries the observer gave up on, oldest first."""
    rows = ObserverDeadLetter.objects.using(jobs_database()).filter(observer_id=observer_id)
    return [_entry(d) for d in rows.order_by("dead_lettered_at", "position")]


def observer_dead_letter_count(observer_id: str) -> int:
    """How many deliveries the observer gave up on (a count of its dead-letter rows)."""
    return ObserverDeadLetter.objects.using(jobs_database()).filter(observer_id=observer_id).count()


def recent_dead_letters(observer_id: str, *, limit: int) -> list[ObserverDeadLetterEntry]:
    """The observer's newest ``limit`` dead letters, newest first."""
    require_count("limit", limit)
    rows = ObserverDeadLetter.objects.using(jobs_database()).filter(observer_id=observer_id)
    return [_entry(d) for d in rows.order_by("-dead_lettered_at", "-position")[:limit]]


def _entry(d: ObserverDeadLetter) -> ObserverDeadLetterEntry:
    return ObserverDeadLetterEntry(
        position=d.position,
        job_id=d.job_id,
        ordinal=d.ordinal,
        state=JobState(d.state),
        attempt=d.attempt,
        delivery_attempts=d.delivery_attempts,
        dead_lettered_at=d.dead_lettered_at,
    )


def with_job_sequence(letters: QuerySet[Any]) -> QuerySet[Any]:
    """Dead letters (a queryset of them), each annotated with ``job_pk``: the ``sequence`` of its
    job, or None once the job was purged. A probe of the job table's ``job_id`` index per row."""
    job = JobRecord.objects.filter(job_id=OuterRef("job_id")).values("sequence")[:1]
    annotated: QuerySet[Any] = letters.annotate(job_pk=Subquery(job))
    return annotated


def transition_event(job_id: uuid.UUID, ordinal: int) -> TransitionEvent | None:
    """One entry as an observer would receive it (numbered or not), or None."""
    entry = (
        JobTransition.objects.using(jobs_database())
        .filter(job__job_id=job_id, ordinal=ordinal)
        .values(*EVENT_FIELDS)
        .first()
    )
    if entry is None:
        return None
    return TransitionEvent(**event_values(entry))
