"""Enqueue: inserting jobs, with their tags, edges to live parents and first transition-log entry.

:func:`enqueue_many` judges every job (bounds, duplicate id, unknown parent), then writes the
accepted ones through the store backend (``backends.store_backend``): the portable ORM path
below (:class:`PortableInserts`, the reference) writes one statement per table and locks the
parents, so that a parent cannot end between the check and the edge being written; PostgreSQL's
fast path (``store/postgres/enqueue/``) writes a batch without parents in one statement.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import IntegrityError

from ..conf import BackWaveSettings, get_settings
from ..core import actors
from ..core.limits import flow_columns
from ..core.outcomes import PREPARED_NOT_DUE, NewJob
from ..core.policy import policy_columns
from ..core.states import DependencyMode, EnqueueResult, HistoryPolicy, JobState
from ..core.validation import require_aware
from ..database import jobs_database
from ..exceptions import EnqueueError
from ..models import JobDependency, JobRecord, JobTag, JobTransition
from ._tx import atomic_retrying, notify
from .backends import store_backend
from .job_inserts import Enqueued
from .uniqueness import duplicate_of, mark_accepted, unique_holders


def enqueue(new_job: NewJob, *, now: datetime) -> EnqueueResult:
    """Insert a job. Bounds are checked before anything is written; see ``EnqueueResult``.

    Joins the caller's ``transaction.atomic()`` block when there is one.
    """
    if not isinstance(new_job, NewJob):
        raise TypeError(f"new_job must be a NewJob, got {type(new_job).__name__}")
    return enqueue_many([new_job], now=now)[0]


def enqueue_many(
    new_jobs: Sequence[NewJob], *, now: datetime, raise_refusals: bool = False
) -> list[EnqueueResult]:
    """Insert many jobs in one transaction, each judged exactly as :func:`enqueue` would.

    A job may name as parent a job earlier in the same batch. Results come in input order; a
    refused job writes nothing, and the others are inserted with one statement per table. With
    ``raise_refusals`` (what ``enqueue_many`` in application code uses) the first refusal raises
    :class:`~backwave_django.EnqueueError` instead, and nothing of the batch is written.
    ``DUPLICATE`` is never a refusal: the existing job is kept.
    """
    return [entry.result for entry in enqueue_batch(new_jobs, now=now, raise_refusals=raise_refusals)]


def enqueue_batch(
    new_jobs: Sequence[NewJob], *, now: datetime, raise_refusals: bool = False
) -> list[Enqueued]:
    """:func:`enqueue_many`, with the job id each result stands for (what receipts carry).

    A unique job (``NewJob.unique``) is ``DUPLICATE`` of the first existing job that holds its key
    in one of its ``states``, enqueued within its ``period``; enqueues of one key are serialized
    (an advisory lock on PostgreSQL, a lock row on MariaDB, the single writer on SQLite), so any
    number of concurrent enqueuers store exactly one job. Within a batch, a later member with the
    key of an earlier one is ``DUPLICATE`` of it.
    """
    jobs = list(new_jobs)
    settings = get_settings()
    results = judge_bounds(jobs, now, settings, raise_refusals)
    if all(r is not None for r in results):
        return [Enqueued(r, j.job_id) for r, j in zip(results, jobs, strict=True) if r is not None]
    using = jobs_database()
    return store_backend(using).inserts.insert(using, jobs, results, now, settings, raise_refusals)


def judge_bounds(
    jobs: list[NewJob], now: datetime, settings: BackWaveSettings, raise_refusals: bool
) -> list[EnqueueResult | None]:
    """Each job's refusal by :func:`check_bounds` or None (``raise_refusals``: the first raises)."""
    for index, new_job in enumerate(jobs):
        if not isinstance(new_job, NewJob):
            raise TypeError(f"new_jobs[{index}] must be a NewJob, got {type(new_job).__name__}")
        if new_job.run_after is not None:
            raise ValueError(f"new_jobs[{index}] {PREPARED_NOT_DUE}")
    require_aware("now", now)
    results: list[EnqueueResult | None] = [check_bounds(j, settings) for j in jobs]
    if raise_refusals:
        for new_job, result in zip(jobs, results, strict=True):
            if result is not None:
                raise EnqueueError(result, refusal_message(new_job, result, settings))
    return results


def check_bounds(new_job: NewJob, settings: BackWaveSettings) -> EnqueueResult | None:
    """The bound an enqueue breaks (payload, wire name, parents, in that order), or None."""
    if len(new_job.payload_json) > settings.max_payload_bytes:
        return EnqueueResult.PAYLOAD_TOO_LARGE
    if len(new_job.wire_name) > settings.max_wire_name_length:
        return EnqueueResult.WIRE_NAME_TOO_LONG
    if new_job.parents and len(dict.fromkeys(new_job.parents)) > settings.max_parents_per_job:
        return EnqueueResult.TOO_MANY_PARENTS
    return None


