"""Retry policy: how many attempts a job gets and how long to wait between them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from .validation import require_aware

#: A list of seconds (or timedeltas; the last entry repeats), or ``attempt -> seconds | timedelta``.
Backoff = Sequence[float | int | timedelta] | Callable[[int], float | int | timedelta]

MAX_ATTEMPT_CEILING = 1000
MAX_BACKOFF_INTERVALS = 20
DEFAULT_MAX_ATTEMPTS = 10
DEFAULT_BACKOFF_CAP_SECONDS = 300


def default_backoff(attempt: int) -> timedelta:
    """``min(2 ** attempt, 300)`` seconds, ``attempt`` being the one that just failed."""
    if attempt >= 9:  # 2**9 = 512 > 300; avoids building huge integers for large attempts
        return timedelta(seconds=DEFAULT_BACKOFF_CAP_SECONDS)
    return timedelta(seconds=min(2**attempt, DEFAULT_BACKOFF_CAP_SECONDS))


def _as_interval(value: object, what: str) -> timedelta:
    if isinstance(value, bool) or not isinstance(value, int | float | timedelta):
        raise TypeError(f"{what} must be seconds (int or float) or a timedelta, got {value!r}")
    interval = value if isinstance(value, timedelta) else timedelta(seconds=value)
    if interval < timedelta(0):
        raise ValueError("A backoff interval cannot be negative.")
    return interval


@dataclass(frozen=True, kw_only=True)
class RetryPolicy:
    """``max_attempts`` executions at most; the ``max_attempts``-th failure dead-letters."""

    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    backoff: Backoff | None = field(default=None)

    def __post_init__(self) -> None:
        if isinstance(self.max_attempts, bool) or not isinstance(self.max_attempts, int):
            raise TypeError(f"max_attempts must be an int, got {self.max_attempts!r}")
        if self.max_attempts < 1:
            raise ValueError("A retry policy must allow at least one attempt.")
        if self.max_attempts > MAX_ATTEMPT_CEILING:
            raise ValueError(f"A retry policy allows at most {MAX_ATTEMPT_CEILING} attempts.")
        backoff = self.backoff
        if backoff is None or callable(backoff):
            return
        if isinstance(backoff, str | bytes) or not isinstance(backoff, Sequence):
            raise TypeError(f"backoff must be a list of seconds or a callable, got {backoff!r}")
        if not backoff:
            raise ValueError("A backoff list must declare at least one interval.")
        if len(backoff) > MAX_BACKOFF_INTERVALS:
            raise ValueError(
                f"A backoff list allows at most {MAX_BACKOFF_INTERVALS} intervals; got {len(backoff)}."
            )
        object.__setattr__(self, "backoff", tuple(_as_interval(v, "backoff entry") for v in backoff))

    def delay(self, failed_attempt: int) -> timedelta:
        """The wait after ``failed_attempt`` (1-based) failed."""
        backoff = self.backoff
        if backoff is None:
            return default_backoff(failed_attempt)
        if callable(backoff):
            return _as_interval(backoff(failed_attempt), "backoff(attempt)")
        intervals: Sequence[timedelta] = backoff  # type: ignore[assignment]  # normalised in __post_init__
        return intervals[min(max(failed_attempt, 1), len(intervals)) - 1]

    def next_attempt_at(self, failed_attempt: int, now: datetime) -> datetime | None:
        """When to run again after ``failed_attempt`` failed, or ``None`` to dead-letter."""
        require_aware("now", now)
        if failed_attempt >= self.max_attempts:
            return None
        return now + self.delay(failed_attempt)

    @property
    def stored_backoff(self) -> list[float] | None:
        """The backoff as a job row stores it: a list of seconds, or None (the settings' backoff,
        or a callable, which only the ``@job`` that declares it can apply)."""
        backoff = self.backoff
        if backoff is None or callable(backoff):
            return None
        return [interval.total_seconds() for interval in backoff]  # type: ignore[union-attr]


def job_retry_policy(
    max_attempts: int | None, backoff: Sequence[float] | None, default: RetryPolicy
) -> RetryPolicy:
    """The retry policy of one job, from what its row stores: its own ``max_attempts`` and
    ``backoff`` where set, the ``default`` (the settings' ``RETRY``, or a ``@job``'s callable
    backoff) where not. The one way every retry decision works out a job's policy."""
    if max_attempts is None and backoff is None:
        return default
    ceiling = default.max_attempts if max_attempts is None else max_attempts
    policy = RetryPolicy(
        max_attempts=min(ceiling, MAX_ATTEMPT_CEILING),
        backoff=default.backoff if backoff is None else list(backoff),
    )
    # A stored ceiling may have grown past what a declaration allows (every snooze and graceful
    # release gives an attempt back): it is honoured as stored.
    object.__setattr__(policy, "max_attempts", ceiling)
    return policy


def ceiling_given_back(max_attempts: int | None, default: RetryPolicy) -> int:
    """A job's ceiling after an attempt is given back (a snooze, a graceful release): one higher,
    so the attempt that was cut short or put off does not count."""
    return (default.max_attempts if max_attempts is None else max_attempts) + 1


def require_max_attempts(value: object, name: str = "max_attempts") -> int:
    """An attempt ceiling: an int from 1 to ``MAX_ATTEMPT_CEILING``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {value!r}")
    if not 1 <= value <= MAX_ATTEMPT_CEILING:
        raise ValueError(f"{name} must be between 1 and {MAX_ATTEMPT_CEILING}, got {value!r}")
    return value


def require_backoff_list(value: object, name: str = "backoff") -> list[float]:
    """A stored backoff: a list of seconds or timedeltas (>= 0, at most ``MAX_BACKOFF_INTERVALS``)."""
    if callable(value):
        raise TypeError(
            f"{name} given per enqueue must be a list of seconds; a callable backoff belongs on @job(...)"
        )
    stored = RetryPolicy(backoff=value).stored_backoff  # type: ignore[arg-type]
    assert stored is not None
    return stored
