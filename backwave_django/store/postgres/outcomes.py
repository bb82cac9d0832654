"""PostgreSQL's path of outcomes (``backends.Outcomes``): a batch naming each job once is one
:data:`REPORT` statement (``sql/outcomes.sql``); as a transaction of its own it is pipelined
(:func:`_report_pipelined`), two round trips instead of four. A batch naming a job twice takes
the portable path (``store.outcomes``), which applies its reports in order. Where each outcome
leads is worked out on the client by ``core.outcomes.outcome_effect``, as on the portable path.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from typing import Any

from ...conf import BackWaveSettings
from ...core.encoding import truncate_utf8
from ...core.outcomes import OutcomeReport, outcome_effect
from ...core.states import HistoryPolicy, JobState, OutcomeResult
from ...core.tags import normalize_tags
from .._rows import Row, UnitOfWork, cascade
from .._tx import atomic_retrying, retrying
from ..outcomes import report_portable
from .connection import fetch_bound, own_transaction, pipelined_transaction
from .notifications import HINT_CHANNEL
from .statements import statement

#: Apply a batch of outcomes, each under its fence (read at each call, as a module global).
REPORT = statement("REPORT")
#: What an outcome batch that is its own transaction sets for itself.
REPORT_OWN_SETTINGS = statement("REPORT_OWN_SETTINGS")
#: Which of the jobs that just ended have waiting children.
PARENTS_WITH_CHILDREN = statement("PARENTS_WITH_CHILDREN")
#: The pipelined batch's check for waiting children.
ENDED_WITH_CHILDREN = statement("ENDED_WITH_CHILDREN")


class PostgresOutcomes:
    """PostgreSQL's path of ``backends.Outcomes``."""

    def report(
        self, using: str, reports: list[OutcomeReport], now: datetime, settings: BackWaveSettings
    ) -> list[OutcomeResult]:
        if len({r.job_id for r in reports}) != len(reports):
            return atomic_retrying(using, lambda: report_portable(using, reports, now, settings))
        if own_transaction(using):
            written = retrying(lambda: _report_pipelined(using, reports, now, settings))
            if written is not None:
                return written
        return atomic_retrying(using, lambda: _report_statement(using, reports, now, settings))


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
        "hint_channel": HINT_CHANNEL,
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

    ``BEGIN``, :data:`REPORT_OWN_SETTINGS`, :data:`REPORT` and the check for waiting children go
    out together; the ``COMMIT``
    follows once the check has found none. When a job that just ended has waiting children (its
    dependents' latches must be resolved in the same transaction, through the ORM), the batch is
    rolled back and None returned: :func:`report_outcomes` then writes it on the statement path.
    """
    params, ids = _report_params(reports, now, settings)
    with pipelined_transaction(using, jobs=len(reports)) as tx:
        settings_cursor, report, parents = tx.cursor(), tx.cursor(), tx.cursor()
        with tx.round_trip():
            tx.begin()
            settings_cursor.execute(REPORT_OWN_SETTINGS)
            report.execute(REPORT, params)
            parents.execute(ENDED_WITH_CHILDREN, {"ids": ids})
        if parents.fetchall():
            tx.rollback()
            return None
        rows = report.fetchall()
        tx.commit()
    return _results(reports, rows)
