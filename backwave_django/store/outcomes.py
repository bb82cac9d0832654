"""Outcomes: applying each attempt's result under its fence, and resolving dependents.

The fence: the job is Leased, ``lease_owner`` and ``attempt`` match and ``lease_expiry > now``;
otherwise ``STALE_LEASE`` and nothing of that report is written. Where an outcome leads (state,
retry instant, cause, cancel flag) is one rule, :func:`~backwave_django.core.outcomes.outcome_effect`,
read by both paths here:

* the portable path locks the rows in sequence order and writes through the unit of work;
* on PostgreSQL a batch naming each job once is one :data:`REPORT` statement; as a transaction
  of its own it is pipelined (:func:`_report_pipelined`), two round trips instead of four.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from ..conf import BackWaveSettings, get_settings
from ..core import actors
from ..core.encoding import json_size, truncate_utf8
from ..core.outcomes import OutcomeReport, Success, outcome_effect
from ..core.retry import ceiling_given_back
from ..core.states import HistoryPolicy, JobState, OutcomeResult
from ..core.tags import normalize_tags
from ..core.validation import require_aware, require_uuid
from ..database import jobs_database
from ..exceptions import OutputTooLarge
from ..models import JobRecord
from ._rows import Row, UnitOfWork, cascade, lock_rows
from ._schema import EDGES, JOBS, LEASED, SCHEDULED, SUCCEEDED, TAGS, TERMINAL, TRANSITIONS
from ._tx import (
    atomic_retrying,
    fetch_bound,
    own_transaction,
    pipelined_transaction,
    retrying,
    uses_postgres_statements,
)


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
    if uses_postgres_statements(using) and len({r.job_id for r in reports}) == len(reports):
        # One statement for the batch. (A batch naming a job twice takes the portable path,
        # which applies its reports in order.)
        if own_transaction(using):
            written = retrying(lambda: _report_pipelined(using, reports, now, settings))
            if written is not None:
                return written
        return atomic_retrying(using, lambda: _report_statement(using, reports, now, settings))
    return atomic_retrying(using, lambda: _report_portable(using, reports, now, settings))


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


def _report_portable(
    using: str, reports: list[OutcomeReport], now: datetime, settings: BackWaveSettings
) -> list[OutcomeResult]:
    results: list[OutcomeResult] = []
    rows = {
        row.job_id: row
        for row, _ in lock_rows(
            JobRecord.objects.using(using).filter(job_id__in={r.job_id for r in reports}).order_by("sequence")
        )
    }
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
        if new_state.is_terminal:
            ended.append((row, new_state))
        if report.added_tags:
            uow.add_tags(row.sequence, normalize_tags(report.added_tags))
        results.append(OutcomeResult.APPLIED)
    cascade(uow, using, ended)
    uow.flush(using)
    return results


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


# --- The PostgreSQL path ----------------------------------------------------------------------

#: Apply a batch of outcomes, each under its fence: lock the reported rows by ``job_id`` (the
#: unique index) in sequence order, judge the fence on the locked, current row version, write the
#: new state, log it, trim logs over the cap and add the attempts' tags. The batch travels as one
#: JSON document (``batch``; ``tags`` likewise), parsed by ``jsonb_to_recordset``.
REPORT = f"""
WITH input AS (
    SELECT * FROM jsonb_to_recordset(%(batch)s::jsonb) AS i (
        job_id uuid, worker_id text, attempt int, state smallint, due_time timestamptz, cause text,
        output jsonb, detail text, clear_cancel bool, gives_back bool, progress jsonb
    )
), locked AS (
    SELECT j.sequence, i.*,
           (j.state = {LEASED} AND j.lease_owner = i.worker_id AND j.attempt = i.attempt
            AND j.lease_expiry > %(now)s) AS fenced_in
    FROM {JOBS} AS j JOIN input AS i ON i.job_id = j.job_id
    -- The planner cannot see how many rows the JSON holds (it guesses 100) and would scan the
    -- whole table for the join; naming the ids as an array makes it probe the unique index.
    WHERE j.job_id = ANY(ARRAY(SELECT job_id FROM input))
    ORDER BY j.sequence
    FOR UPDATE OF j
), applied AS (
    UPDATE {JOBS} AS j SET
        state = f.state,
        lease_owner = NULL,
        lease_expiry = NULL,
        due_time = CASE WHEN f.state = {SCHEDULED} THEN f.due_time ELSE j.due_time END,
        terminal_at = CASE WHEN f.state IN {TERMINAL} THEN %(now)s ELSE j.terminal_at END,
        terminal_cause = CASE WHEN f.state IN {TERMINAL} THEN f.cause ELSE j.terminal_cause END,
        output = CASE WHEN f.state = {SUCCEEDED} THEN f.output ELSE j.output END,
        cancel_requested = j.cancel_requested AND NOT f.clear_cancel,
        max_attempts = CASE WHEN f.gives_back THEN coalesce(j.max_attempts, %(default_max_attempts)s) + 1
                            ELSE j.max_attempts END,
        progress = coalesce(f.progress, j.progress),
        next_ordinal = j.next_ordinal + 1
    FROM locked AS f
    WHERE j.sequence = f.sequence AND f.fenced_in
    RETURNING j.sequence, j.job_id, j.state, j.attempt, j.next_ordinal - 1 AS ordinal, f.detail, f.worker_id
), logged AS (
    INSERT INTO {TRANSITIONS} (job_id, ordinal, recorded_at, state, attempt, failure_detail, actor)
    SELECT sequence, ordinal, %(now)s, state, attempt, detail, worker_id FROM applied WHERE %(history)s
), trimmed AS (
    DELETE FROM {TRANSITIONS} AS t
    USING (SELECT sequence, ordinal FROM applied WHERE ordinal >= %(cap)s) AS a
    WHERE %(history)s AND t.job_id = a.sequence AND t.ordinal <= a.ordinal - %(cap)s
      AND t.job_id = ANY(ARRAY(SELECT sequence FROM applied WHERE ordinal >= %(cap)s))
), tagged AS (
    INSERT INTO {TAGS} (job_id, key, value)
    SELECT a.sequence, x.key, x.value
    FROM applied AS a
    JOIN jsonb_to_recordset(%(tags)s::jsonb) AS x (job_id uuid, key text, value text) ON x.job_id = a.job_id
    ON CONFLICT (job_id, key, value) DO NOTHING
)
SELECT a.job_id, a.sequence, a.state FROM applied AS a
"""

#: Which of the jobs that just ended have waiting children. A statement of its own, on purpose: the
#: report statement may have waited for a parent's row lock held by an enqueue that then committed
#: a new edge to it; that statement's snapshot predates the edge, a new statement's does not (and the
#: parent's row lock, held until commit, keeps any later enqueue from adding one).
PARENTS_WITH_CHILDREN = f"SELECT DISTINCT parent_id FROM {EDGES} WHERE parent_id = ANY(%(ended)s)"

#: The pipelined batch's check for waiting children: the reported jobs that this transaction (top
#: level, no savepoints) just ended, and that are parents. A statement of its own, after the
#: report statement, for the reason given at :data:`PARENTS_WITH_CHILDREN`.
#: The reported rows are read first, by id (materialized): with the state condition beside the ids
#: the planner would walk the terminal jobs' partial index instead, reading every retained one.
ENDED_WITH_CHILDREN = f"""
WITH reported AS MATERIALIZED (
    SELECT sequence, state, xmin FROM {JOBS} WHERE job_id = ANY(%(ids)s::uuid[])
)
SELECT 1 FROM reported AS j
WHERE j.state IN {TERMINAL} AND j.xmin = pg_current_xact_id_if_assigned()::xid
  AND EXISTS (SELECT 1 FROM {EDGES} AS d WHERE d.parent_id = j.sequence)
