"""The values of transition observers: what an observer receives and what the store answers.

An observer reacts, at least once and in log order, to transition-log entries whose resulting
state it subscribed to (docs/observers.md). These are plain frozen values; the store produces
them and the worker's observer pump consumes them.
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .states import JobState


class ObserverDisposition(enum.Enum):
    """How one delivery ended: handled, to be tried again at ``next_attempt_at``, or given up."""

    DELIVERED = "Delivered"
    RETRY = "Retry"
    DEAD_LETTERED = "DeadLettered"


@dataclass(frozen=True, kw_only=True, slots=True)
class TransitionEvent:
    """One recorded transition, as an observer sees it."""

    #: The entry's place in the global delivery order (``JobTransition.position``).
    position: int
    job_id: uuid.UUID
    #: The entry's number within its job's log (from 0).
    ordinal: int
    wire_name: str
    queue: str
    #: The state the job moved to.
    state: JobState
    attempt: int
    recorded_at: datetime
    #: Set on a failed attempt's entry when ``HISTORY`` keeps failure detail.
    failure_detail: str | None
    #: Who caused it: a worker id, ``lease-expiry``, an operator, ``schedule:{id}``, ``enqueue``…
    actor: str


#: The columns of a transition-log entry an observer receives, as the ORM names them from the log
#: (``JobTransition.objects.values(*EVENT_FIELDS)``); :func:`event_values` turns one into a
#: :class:`TransitionEvent`'s fields. The store's claims and the monitor's reads both use them.
EVENT_FIELDS = (
    "position",
    "job__job_id",
    "ordinal",
    "job__wire_name",
    "job__queue",
    "state",
    "attempt",
    "recorded_at",
    "failure_detail",
    "actor",
)


def event_values(entry: dict[str, Any]) -> dict[str, Any]:
    """A log entry read with :data:`EVENT_FIELDS` as the fields of a :class:`TransitionEvent`
    (``position`` -1 while the entry is unnumbered)."""
    return {
        "position": -1 if entry["position"] is None else entry["position"],
        "job_id": entry["job__job_id"],
        "ordinal": entry["ordinal"],
        "wire_name": entry["job__wire_name"],
        "queue": entry["job__queue"],
        "state": JobState(entry["state"]),
        "attempt": entry["attempt"],
        "recorded_at": entry["recorded_at"],
        "failure_detail": entry["failure_detail"],
        "actor": entry["actor"],
    }


@dataclass(frozen=True, kw_only=True, slots=True)
class Delivery(TransitionEvent):
    """A claimed delivery: the event, and which attempt at delivering it this is (from 1)."""

    delivery_attempt: int


@dataclass(frozen=True, slots=True)
class ObserverClaim:
    """What ``store.claim_observer_deliveries`` returns: whether this worker holds the observer's
    lease now, and the deliveries to make, in log order."""

    acquired: bool
    deliveries: tuple[Delivery, ...]


@dataclass(frozen=True, slots=True)
class ObserverLag:
    """How far an observer is behind: its cursor, the matching entries after it, the oldest one's time."""

    cursor: int
    pending: int
    oldest_pending_at: datetime | None


@dataclass(frozen=True, kw_only=True, slots=True)
class ObserverDeadLetterEntry:
    """A delivery an observer gave up on (metadata only; it outlives the job)."""

    position: int
    job_id: uuid.UUID
    ordinal: int
    state: JobState
    attempt: int
    delivery_attempts: int
    dead_lettered_at: datetime


def require_states(states: object, name: str = "states") -> tuple[JobState, ...]:
    """An observer subscription's states: JobState members (or their values), de-duplicated.

    An empty list is allowed (nothing matches); an unknown state is a ``ValueError``.
    """
    if isinstance(states, str | bytes) or not hasattr(states, "__iter__"):
        raise TypeError(f"{name} must be a list of JobState, got {states!r}")
    chosen: list[JobState] = []
    for state in states:
        if isinstance(state, bool):
            raise ValueError(f"{name} names an unknown state: {state!r}")
        try:
            member = JobState(state)
        except ValueError:
            raise ValueError(f"{name} names an unknown state: {state!r}") from None
        if member not in chosen:
            chosen.append(member)
    return tuple(chosen)
