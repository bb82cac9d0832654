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

from . import monitor
from .core.states import JobState
from .core.tags import Tag
from .core.validation import require_uuid

#: The first and the longest pause between two reads while waiting.
FIRST_POLL_SECONDS = 0.02
MAX_POLL_SECONDS = 0.5


@dataclass(frozen=True, kw_only=True)
class JobSnapshot:
    """A job as it was read: where it stands and, once it succeeded, what it returned.

    The documented subset of :class:`backwave_django.monitor.JobSnapshot` (the one read model of a
    job, which operators' code reads in full) that user code waits on: docs/jobs.md.
    """

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
    #: Labels as strings, keyed tags as ``(key, value)``, in code-point order.
    tags: tuple[Tag, ...]

    @property
    def is_terminal(self) -> bool:
        return self.state.is_terminal

    @classmethod
    def of(cls, job: monitor.JobSnapshot) -> JobSnapshot:
        """The subset of a job the monitor read with ``content=True``."""
        return cls(
            job_id=job.job_id,
            wire_name=job.wire_name,
            queue=job.queue,
            state=job.state,
            attempt=job.attempt,
            due_time=job.due_time,
            priority=job.priority,
            terminal_at=job.terminal_at,
            terminal_cause=job.terminal_cause,
            output=job.output if job.state == JobState.SUCCEEDED else None,
            progress=job.progress,
            tags=job.labels_and_tags,
        )


def get_job(job_id: uuid.UUID) -> JobSnapshot | None:
    """The job with this id as it is now, or None (never enqueued, not committed yet, or purged)."""
    require_uuid("job_id", job_id)
    found = monitor.get_job(job_id, content=True)
    return None if found is None else JobSnapshot.of(found)


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