LIMIT 1
"""


def _report_params(
    reports: list[OutcomeReport], now: datetime, settings: BackWaveSettings
) -> tuple[dict[str, Any], str]:
    """The parameters of :data:`REPORT`, each report's columns worked out by ``outcome_effect``,
    and the reports' job ids as a PostgreSQL array literal (for :data:`ENDED_WITH_CHILDREN`).

    The batch is JSON-encoded here (in C) and parsed on the server: far cheaper than quoting nine
    arrays of values in Python; the ids, already text for the batch, are joined rather than
    dumped again as an array of UUIDs.
    """
    keep_detail = settings.history is HistoryPolicy.TRANSITIONS_AND_FAILURE_DETAIL
    batch: list[dict[str, Any]] = []
    tags: list[dict[str, str]] = []
    ids: list[str] = []
    for report in reports:
        effect = outcome_effect(report.outcome)
        job_id = str(report.job_id)
        ids.append(job_id)
        row: dict[str, Any] = {
            "job_id": job_id,
            "worker_id": report.worker_id,
            "attempt": report.attempt,
            "state": int(effect.state),
            "clear_cancel": effect.clears_cancel,
            "gives_back": effect.gives_back_attempt,
        }
        if report.progress is not None:
            row["progress"] = report.progress
        if effect.due_time is not None:
            row["due_time"] = effect.due_time.isoformat()
        if effect.cause is not None:
            row["cause"] = effect.cause
        if effect.state == JobState.SUCCEEDED and report.output is not None:
            row["output"] = report.output
        if effect.records_failure and keep_detail and report.failure_detail is not None:
            row["detail"] = truncate_utf8(report.failure_detail, settings.max_failure_detail_bytes)
        batch.append(row)
        if report.added_tags:
            pairs = normalize_tags(report.added_tags)
            tags.extend({"job_id": job_id, "key": key, "value": value} for key, value in pairs)
    params = {
        "now": now,
        "history": settings.history is not HistoryPolicy.OFF,
        "cap": settings.max_transitions_per_job,
        "default_max_attempts": settings.retry.max_attempts,
        "batch": json.dumps(batch),
        "tags": json.dumps(tags) if tags else "[]",
    }
    return params, "{" + ",".join(ids) + "}"


def _report_statement(
    using: str, reports: list[OutcomeReport], now: datetime, settings: BackWaveSettings
) -> list[OutcomeResult]:
    """The batch as one :data:`REPORT` inside a transaction, then the dependents' latches."""
    rows = fetch_bound(using, REPORT, _report_params(reports, now, settings)[0], jobs=len(reports))
    ended = [sequence for _, sequence, state in rows if JobState(state).is_terminal]
    with_children: set[int] = set()
    if ended:
        with_children = {
            parent
            for (parent,) in fetch_bound(using, PARENTS_WITH_CHILDREN, {"ended": ended}, jobs=len(ended))
        }
    # Parents that just ended and have waiting children: resolve their latches (rare; the ORM path).
    parents = [
        (_ended_row(sequence, job_id, state, now), JobState(state))
        for job_id, sequence, state in rows
        if sequence in with_children
    ]
    if parents:
        parents.sort(key=lambda entry: entry[0].sequence)
        uow = UnitOfWork(settings, now)
        cascade(uow, using, parents)
        uow.flush(using)
    return _results(reports, rows)


