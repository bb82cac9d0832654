"""The recurring schedules as operators read them: each definition, its next tick and its error.

One query over the schedule table. The next tick and the error come from
``core.planner.next_due``, the rule the console's schedules page uses too, so the console, the
CLI and the testing harness agree on when a schedule fires next and why one cannot.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Exists, OuterRef, QuerySet

from ..core import planner
from ..core.states import LIVE_STATES, CatchUp, JobState
from ..database import jobs_database
from ..models import JobRecord, RecurringSchedule


@dataclass(frozen=True, kw_only=True)
class ScheduleSnapshot:
    """A recurring schedule as stored, with ``next_due`` and ``error``: the one read model of a
    schedule (the console, the CLI and the testing harness all read it).

    ``next_due`` is the first zoned tick strictly after ``cursor`` (None when the cron never fires
    again, or when the schedule has an error). ``error`` says why the cron or the zone does not
    resolve on this host (``Invalid cron expression …`` / ``Unresolvable time-zone id …``); such a
    schedule mints nothing until it is fixed, and is listed all the same.
    """

    schedule_id: str
    cron: str
    wire_name: str
    payload: Any
    queue: str
    time_zone: str | None
    catch_up: CatchUp
    no_overlap: bool
    #: Ticks up to and including this instant are resolved (minted or skipped).
    cursor: datetime
    #: The most recent skipped ticks, oldest first.
    skipped_ticks: tuple[datetime, ...]
    declared_in_settings: bool
    #: The policy every minted instance gets (None: the settings' at each mint).
    max_attempts: int | None
    backoff: Any
    timeout: float | None
    next_due: datetime | None
    error: str | None

    @property
    def next_tick(self) -> datetime | None:
        """``next_due`` under the name the testing harness's snapshots gave it."""
        return self.next_due


#: The former name of :class:`ScheduleSnapshot` (deprecated; docs/upgrading.md).
ScheduleRow = ScheduleSnapshot


def list_schedules() -> list[ScheduleSnapshot]:
    """Every recurring schedule, by schedule id."""
    schedules = []
    for row in RecurringSchedule.objects.using(jobs_database()).order_by("schedule_id"):
        next_due, error = planner.next_due(row.cron, row.time_zone, row.cursor)
        schedules.append(
            ScheduleSnapshot(
                schedule_id=row.schedule_id,
                cron=row.cron,
                wire_name=row.wire_name,
                payload=row.payload,
                queue=row.queue,
                time_zone=row.time_zone,
                catch_up=CatchUp(row.catch_up),
                no_overlap=row.no_overlap,
                cursor=row.cursor,
                skipped_ticks=tuple(datetime.fromisoformat(tick) for tick in row.skipped_ticks or ()),
                declared_in_settings=row.declared_in_settings,
                max_attempts=row.max_attempts,
                backoff=row.backoff,
                timeout=row.timeout,
                next_due=next_due,
                error=error,
            )
        )
    return schedules


# --- The console's schedule pages ---------------------------------------------------------------


def schedule_ids() -> list[str]:
    """The id of every stored schedule, by id."""
    rows = RecurringSchedule.objects.using(jobs_database()).order_by("schedule_id")
    return list(rows.values_list("schedule_id", flat=True))


def schedule_row_id(schedule_id: str) -> int | None:
    """The stored schedule's row id (the console's pages name rows by it), or None."""
    rows = RecurringSchedule.objects.using(jobs_database()).filter(schedule_id=schedule_id)
    found: int | None = rows.values_list("pk", flat=True).first()
    return found


def _live_instances(schedule_id: Any) -> QuerySet[JobRecord]:
    live = [int(state) for state in LIVE_STATES]
    return JobRecord.objects.using(jobs_database()).filter(schedule_id=schedule_id, state__in=live)


def has_live_instance(schedule_id: str) -> bool:
    """Whether an instance of the schedule is still live (Scheduled, Awaiting Parent or Leased): the
    fact ``no_overlap`` acts on."""
    return _live_instances(schedule_id).exists()


def with_live_instance(schedules: QuerySet[Any]) -> QuerySet[Any]:
    """``schedules``, each annotated with ``has_live_instance`` (:func:`has_live_instance`), in the
    page's one query."""
    annotated: QuerySet[Any] = schedules.annotate(
        has_live_instance=Exists(_live_instances(OuterRef("schedule_id")))
    )
    return annotated


@dataclass(frozen=True)
class MintedInstance:
    """One job a schedule minted, as its page lists it."""

    sequence: int
    job_id: uuid.UUID
    state: JobState
    attempt: int
    due_time: datetime
    terminal_at: datetime | None


def minted_instances(schedule_id: str, *, limit: int) -> list[MintedInstance]:
    """The schedule's newest ``limit`` instances still stored, newest first."""
    rows = JobRecord.objects.using(jobs_database()).filter(schedule_id=schedule_id).order_by("-sequence")
    columns = ("sequence", "job_id", "state", "attempt", "due_time", "terminal_at")
    return [
        MintedInstance(sequence, job_id, JobState(state), attempt, due_time, terminal_at)
        for sequence, job_id, state, attempt, due_time, terminal_at in rows.values_list(*columns)[:limit]
    ]
