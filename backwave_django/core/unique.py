"""Unique jobs: what makes two enqueues "the same job", and for how long.

``Unique(keys=…, period=…, states=…)`` is what application code passes to ``.using(unique=…)``;
the client turns it, with the call's arguments, into a :class:`UniqueKey` that the store checks
under a lock. Identity is the wire name plus the chosen arguments' values (or the whole payload),
as a digest; the queue is not part of it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from .states import LIVE_STATES, JobState

#: Priority bounds (inclusive): higher runs first within a queue.
MIN_PRIORITY = -100
MAX_PRIORITY = 100


def require_priority(value: object, name: str = "priority") -> int:
    """A priority: an int from ``MIN_PRIORITY`` to ``MAX_PRIORITY`` (not a bool)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int from {MIN_PRIORITY} to {MAX_PRIORITY}, got {value!r}")
    if not MIN_PRIORITY <= value <= MAX_PRIORITY:
        raise ValueError(f"{name} must be from {MIN_PRIORITY} to {MAX_PRIORITY}, got {value!r}")
    return value


def _states(states: Iterable[Any] | None) -> frozenset[JobState]:
    if states is None:
        return LIVE_STATES
    if isinstance(states, str | bytes) or not isinstance(states, Iterable):
        raise TypeError(f"Unique(states=...) must be an iterable of JobState, got {states!r}")
    chosen = []
    for state in states:
        try:
            chosen.append(JobState(state))
        except ValueError:
            raise ValueError(f"Unique(states=...) names an unknown state: {state!r}") from None
    if not chosen:
        raise ValueError("Unique(states=...) must name at least one state")
    return frozenset(chosen)


@dataclass(frozen=True)
class Unique:
    """Make an enqueue a no-op (``DUPLICATE``) while a conflicting job exists.

    ``keys``: argument names whose values define identity (None: the whole payload).
    ``period``: only jobs enqueued within it conflict (None: forever).
    ``states``: only jobs in these states conflict (default: Scheduled, Awaiting Parent, Leased).
    """

    keys: Sequence[str] | None = None
    period: timedelta | None = None
    states: frozenset[JobState] = field(default=LIVE_STATES)

    def __init__(
        self,
        keys: Sequence[str] | None = None,
        period: timedelta | None = None,
        states: Iterable[JobState] | None = None,
    ) -> None:
        if keys is not None:
            if isinstance(keys, str | bytes) or not isinstance(keys, Iterable):
                raise TypeError(f"Unique(keys=...) must be a list of argument names, got {keys!r}")
            keys = tuple(keys)
            for key in keys:
                if not isinstance(key, str) or not key:
                    raise TypeError(f"Unique(keys=...) must hold argument names, got {key!r}")
        if period is not None:
            if not isinstance(period, timedelta):
                raise TypeError(f"Unique(period=...) must be a timedelta, got {period!r}")
            if period <= timedelta(0):
                raise ValueError(f"Unique(period=...) must be positive, got {period}")
        object.__setattr__(self, "keys", keys)
        object.__setattr__(self, "period", period)
        object.__setattr__(self, "states", _states(states))


@dataclass(frozen=True)
class UniqueKey:
    """A unique job's identity as the store checks it: the digest, and which jobs conflict."""

    key: str
    period: timedelta | None = None
    states: frozenset[JobState] = LIVE_STATES

    def __post_init__(self) -> None:
        if not isinstance(self.key, str) or not 1 <= len(self.key) <= 64:
            raise ValueError(f"UniqueKey.key must be a string of 1 to 64 characters, got {self.key!r}")
        object.__setattr__(self, "states", _states(self.states))


def unique_digest(wire_name: str, identity: Any) -> str:
    """The stored key: a SHA-256 of the wire name and the identifying values, as canonical JSON."""
    text = json.dumps([wire_name, identity], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()
