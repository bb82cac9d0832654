"""The recurring schedules as operators read them: each definition, its next tick and its error.

One query over the schedule table. The next tick and the error come from
``core.planner.next_due``, the rule the console's schedules page uses too, so the console, the
CLI and the testing harness agree on when a schedule fires next and why one cannot.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..core import planner
from ..core.states import CatchUp
from ..database import jobs_database
from ..models import RecurringSchedule


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
