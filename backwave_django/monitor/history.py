"""A job's past and its neighbours: the transition log, and the dependency edges still gating.

Both read by the job's id and answer for any id: an unknown or purged job has no history and no
edges (never an error). Costs: the log is one read of the transition table's ``(job, ordinal)``
unique index; the edges two reads of the dependency table's ``(parent, child)`` unique index and
its ``child`` index.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from ..conf import get_settings
from ..core.states import HistoryPolicy, JobState
from ..core.validation import require_uuid
from ..database import jobs_database
from ..models import JobDependency, JobTransition


@dataclass(frozen=True, kw_only=True)
class HistoryEntry:
    """One entry of a job's transition log: the state it entered, on which attempt, by whom, when.

    ``failure_detail`` (``{type}: {message}\\n{traceback}`` of a failed attempt) is sensitive: the
    console shows it only with ``view_sensitive_jobrecord``.
    """

    ordinal: int
    state: JobState
    attempt: int
    actor: str
    recorded_at: datetime
    failure_detail: str | None


def job_history(job_id: uuid.UUID) -> list[HistoryEntry]:
    """The job's transition log, oldest first (by ordinal).

    Empty for an unknown or purged job, and while ``HISTORY`` is ``OFF``: the log is then not
    kept, and what an earlier setting left of it would be a misleading partial record.
    """
    require_uuid("job_id", job_id)
    if get_settings().history is HistoryPolicy.OFF:
        return []
    rows = (
        JobTransition.objects.using(jobs_database())
        .filter(job__job_id=job_id)
        .order_by("ordinal")
        .values_list("ordinal", "state", "attempt", "actor", "recorded_at", "failure_detail")
    )
    return [
        HistoryEntry(
            ordinal=ordinal,
            state=JobState(state),
            attempt=attempt,
            actor=actor,
            recorded_at=recorded_at,
            failure_detail=detail,
        )
        for ordinal, state, attempt, actor, recorded_at, detail in rows
    ]


def dependency_edges(job_id: uuid.UUID) -> tuple[list[uuid.UUID], list[uuid.UUID]]:
    """``(parents, children)``: the ids of the parents whose edge still gates this job, and of the
    children this job still gates, each sorted by UUID. An edge is deleted as its parent resolves,
    so a job whose parents all ended has no parents here. Both empty for an unknown id."""
    require_uuid("job_id", job_id)
    edges = JobDependency.objects.using(jobs_database())
    parents = edges.filter(child__job_id=job_id).values_list("parent__job_id", flat=True)
    children = edges.filter(parent__job_id=job_id).values_list("child__job_id", flat=True)
    # Sorted here, not by the database: MariaDB's UUID type orders its values in another order.
    return sorted(parents), sorted(children)