def _ended_row(sequence: int, job_id: uuid.UUID, state: int, now: datetime) -> Row:
    """A parent that just ended, as the cascade needs it (only its identity and state matter)."""
    return Row(
        sequence=sequence,
        job_id=job_id,
        queue="",
        state=state,
        attempt=0,
        due_time=now,
        lease_owner=None,
        lease_expiry=None,
        cancel_requested=False,
        parents_remaining=0,
        mode=0,
        next_ordinal=0,
        max_attempts=None,
    )


def _results(reports: list[OutcomeReport], rows: list[tuple[Any, ...]]) -> list[OutcomeResult]:
    applied = {job_id for job_id, _, _ in rows}
    return [OutcomeResult.APPLIED if r.job_id in applied else OutcomeResult.STALE_LEASE for r in reports]


def _report_pipelined(
    using: str, reports: list[OutcomeReport], now: datetime, settings: BackWaveSettings
) -> list[OutcomeResult] | None:
    """An outcome batch that is its own transaction, in two round trips instead of four.

    ``BEGIN``, :data:`REPORT` and the check for waiting children go out together; the ``COMMIT``
    follows once the check has found none. When a job that just ended has waiting children (its
    dependents' latches must be resolved in the same transaction, through the ORM), the batch is
    rolled back and None returned: :func:`report_outcomes` then writes it on the statement path.
    """
    params, ids = _report_params(reports, now, settings)
    with pipelined_transaction(using, jobs=len(reports)) as (pipeline, cursor):
        control, report, parents = cursor(), cursor(), cursor()
        with pipeline():
            control.execute("BEGIN")
            report.execute(REPORT, params)
            parents.execute(ENDED_WITH_CHILDREN, {"ids": ids})
        if parents.fetchall():
            control.execute("ROLLBACK")
            return None
        rows = report.fetchall()
        control.execute("COMMIT")
    return _results(reports, rows)
