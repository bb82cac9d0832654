"""Read-only snapshots of jobs and schedules, for assertions in users' tests.

Plain frozen values read in a few queries (jobs, then their tags and transition log in bulk), so a
test can hold on to one, advance the clock and compare it with a fresh read. Nothing here writes.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ..core import planner
from ..core.states import CatchUp, JobState
from ..core.tags import Tag, tag_from_pair
from ..database import jobs_database
from ..models import JobRecord, JobTag, JobTransition, RecurringSchedule

#: The columns a :class:`JobSnapshot` is built from, in this order.
_JOB_COLUMNS = (
    "sequence",
    "job_id",
    "wire_name",
    "queue",
    "payload",
    "state",
    "attempt",
    "due_time",
    "enqueued_at",
    "terminal_at",
    "terminal_cause",
    "cancel_requested",
    "output",
    "schedule_id",
    "max_attempts",
    "timeout",
    "progress",
)


@dataclass(frozen=True, kw_only=True)
class TransitionSnapshot:
    """One entry of a job's transition log."""

    ordinal: int
    state: JobState
    attempt: int
    actor: str
    recorded_at: datetime
    failure_detail: str | None


@dataclass(frozen=True, kw_only=True)
class JobSnapshot:
    """A job as stored when it was read: state, attempt, output, failure detail, tags, history."""

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


@dataclass(frozen=True, kw_only=True)
class ScheduleSnapshot:
    """A recurring schedule as stored, with the next tick it will mint."""

    schedule_id: str
    cron: str
    wire_name: str
    payload: Any
    queue: str
    time_zone: str | None
    catch_up: CatchUp
    no_overlap: bool
    declared_in_settings: bool
    #: Ticks up to and including this instant are resolved (minted or skipped).
    cursor: datetime
    #: The first tick after the cursor, or None when the cron never fires again (or is invalid).
    next_tick: datetime | None
    #: The most recent skipped ticks, oldest first.
    skipped_ticks: tuple[datetime, ...]


def _iso(instant: datetime | None) -> str:
    return "-" if instant is None else instant.astimezone(UTC).isoformat()




def read_jobs(filters: dict[str, Any]) -> list[JobSnapshot]:
    """Jobs matching ORM ``filters`` in enqueue order, each with its tags and transition log."""
    using = jobs_database()
    rows = list(
        JobRecord.objects.using(using).filter(**filters).order_by("sequence").values_list(*_JOB_COLUMNS)
    )
    sequences = [row[0] for row in rows]
    tags: dict[int, list[Tag]] = {}
    transitions: dict[int, list[TransitionSnapshot]] = {}
    for chunk in _chunks(sequences, 500):
        for job, key, value in (
            JobTag.objects.using(using).filter(job_id__in=chunk).values_list("job_id", "key", "value")
        ):
            tags.setdefault(job, []).append(tag_from_pair((key, value)))
        for job, ordinal, state, attempt, actor, recorded_at, detail in (
            JobTransition.objects.using(using)
            .filter(job_id__in=chunk)
            .order_by("job_id", "ordinal")
            .values_list("job_id", "ordinal", "state", "attempt", "actor", "recorded_at", "failure_detail")
        ):
            transitions.setdefault(job, []).append(
                TransitionSnapshot(
                    ordinal=ordinal,
                    state=JobState(state),
                    attempt=attempt,
                    actor=actor,
                    recorded_at=recorded_at,
                    failure_detail=detail,
                )
            )
    return [
        JobSnapshot(
            job_id=job_id,
            wire_name=wire_name,
            queue=queue,
            state=JobState(state),
            attempt=attempt,
            due_time=due_time,
            enqueued_at=enqueued_at,
            terminal_at=terminal_at,
            terminal_cause=terminal_cause,
            cancel_requested=cancel_requested,
            payload=payload,
            output=output,
            schedule_id=schedule_id,
            max_attempts=max_attempts,
            timeout=timeout,
            progress=progress,
            tags=tuple(sorted(tags.get(sequence, ()), key=_tag_order)),
            transitions=tuple(transitions.get(sequence, ())),
        )
        for (
            sequence,
            job_id,
            wire_name,
            queue,
            payload,
            state,
            attempt,
            due_time,
            enqueued_at,
            terminal_at,
            terminal_cause,
            cancel_requested,
            output,
            schedule_id,
            max_attempts,
            timeout,
            progress,
        ) in rows
    ]


def read_schedules() -> list[ScheduleSnapshot]:
    """Every recurring schedule, by id."""
    snapshots = []
    for row in RecurringSchedule.objects.using(jobs_database()).order_by("schedule_id"):
        # A poisoned schedule (its error set) mints nothing: no next tick; the store logs why.
        next_tick, _ = planner.next_due(row.cron, row.time_zone, row.cursor)
        snapshots.append(
            ScheduleSnapshot(
                schedule_id=row.schedule_id,
                cron=row.cron,
                wire_name=row.wire_name,
                payload=row.payload,
                queue=row.queue,
                time_zone=row.time_zone,
                catch_up=CatchUp(row.catch_up),
                no_overlap=row.no_overlap,
                declared_in_settings=row.declared_in_settings,
                cursor=row.cursor,
                next_tick=next_tick,
                skipped_ticks=tuple(datetime.fromisoformat(t) for t in row.skipped_ticks or ()),
            )
        )
    return snapshots


def _tag_order(tag: Tag) -> tuple[str, str]:
    return ("", tag) if isinstance(tag, str) else tag


def _chunks(values: Sequence[int], size: int) -> Iterable[Sequence[int]]:
    for start in range(0, len(values), size):
        yield values[start : start + size]