def refusal_message(
    new_job: NewJob, result: EnqueueResult, settings: BackWaveSettings, *, using: str | None = None
) -> str:
    """What :class:`~backwave_django.EnqueueError` says: the limit, the actual value, what to do."""
    wire = new_job.wire_name
    if result is EnqueueResult.PAYLOAD_TOO_LARGE:
        return (
            f"payload for wire name '{wire}' is {len(new_job.payload_json):,} bytes; MAX_PAYLOAD_BYTES is "
            f"{settings.max_payload_bytes:,} — store a reference instead"
        )
    if result is EnqueueResult.WIRE_NAME_TOO_LONG:
        return (
            f"wire name '{wire[:40]}…' is {len(wire):,} characters; MAX_WIRE_NAME_LENGTH is "
            f"{settings.max_wire_name_length:,} — choose a shorter wire name"
        )
    if result is EnqueueResult.TOO_MANY_PARENTS:
        return (
            f"job '{wire}' has {len(set(new_job.parents)):,} parents; MAX_PARENTS_PER_JOB is "
            f"{settings.max_parents_per_job:,} — chain the work through fewer, wider parents"
        )
    missing = missing_jobs(new_job.parents, using=using)
    return f"job '{wire}' names parent job(s) that do not exist: {', '.join(str(m) for m in missing)}"


def missing_jobs(job_ids: Iterable[uuid.UUID], *, using: str | None = None) -> list[uuid.UUID]:
    """Which of these job ids have no row (in the order given); a read, for error messages."""
    wanted = list(dict.fromkeys(job_ids))
    found = set(
        JobRecord.objects.using(using or jobs_database())
        .filter(job_id__in=wanted)
        .values_list("job_id", flat=True)
    )
    return [j for j in wanted if j not in found]


# --- The portable path ------------------------------------------------------------------------


class PortableInserts:
    """The portable path of ``backends.Inserts``: :func:`_insert_many` in one transaction."""

    def insert(
        self,
        using: str,
        jobs: list[NewJob],
        results: list[EnqueueResult | None],
        now: datetime,
        settings: BackWaveSettings,
        raise_refusals: bool,
    ) -> list[Enqueued]:
        for attempt in (1, 2, 3):
            try:
                return atomic_retrying(
                    using, lambda: _insert_many(jobs, list(results), now, settings, using, raise_refusals)
                )
            except IntegrityError:
                # Another transaction committed one of these ids after we looked: look again.
                if attempt == 3:
                    raise
        raise AssertionError("unreachable")


@dataclass(slots=True)
class _Planned:
    new_job: NewJob
    record: JobRecord
    live_parents: list[uuid.UUID]


def _insert_many(
    jobs: list[NewJob],
    results: list[EnqueueResult | None],
    now: datetime,
    settings: BackWaveSettings,
    using: str,
    raise_refusals: bool,
    workflow_id: uuid.UUID | None = None,
) -> list[Enqueued]:
    candidates = [j for j, r in zip(jobs, results, strict=True) if r is None]
    records = JobRecord.objects.using(using)
    existing = set(records.filter(job_id__in={j.job_id for j in candidates}).values_list("job_id", flat=True))
    unique_jobs = [j for j in candidates if j.unique is not None and j.job_id not in existing]
    holders = unique_holders(using, unique_jobs, now)
    stands_for = [j.job_id for j in jobs]
    wanted_parents = {p for j in candidates for p in j.parents}
    parents: dict[uuid.UUID, tuple[int | None, JobState]] = {
        job_id: (sequence, JobState(state))
        for sequence, job_id, state in records.filter(job_id__in=wanted_parents)
        .order_by("sequence")
        .select_for_update()
        .values_list("sequence", "job_id", "state")
    }
    planned: list[_Planned] = []
    for index, new_job in enumerate(jobs):
        if results[index] is not None:
            continue
        duplicate = duplicate_of(new_job, existing, holders)
        if duplicate is not None:
            results[index], stands_for[index] = EnqueueResult.DUPLICATE, duplicate
            continue
        declared = list(dict.fromkeys(new_job.parents))
        if any(p not in parents for p in declared):
            if raise_refusals:  # raised inside the transaction: nothing of the batch is written
                refused = EnqueueResult.UNKNOWN_PARENT
                raise EnqueueError(refused, refusal_message(new_job, refused, settings, using=using))
            results[index] = EnqueueResult.UNKNOWN_PARENT
            continue
        state, cause, live = initial_state(new_job, [parents[p][1] for p in declared], declared)
        record = JobRecord(
            job_id=new_job.job_id,
            wire_name=new_job.wire_name,
            queue=new_job.queue,
            # What was checked and encoded (for a prepared job, at prepare()), as the statement path stores.
            payload=json.loads(new_job.payload_json),
            state=state,
            due_time=new_job.due_time,
            parents_remaining=len(live),
            mode=new_job.mode,
            terminal_at=now if state.is_terminal else None,
            terminal_cause=cause,
            enqueued_at=now,
            next_ordinal=1,
            priority=new_job.priority,
            unique_key=None if new_job.unique is None else new_job.unique.key,
            workflow_id=workflow_id,
            trace_context=new_job.trace_context,
            **policy_columns(new_job.max_attempts, new_job.backoff, new_job.timeout, settings),
            **_flow_columns(new_job),
        )
        planned.append(_Planned(new_job, record, live))
        mark_accepted(new_job, existing, holders)
        parents[new_job.job_id] = (None, state)  # a later job of the batch may name it as parent
        results[index] = EnqueueResult.OK
    if planned:
        _write_planned(planned, now, settings, using)
    return [Enqueued(r, job_id) for r, job_id in zip(results, stands_for, strict=True) if r is not None]


