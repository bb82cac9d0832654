"""Errors a user can hit; each carries a machine-readable attribute and a message that says what to do."""

from __future__ import annotations

import uuid
from datetime import timedelta

from .core.states import EnqueueResult, WorkflowEnqueueResult


class EnqueueError(Exception):
    """An enqueue the store refused; ``result`` says which rule it broke."""

    def __init__(self, result: EnqueueResult, message: str) -> None:
        super().__init__(message)
        self.result = result


class WorkflowError(Exception):
    """A workflow the store refused (nothing of it was stored); ``result`` says which rule it broke."""

    def __init__(self, result: WorkflowEnqueueResult, message: str) -> None:
        super().__init__(message)
        self.result = result


class OutputTooLarge(ValueError):
    """A Success output above ``MAX_OUTPUT_BYTES``: outputs are rejected, never truncated."""

    def __init__(self, job_id: uuid.UUID, actual_bytes: int, max_output_bytes: int) -> None:
        super().__init__(
            f"output of job {job_id} is {actual_bytes:,} bytes; MAX_OUTPUT_BYTES is "
            f"{max_output_bytes:,} — store the data elsewhere and return a reference instead"
        )
        self.job_id = job_id
        self.actual_bytes = actual_bytes
        self.max_output_bytes = max_output_bytes


# --- What a handler raises to decide its own outcome ------------------------------------------------


#: The longest delay a ``Snooze`` takes: a hundred years. Anything longer is a mistake, and far
#: enough beyond it the due time no longer fits a ``datetime``.
MAX_SNOOZE_DELAY = timedelta(days=36_500)


class Snooze(Exception):
    """Raise from a handler to run the job again after ``delay``, without spending an attempt.

    The attempt ends Scheduled at ``now + delay``; it does not count toward ``max_attempts`` and
    records no failure detail. ``delay`` is a ``timedelta`` or seconds, from 0 to
    ``MAX_SNOOZE_DELAY``; anything else (negative, NaN, infinite) is refused here, when raised.
    """

    def __init__(self, delay: timedelta | float | int) -> None:
        if isinstance(delay, bool) or not isinstance(delay, int | float | timedelta):
            raise TypeError(f"Snooze delay must be a timedelta or seconds, got {delay!r}")
        seconds = delay.total_seconds() if isinstance(delay, timedelta) else delay
        # ``not 0 <= seconds`` is also true of NaN; infinity is past the maximum.
        if not 0 <= seconds <= MAX_SNOOZE_DELAY.total_seconds():
            raise ValueError(
                f"Snooze delay must be a timedelta or a finite number of seconds from 0 to "
                f"{MAX_SNOOZE_DELAY.total_seconds():,.0f} ({MAX_SNOOZE_DELAY.days:,} days), got {delay!r}"
            )
        interval = delay if isinstance(delay, timedelta) else timedelta(seconds=delay)
        super().__init__(f"snoozed for {interval.total_seconds():g}s")
        self.delay = interval


class Discard(Exception):
    """Raise from a handler to dead-letter the job at once, whatever attempts remain.

    ``reason`` becomes the job's ``terminal_cause``; the failure detail is recorded as for any
    failure. Use it for errors that no retry can fix (a deleted record, a refused card).
    """

    def __init__(self, reason: str) -> None:
        if not isinstance(reason, str) or not reason:
            raise ValueError(f"Discard needs a non-empty reason, got {reason!r}")
        super().__init__(reason)
        self.reason = reason


class JobTimeout(BaseException):
    """What a handler sees when it runs past its ``timeout``.

    A ``BaseException``, so that ``except Exception`` in the handler does not swallow it. The
    attempt is recorded as a failure (retried by the job's policy) whose detail starts with
    ``backwave_django.JobTimeout: timed out after {seconds}s``.
    """


# Public under the package's own name, so recorded failure details read ``backwave_django.JobTimeout``.
for _public in (EnqueueError, WorkflowError, OutputTooLarge, Snooze, Discard, JobTimeout):
    _public.__module__ = "backwave_django"
del _public
