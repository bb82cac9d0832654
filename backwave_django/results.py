"""Reading a job back: its state and output, and waiting for it to end.

``get_job(job_id)`` returns a :class:`JobSnapshot` (or None); ``wait_for`` and ``await_job`` return
one once the job is terminal, polling with a growing interval (20 ms up to half a second), and
raise ``TimeoutError`` when ``timeout`` passes first. These only read; a job is not run faster by
being waited for.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from asgiref.sync import sync_to_async

from .core.states import JobState
from .core.tags import Tag, tag_from_pair
from .core.validation import require_uuid
from .database import jobs_database

#: The first and the longest pause between two reads while waiting.
FIRST_POLL_SECONDS = 0.02
MAX_POLL_SECONDS = 0.5


@dataclass(frozen=True, kw_only=True)
class JobSnapshot:
    """A job as it was read: where it stands and, once it succeeded, what it returned."""

    job_id: uuid.UUID
    wire_name: str
    queue: str
    state: JobState
    attempt: int
    due_time: datetime
    priority: int
    terminal_at: datetime | None
    terminal_cause: str | None
    #: The handler's return value; only set once the job Succeeded.
    output: Any
    #: The last progress its handler recorded (``{"done", "total", "note", "at"}``), or None.
    progress: Any
    #: Labels as strings, keyed tags as ``(key, value)``.
    tags: tuple[Tag, ...]

    @property
    def is_terminal(self) -> bool:
        return self.state.is_terminal


def get_job(job_id: uuid.UUID) -> JobSnapshot | None:
    """The job with this id as it is now, or None (never enqueued, not committed yet, or purged)."""
    from .models import JobRecord, JobTag

    require_uuid("job_id", job_id)
    using = jobs_database()
    row = (
        JobRecord.objects.using(using)
        .filter(job_id=job_id)
        .values_list(
            "sequence",
            "wire_name",
            "queue",
            "state",
            "attempt",
            "due_time",
            "priority",
            "terminal_at",
            "terminal_cause",
            "output",
            "progress",
        )
        .first()
    )
    if row is None:
        return None
    sequence, wire_name, queue, state, attempt, due_time, priority, terminal_at, cause, output, progress = row
    tags = JobTag.objects.using(using).filter(job_id=sequence).order_by("id").values_list("key", "value")
    job_state = JobState(state)
    return JobSnapshot(
        job_id=job_id,
        wire_name=wire_name,
        queue=queue,
        state=job_state,
        attempt=attempt,
        due_time=due_time,
        priority=priority,
        terminal_at=terminal_at,
        terminal_cause=cause,
        output=output if job_state == JobState.SUCCEEDED else None,
        progress=progress,
        tags=tuple(tag_from_pair(pair) for pair in tags),
    )


def wait_for(job_id: uuid.UUID, *, timeout: timedelta | float) -> JobSnapshot:
    """Block until the job is terminal and return it; ``TimeoutError`` after ``timeout``.

    A job that does not exist yet (its enqueue not committed) is waited for like any other.
    Don't call it inside the transaction that enqueued the job: the workers cannot see the job
    before that transaction commits.
    """
    require_uuid("job_id", job_id)
    deadline = time.monotonic() + _seconds(timeout)
    pause = FIRST_POLL_SECONDS
    while True:
        snapshot = get_job(job_id)
        if snapshot is not None and snapshot.is_terminal:
            return snapshot
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(_not_done(job_id, snapshot, timeout))
        time.sleep(min(pause, left))
        pause = min(pause * 1.5, MAX_POLL_SECONDS)


async def await_job(job_id: uuid.UUID, *, timeout: timedelta | float) -> JobSnapshot:  # noqa: ASYNC109
    """:func:`wait_for` for ``async def`` code: awaits, never blocks the event loop."""
    require_uuid("job_id", job_id)
    deadline = time.monotonic() + _seconds(timeout)
    pause = FIRST_POLL_SECONDS
    read = sync_to_async(get_job, thread_sensitive=True)
    while True:
        snapshot = await read(job_id)
        if snapshot is not None and snapshot.is_terminal:
            return snapshot
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(_not_done(job_id, snapshot, timeout))
        await asyncio.sleep(min(pause, left))
        pause = min(pause * 1.5, MAX_POLL_SECONDS)


def _seconds(timeout: object) -> float:
    if isinstance(timeout, bool) or not isinstance(timeout, int | float | timedelta):
        raise TypeError(f"timeout must be a timedelta or seconds, got {timeout!r}")
    seconds = timeout.total_seconds() if isinstance(timeout, timedelta) else float(timeout)
    if seconds < 0 or seconds != seconds:
        raise ValueError(f"timeout must not be negative, got {timeout!r}")
    return seconds


def _not_done(job_id: uuid.UUID, snapshot: JobSnapshot | None, timeout: object) -> str:
    where = (
        "does not exist" if snapshot is None else f"is {snapshot.state.label} (attempt {snapshot.attempt})"
    )
    return f"job {job_id} {where} after waiting {timeout}"