def _flow_columns(new_job: NewJob) -> dict[str, Any]:
    """The flow-control columns of a job with a partition or buckets; nothing for a plain job (its
    row keeps the columns' defaults)."""
    if new_job.partition is None and not new_job.limit_keys:
        return {}
    return flow_columns(new_job.partition, new_job.limit_keys)


def initial_state(
    new_job: NewJob, parent_states: list[JobState], declared: list[uuid.UUID]
) -> tuple[JobState, str | None, list[uuid.UUID]]:
    """The state a new job starts in, its cause if born Cancelled, and its still-live parents."""
    live = [p for p, s in zip(declared, parent_states, strict=True) if not s.is_terminal]
    failed = [s for s in parent_states if s.is_terminal and s != JobState.SUCCEEDED]
    if new_job.mode == DependencyMode.ON_SUCCESS and failed:
        # The last failed parent in declared order names the cause. Edges to the still-live
        # parents are written all the same (see docs/concepts.md); resolution skips them.
        return JobState.CANCELLED, actors.parent_failure(failed[-1]), live
    return (JobState.AWAITING_PARENT if live else JobState.SCHEDULED), None, live


def _write_planned(planned: list[_Planned], now: datetime, settings: BackWaveSettings, using: str) -> None:
    created = JobRecord.objects.using(using).bulk_create([p.record for p in planned])
    sequences = {r.job_id: r.sequence for r in created if r.sequence is not None}
    if len(sequences) < len(planned):  # a backend that cannot return ids from a bulk insert
        sequences = dict(
            JobRecord.objects.using(using)
            .filter(job_id__in=[p.new_job.job_id for p in planned])
            .values_list("job_id", "sequence")
        )
    live_parent_ids = {p for plan in planned for p in plan.live_parents} - sequences.keys()
    if live_parent_ids:
        sequences.update(
            JobRecord.objects.using(using)
            .filter(job_id__in=live_parent_ids)
            .values_list("job_id", "sequence")
        )
    JobDependency.objects.using(using).bulk_create(
        [
            JobDependency(parent_id=sequences[parent], child_id=sequences[plan.new_job.job_id])
            for plan in planned
            for parent in plan.live_parents
        ]
    )
    JobTag.objects.using(using).bulk_create(
        [
            JobTag(job_id=sequences[plan.new_job.job_id], key=key, value=value)
            for plan in planned
            for key, value in plan.new_job.tag_pairs
        ]
    )
    if settings.history is not HistoryPolicy.OFF:
        JobTransition.objects.using(using).bulk_create(
            [
                JobTransition(
                    job_id=sequences[plan.new_job.job_id],
                    ordinal=0,
                    recorded_at=now,
                    state=plan.record.state,
                    attempt=0,
                    actor=actors.ENQUEUE,
                )
                for plan in planned
            ]
        )
    earliest: dict[str, datetime] = {}  # per queue with a job due now, its earliest due time
    for plan in planned:
        due = plan.new_job.due_time
        if plan.record.state == JobState.SCHEDULED and due <= now:
            earliest[plan.new_job.queue] = min(due, earliest.get(plan.new_job.queue, due))
    for queue in sorted(earliest):
        notify(using, queue, due=earliest[queue])
