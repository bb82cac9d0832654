"""A job's past and its neighbours: the transition log, and the dependency edges still gating.

Both read by the job's id and answer for any id: an unknown or purged job has no history and no
edges (never an error). Costs: the log is one read of the transition table's ``(job, ordinal)``
unique index; the edges two reads of the dependency table's ``(parent, child)`` unique index and
its ``child`` index.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import BooleanField, ExpressionWrapper, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Substr

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
    #: Whether the entry recorded a failure (it carries failure detail), known even when
    #: :func:`transition_log` was asked not to read the detail itself.
    failed: bool = False


def job_history(job_id: uuid.UUID) -> list[HistoryEntry]:
    """The job's transition log, oldest first (by ordinal).

    Empty for an unknown or purged job, and while ``HISTORY`` is ``OFF``: the log is then not
    kept, and what an earlier setting left of it would be a misleading partial record.
    """
    require_uuid("job_id", job_id)
    if get_settings().history is HistoryPolicy.OFF:
        return []
    return transition_log(job_id)


def transition_log(job_id: uuid.UUID, *, failure_detail: bool = True) -> list[HistoryEntry]:
    """The job's transition log as stored, oldest first, whatever ``HISTORY`` says now (the job
    page shows what an earlier setting recorded, and says that recording is off).

    With ``failure_detail=False`` the detail is never read (a viewer without the sensitive
    permission): each entry's ``failure_detail`` is None and ``failed`` still says which failed.
    """
    require_uuid("job_id", job_id)
    columns = ["ordinal", "state", "attempt", "actor", "recorded_at", "failed"]
    if failure_detail:
        columns.append("failure_detail")
    rows = (
        JobTransition.objects.using(jobs_database())
        .filter(job__job_id=job_id)
        .annotate(failed=ExpressionWrapper(Q(failure_detail__isnull=False), output_field=BooleanField()))
        .order_by("ordinal")
        .values(*columns)
    )
    return [
        HistoryEntry(
            ordinal=row["ordinal"],
            state=JobState(row["state"]),
            attempt=row["attempt"],
            actor=row["actor"],
            recorded_at=row["recorded_at"],
            failure_detail=row.get("failure_detail"),
            failed=bool(row["failed"]),
        )
        for row in rows
    ]


def transition_logs(sequences: Sequence[int]) -> dict[int, list[HistoryEntry]]:
    """The transition logs of these jobs (by ``sequence``), each oldest first, failure detail
    included: a query per 500 jobs, never one per job."""
    logs: dict[int, list[HistoryEntry]] = defaultdict(list)
    columns = ("job_id", "ordinal", "state", "attempt", "actor", "recorded_at", "failure_detail")
    for chunk in chunks(sequences):
        rows = JobTransition.objects.using(jobs_database()).filter(job_id__in=chunk)
        for job, ordinal, state, attempt, actor, recorded_at, detail in rows.order_by(
            "job_id", "ordinal"
        ).values_list(*columns):
            logs[job].append(
                HistoryEntry(
                    ordinal=ordinal,
                    state=JobState(state),
                    attempt=attempt,
                    actor=actor,
                    recorded_at=recorded_at,
                    failure_detail=detail,
                    failed=detail is not None,
                )
            )
    return logs


def chunks(values: Sequence[int], size: int = 500) -> Iterator[Sequence[int]]:
    """``values`` in slices of ``size``: an ``IN`` list stays well under every backend's limit."""
    for start in range(0, len(values), size):
        yield values[start : start + size]


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


@dataclass(frozen=True)
class LinkedJob:
    """A job on the other side of a dependency edge, as a job page links it."""

    sequence: int
    job_id: uuid.UUID
    wire_name: str
    state: JobState


def linked_jobs(job_id: uuid.UUID, *, limit: int) -> tuple[list[LinkedJob], list[LinkedJob]]:
    """``(parents, children)`` of the job, like :func:`dependency_edges` (the edges still gating),
    each side at most ``limit`` jobs, by ``sequence``, with what a link to them shows."""
    require_uuid("job_id", job_id)
    edges = JobDependency.objects.using(jobs_database())
    sides = []
    for side, mine in (("parent", "child"), ("child", "parent")):
        rows = edges.filter(**{f"{mine}__job_id": job_id}).order_by(f"{side}_id")
        columns = (f"{side}__sequence", f"{side}__job_id", f"{side}__wire_name", f"{side}__state")
        sides.append(
            [
                LinkedJob(sequence, linked, wire_name, JobState(state))
                for sequence, linked, wire_name, state in rows.values_list(*columns)[:limit]
            ]
        )
    return sides[0], sides[1]


def with_last_failure(jobs: QuerySet[Any], *, detail_chars: int | None) -> QuerySet[Any]:
    """Annotate each job with its newest recorded failure: ``bw_failed_at`` (when), and unless
    ``detail_chars`` is None (a viewer who may not see it), ``bw_failure_head``, the first
    ``detail_chars`` characters of its failure detail.

    Each is a subquery on the transition log's (job, ordinal) index, newest entry first, so a page
    costs one query however many rows it shows; without ``detail_chars`` the detail is never read.
    """
    failures = JobTransition.objects.filter(job_id=OuterRef("pk"), failure_detail__isnull=False).order_by(
        "-ordinal"
    )
    annotated: QuerySet[Any] = jobs.annotate(bw_failed_at=Subquery(failures.values("recorded_at")[:1]))
    if detail_chars is not None:
        head = failures.annotate(head=Substr("failure_detail", 1, detail_chars)).values("head")[:1]
        annotated = annotated.annotate(bw_failure_head=Subquery(head))
    return annotated
