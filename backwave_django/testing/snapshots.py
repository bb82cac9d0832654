"""Read-only snapshots of jobs and schedules, for assertions in users' tests.

Plain frozen values read through the monitor (``monitor.find_jobs``, ``monitor.list_schedules``:
jobs, then their tags and transition logs in bulk), so a test can hold on to one, advance the
clock and compare it with a fresh read. Nothing here writes, and nothing here queries by itself.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from .. import monitor
from ..core.states import JobState
from ..core.tags import Tag
from ..monitor import HistoryEntry as TransitionSnapshot, ScheduleSnapshot

__all__ = ["JobSnapshot", "ScheduleSnapshot", "TransitionSnapshot", "read_jobs", "read_schedules"]


@dataclass(frozen=True, kw_only=True)
class JobSnapshot:
    """A job as stored when it was read: state, attempt, output, failure detail, tags, history.

    The assertions' view of :class:`backwave_django.monitor.JobSnapshot`, the one read model of a
    job, with its content and its transition log, and its tags as users write them.
    """

    job_id: uuid.UUID
    wire_name: str
    queue: str
    state: JobState
    attempt: int
    due_time: datetime
    enqueued_at: datetime
    terminal_at: datetime | None
    terminal_cause: str | None
    cancel_requested: bool
    payload: Any
    output: Any
    schedule_id: str | None
    #: The job's stored retry ceiling (raised by one per snooze) and time limit in seconds.
    max_attempts: int | None = None
    timeout: float | None = None
    #: The last progress its handler recorded (``{"done", "total", "note", "at"}``), or None.
    progress: Any = None
    #: Labels as strings, keyed tags as ``(key, value)``, sorted.
    tags: tuple[Tag, ...]
    #: The transition log, oldest first (empty when ``HISTORY`` is off).
    transitions: tuple[TransitionSnapshot, ...]

    @classmethod
    def of(cls, job: monitor.JobSnapshot) -> JobSnapshot:
        """The view of a job the monitor read with ``content=True, history=True``."""
        return cls(
            job_id=job.job_id,
            wire_name=job.wire_name,
            queue=job.queue,
            state=job.state,
            attempt=job.attempt,
            due_time=job.due_time,
            enqueued_at=job.enqueued_at,
            terminal_at=job.terminal_at,
            terminal_cause=job.terminal_cause,
            cancel_requested=job.cancel_requested,
            payload=job.payload,
            output=job.output,
            schedule_id=job.schedule_id,
            max_attempts=job.max_attempts,
            timeout=job.timeout,
            progress=job.progress,
            tags=job.labels_and_tags,
            transitions=job.transitions,
        )

    @property
    def args(self) -> list[Any] | None:
        """The positional arguments of a job enqueued through ``@job`` (None for another payload shape)."""
        args = self._call_shape().get("args")
        return args if isinstance(args, list) else None

    @property
    def kwargs(self) -> dict[str, Any] | None:
        """The keyword arguments of a job enqueued through ``@job`` (None for another payload shape)."""
        kwargs = self._call_shape().get("kwargs")
        return kwargs if isinstance(kwargs, dict) else None

    def _call_shape(self) -> dict[str, Any]:
        payload = self.payload
        return payload if isinstance(payload, dict) and set(payload) == {"args", "kwargs"} else {}

    @property
    def failure_details(self) -> tuple[str, ...]:
        """The recorded failure detail of every failed attempt, oldest first."""
        return tuple(t.failure_detail for t in self.transitions if t.failure_detail is not None)

    @property
    def last_failure(self) -> str | None:
        """The failure detail of the latest failed attempt (``{type}: {message}\\n{traceback}``)."""
        details = self.failure_details
        return details[-1] if details else None

    def describe(self) -> str:
        """One line for assertion messages: what was called, where it stands, and when it is due."""
        if self.args is not None and self.kwargs is not None:
            call = f"{self.wire_name}(args={self.args!r}, kwargs={self.kwargs!r})"
        else:
            call = f"{self.wire_name}(payload={self.payload!r})"
        parts = [f"{self.state.label}", f"attempt {self.attempt}", f"queue {self.queue!r}"]
        if self.state.is_terminal:
            parts.append(f"ended {_iso(self.terminal_at)}")
            if self.terminal_cause:
                parts.append(f"cause {self.terminal_cause!r}")
        else:
            parts.append(f"due {_iso(self.due_time)}")
        if self.tags:
            parts.append(f"tags {list(self.tags)!r}")
        return f"{call}: {', '.join(parts)}"

    def __repr__(self) -> str:
        return f"<JobSnapshot {self.wire_name} {self.job_id} {self.state.label} attempt {self.attempt}>"


def _iso(instant: datetime | None) -> str:
    return "-" if instant is None else instant.astimezone(UTC).isoformat()


def read_jobs(
    *,
    job_id: uuid.UUID | None = None,
    wire_name: str | None = None,
    queue: str | None = None,
    states: Iterable[JobState] | None = None,
    schedule_id: str | None = None,
) -> list[JobSnapshot]:
    """Jobs matching every filter given, in enqueue order, each with its tags and transition log."""
    found = monitor.find_jobs(
        job_id=job_id,
        wire_name=wire_name,
        queue=queue,
        states=states,
        schedule_id=schedule_id,
        content=True,
        history=True,
    )
    return [JobSnapshot.of(job) for job in found]


def read_schedules() -> list[ScheduleSnapshot]:
    """Every recurring schedule, by id."""
    return monitor.list_schedules()
