"""Outcomes: applying each attempt's result under its fence, and resolving dependents.

The fence: the job is Leased, ``lease_owner`` and ``attempt`` match and ``lease_expiry > now``;
otherwise ``STALE_LEASE`` and nothing of that report is written. Where an outcome leads (state,
retry instant, cause, cancel flag) is one rule, :func:`~backwave_django.core.outcomes.outcome_effect`,
read by both paths, which the store backend (``backends.store_backend``) picks between:

* the portable path (:class:`PortableOutcomes`, the reference) locks the rows in sequence order
  and writes through the unit of work;
* PostgreSQL's fast path (``store/postgres/outcomes.py``) writes a batch naming each job once with
  one statement, pipelined when it is a transaction of its own.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from ..conf import BackWaveSettings, get_settings
from ..core import actors
from ..core.encoding import json_size
from ..core.limits import PLAIN_LANE
from ..core.outcomes import OutcomeReport, Success, outcome_effect
from ..core.retry import ceiling_given_back
from ..core.states import JobState, OutcomeResult
from ..core.tags import normalize_tags
from ..core.validation import require_aware, require_uuid
from ..database import jobs_database
from ..exceptions import OutputTooLarge
from ..models import JobRecord, QueueSettings
from ._rows import Row, UnitOfWork, cascade, lock_rows
from ._tx import atomic_retrying, hints_sent, notify
from .backends import store_backend
from .limits import free_slots


def report_outcome(report: OutcomeReport, *, now: datetime) -> OutcomeResult:
    """Apply one attempt's outcome if its fence holds; see :func:`report_outcomes`."""
    return report_outcomes([report], now=now)[0]


def report_outcomes(reports: Sequence[OutcomeReport], *, now: datetime) -> list[OutcomeResult]:
    """Apply a batch of outcomes in one transaction, each fenced on its own; results in input order.

    The fence: the job is Leased, ``lease_owner`` and ``attempt`` match and ``lease_expiry > now``;
    otherwise ``STALE_LEASE`` and nothing of that report is written. A Success output above
    ``MAX_OUTPUT_BYTES`` raises ``OutputTooLarge`` before anything in the batch is written.
    """
    reports = list(reports)
    for index, report in enumerate(reports):
        if not isinstance(report, OutcomeReport):
            raise TypeError(f"reports[{index}] must be an OutcomeReport, got {type(report).__name__}")
    require_aware("now", now)
    settings = get_settings()
    for report in reports:
        if isinstance(report.outcome, Success) and report.output is not None:
            size = json_size(report.output)
            if size > settings.max_output_bytes:
                raise OutputTooLarge(report.job_id, size, settings.max_output_bytes)
    if not reports:
        return []
    using = jobs_database()
    return store_backend(using).outcomes.report(using, reports, now, settings)


def job_output(job_id: uuid.UUID) -> Any:
    """The stored output of a job, or None (no such job, or no output); a read."""
    require_uuid("job_id", job_id)
    return (
        JobRecord.objects.using(jobs_database())
        .filter(job_id=job_id)
        .values_list("output", flat=True)
        .first()
    )


# --- The portable path ------------------------------------------------------------------------


class PortableOutcomes:
    """The portable path of ``backends.Outcomes``: :func:`report_portable` in one transaction."""

    def report(
        self, using: str, reports: list[OutcomeReport], now: datetime, settings: BackWaveSettings
    ) -> list[OutcomeResult]:
        return atomic_retrying(using, lambda: report_portable(using, reports, now, settings))


def report_portable(
    using: str, reports: list[OutcomeReport], now: datetime, settings: BackWaveSettings
) -> list[OutcomeResult]:
    results: list[OutcomeResult] = []
    locked = lock_rows(
        JobRecord.objects.using(using).filter(job_id__in={r.job_id for r in reports}).order_by("sequence"),
        extra=("lane",),
    )
    rows = {row.job_id: row for row, _ in locked}
    lanes = {row.sequence: lane for row, (lane,) in locked}
    freed: list[tuple[int, str]] = []
    released: set[str] = set()
    uow = UnitOfWork(settings, now)
    ended: list[tuple[Row, JobState]] = []
    for report in reports:
        row = rows.get(report.job_id)
        if (
            row is None
            or row.state != JobState.LEASED
            or row.lease_owner != report.worker_id
            or row.attempt != report.attempt
            or row.lease_expiry is None
            or row.lease_expiry <= now
        ):
            results.append(OutcomeResult.STALE_LEASE)
            continue
        new_state = _apply(uow, row, report, now)
        released.add(row.queue)
        if lanes[row.sequence] != PLAIN_LANE:
            freed.append((row.sequence, row.queue))
        if new_state.is_terminal:
            ended.append((row, new_state))
        if report.added_tags:
            uow.add_tags(row.sequence, normalize_tags(report.added_tags))
        results.append(OutcomeResult.APPLIED)
    cascade(uow, using, ended)
    uow.flush(using)
    free_slots(using, freed)
    hint_limited(using, released)
    return results


def hint_limited(using: str, queues: set[str]) -> None:
    """Leases of ``queues`` ended: hint those with a concurrency limit, whose idle workers may now
    claim what the limit held (PostgreSQL's REPORT does the same in SQL)."""
    if not queues or not hints_sent(using):
        return
    limited = QueueSettings.objects.using(using).filter(queue__in=queues, concurrency_limit__isnull=False)
    for queue in sorted(limited.values_list("queue", flat=True)):
        notify(using, queue)


def _apply(uow: UnitOfWork, row: Row, report: OutcomeReport, now: datetime) -> JobState:
    """Write one fenced-in outcome onto its row (see ``outcome_effect``); returns the new state."""
    effect = outcome_effect(report.outcome)
    fields: dict[str, Any] = {"lease_owner": None, "lease_expiry": None}
    if effect.due_time is not None:
        fields["due_time"] = effect.due_time
    if effect.state.is_terminal:
        fields["terminal_at"] = now
        fields["terminal_cause"] = effect.cause
    if effect.state == JobState.SUCCEEDED:
        fields["output"] = report.output
    if effect.clears_cancel:
        fields["cancel_requested"] = False
    if effect.gives_back_attempt:
        fields["max_attempts"] = ceiling_given_back(row.max_attempts, uow.settings.retry)
    if report.progress is not None:
        fields["progress"] = report.progress
    detail = report.failure_detail if effect.records_failure else None
    uow.transition(row, effect.state, actor=actors.worker(report.worker_id), failure_detail=detail, **fields)
    return effect.state
