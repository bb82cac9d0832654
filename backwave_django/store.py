"""The storage contract: every state change of a job, one transaction each, at an explicit ``now``.

This is the only module that writes job, edge, tag and transition rows. It never reads a clock:
every function takes ``now``, which is what lets tests drive weeks of virtual time in
milliseconds. Each function runs in one ``transaction.atomic()`` block, so it joins the caller's
transaction when there is one (enqueue inside ``atomic()`` commits or rolls back with the
caller's writes) and is all-or-nothing otherwise.

The write path is batched by construction. An operation loads the rows it touches with their
locks (``_Row``), decides every change in Python, and a :class:`_UnitOfWork` writes them back as
one ``UPDATE`` per distinct set of new values, one bulk ``INSERT`` of transition-log entries and
one of tags.

Locking. Job rows are always locked in ``sequence`` order. A job's parents must exist when it
is enqueued, so every parent has a smaller sequence than its children: that order is
topological, and enqueue (which locks parents), outcomes and cascades (which lock parents, then
children) all take locks in the same direction. Queue settings rows are locked in queue-name
order. The one interleaving this cannot order (a cascade reaching, at a deeper level, a row
smaller than one it already holds, while another transaction takes the two the other way) is
resolved by PostgreSQL's deadlock detector; the victim's transaction is rolled back whole and
retried (see :func:`_atomic_retrying`), so callers never see it.
"""

from __future__ import annotations

import json
import logging
import uuid
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import reduce
from operator import or_
from typing import Any, TypeVar

from django.db import IntegrityError, OperationalError, connections, router, transaction
from django.db.models import Count, F, Q

from .conf import BackWaveSettings, get_settings
from .core import planner
from .core.cron import CronExpression
from .core.encoding import json_size, require_aware, require_positive_duration, truncate_utf8
from .core.outcomes import (
    Cancelled,
    ClaimedJob,
    Failure,
    HeartbeatResult,
    NewJob,
    OutcomeReport,
    ScheduleSpec,
    Success,
    Unroutable,
    validate_queue_name,
)
from .core.retry import RetryPolicy
from .core.states import (
    CancelResult,
    CatchUp,
    DependencyMode,
    EnqueueResult,
    HistoryPolicy,
    JobState,
    OperatorAction,
    OutcomeResult,
    RequeueResult,
    TerminalStateClass,
    TriggerScheduleResult,
)
from .core.tags import TagPair, normalize_tags, tag_from_pair
from .exceptions import OutputTooLarge
from .models import (
    JobDependency,
    JobRecord,
    JobTag,
    JobTransition,
    OperatorAudit,
    QueueSettings,
    RecurringSchedule,
    WorkerNode,
)

__all__ = [
    "HINT_CHANNEL",
    "cancel_job",
    "claim",
    "enqueue",
    "enqueue_many",
    "expire_leases",
    "heartbeat",
    "job_output",
    "mint_due",
    "missing_jobs",
    "pause_queue",
    "prune_settings_schedules",
    "prune_workers",
    "purge_terminal",
    "register_worker",
    "release_leases",
    "remove_schedule",
    "report_outcome",
    "report_outcomes",
    "requeue",
    "resume_queue",
    "set_concurrency_limit",
    "touch_worker",
    "trigger_schedule",
    "unregister_worker",
    "upsert_schedule",
]

#: PostgreSQL channel that carries wake-up hints; the payload is the queue name.
HINT_CHANNEL = "backwave_hints"
#: Advisory-lock class id that namespaces our per-queue locks (the second key is the queue's CRC32).
_QUEUE_LOCK_CLASS = 0x0BAC_3A7E & 0x7FFF_FFFF

CASCADE_ACTOR = "cascade:{parent}"
LEASE_EXPIRY_ACTOR = "lease-expiry"
ENQUEUE_ACTOR = "enqueue"
LEASE_EXPIRED_CAUSE = "Lease expired on attempt {attempt} (attempt ceiling reached)."
PARENT_FAILURE_CAUSE = "parent-failure:{state}"
SCHEDULE_ACTOR = "schedule:{schedule_id}"

_S = JobState
_T = TypeVar("_T")

logger = logging.getLogger("backwave_django.store")

#: How many times an operation chosen as a deadlock victim is run again before the error surfaces.
DEADLOCK_RETRIES = 5
_DEADLOCK_SQLSTATES = frozenset({"40P01", "40001"})  # deadlock_detected, serialization_failure
_MYSQL_DEADLOCK_CODES = frozenset({1213, 1205})  # ER_LOCK_DEADLOCK, ER_LOCK_WAIT_TIMEOUT


def _db() -> str:
    return router.db_for_write(JobRecord)


def _is_deadlock(error: OperationalError) -> bool:
    cause = error.__cause__
    if getattr(cause, "sqlstate", None) in _DEADLOCK_SQLSTATES:
        return True
    return bool(error.args) and error.args[0] in _MYSQL_DEADLOCK_CODES


def _own_transaction(using: str) -> bool:
    """Whether a store call here would be a transaction of its own: the connection is in autocommit
    mode (Django's default) and not inside the caller's ``atomic()`` block."""
    connection = connections[using]
    return connection.get_autocommit() and not connection.in_atomic_block


def _retrying(body: Callable[[], _T]) -> _T:
    """Run ``body`` (a transaction of its own) again if the database picked it as a deadlock victim."""
    for attempt in range(1, DEADLOCK_RETRIES + 1):
        try:
            return body()
        except OperationalError as error:
            if attempt == DEADLOCK_RETRIES or not _is_deadlock(error):
                raise
            logger.info("Store operation was a deadlock victim; retrying (try %d).", attempt + 1)
    raise AssertionError("unreachable")


def _atomic_retrying(using: str, body: Callable[[], _T]) -> _T:
    """Run ``body`` in ``transaction.atomic`` and run it again if the database picked it as a
    deadlock victim. The failed try is rolled back whole (to its savepoint inside a caller's
    transaction, where PostgreSQL also releases the locks it took), so a retry starts clean."""

    def attempt() -> _T:
        with transaction.atomic(using=using):
            return body()

    return _retrying(attempt)


# --- Rows and the unit of work ----------------------------------------------------------------

_ROW_FIELDS = (
    "sequence",
    "job_id",
    "queue",
    "state",
    "attempt",
    "due_time",
    "lease_owner",
    "lease_expiry",
    "cancel_requested",
    "parents_remaining",
    "mode",
    "next_ordinal",
)


@dataclass(slots=True)
class _Row:
    """The mutable in-transaction view of a locked job row."""

    sequence: int
    job_id: uuid.UUID
    queue: str
    state: int
    attempt: int
    due_time: datetime
    lease_owner: str | None
    lease_expiry: datetime | None
    cancel_requested: bool
    parents_remaining: int
    mode: int
    next_ordinal: int


def _lock_rows(
    queryset: Any, *, skip_locked: bool = False, extra: Sequence[str] = ()
) -> list[tuple[_Row, tuple[Any, ...]]]:
    """Lock and load rows; returns each as a ``_Row`` plus the values of ``extra`` fields."""
    width = len(_ROW_FIELDS)
    values = queryset.select_for_update(skip_locked=skip_locked).values_list(*_ROW_FIELDS, *extra)
    return [(_Row(*v[:width]), tuple(v[width:])) for v in values]


def _hashable(value: Any) -> Any:
    """A grouping key that keeps ``True``, ``1`` and ``1.0`` apart (they are equal in Python)."""
    if isinstance(value, dict | list):
        return (dict, json.dumps(value, sort_keys=True))
    return (type(value), value)


class _UnitOfWork:
    """Collects one operation's row changes and writes them back in a few batched statements."""

    def __init__(self, settings: BackWaveSettings, now: datetime) -> None:
        self.settings = settings
        self.now = now
        self.rows: dict[int, _Row] = {}
        self.updates: dict[int, dict[str, Any]] = {}
        self.appended: dict[int, int] = {}
        self.transitions: list[JobTransition] = []
        self.tags: list[JobTag] = []

    def set(self, row: _Row, **fields: Any) -> None:
        """Record new field values for ``row`` (mirrored onto the in-memory row)."""
        for name, value in fields.items():
            if hasattr(row, name):
                setattr(row, name, value)
        self.rows[row.sequence] = row
        self.updates.setdefault(row.sequence, {}).update(fields)

    def transition(
        self,
        row: _Row,
        state: JobState,
        *,
        actor: str,
        failure_detail: str | None = None,
        **fields: Any,
    ) -> None:
        """Move ``row`` to ``state``, write ``fields`` with it and append one transition-log entry."""
        self.set(row, state=state, **fields)
        self.appended[row.sequence] = self.appended.get(row.sequence, 0) + 1
        ordinal = row.next_ordinal
        row.next_ordinal += 1
        policy = self.settings.history
        if policy is HistoryPolicy.OFF:
            return
        if failure_detail is not None:
            if policy is HistoryPolicy.TRANSITIONS_AND_FAILURE_DETAIL:
                failure_detail = truncate_utf8(failure_detail, self.settings.max_failure_detail_bytes)
            else:
                failure_detail = None
        self.transitions.append(
            JobTransition(
                job_id=row.sequence,
                ordinal=ordinal,
                recorded_at=self.now,
                state=state,
                attempt=row.attempt,
                failure_detail=failure_detail,
                actor=actor,
            )
        )

    def add_tags(self, sequence: int, pairs: Iterable[TagPair]) -> None:
        self.tags.extend(JobTag(job_id=sequence, key=k, value=v) for k, v in pairs)

    def flush(self, using: str) -> None:
        groups: dict[tuple[Any, ...], tuple[dict[str, Any], list[int]]] = {}
        for sequence, fields in self.updates.items():
            bump = self.appended.get(sequence, 0)
            key = (tuple(sorted((k, _hashable(v)) for k, v in fields.items())), bump)
            groups.setdefault(key, (fields, []))[1].append(sequence)
        for (_, bump), (fields, sequences) in groups.items():
            values = dict(fields)
            if bump:
                values["next_ordinal"] = F("next_ordinal") + bump
            JobRecord.objects.using(using).filter(sequence__in=sequences).update(**values)
        if self.transitions:
            JobTransition.objects.using(using).bulk_create(self.transitions)
            _trim_transitions(using, self.transitions, self.settings.max_transitions_per_job)
        if self.tags:
            JobTag.objects.using(using).bulk_create(self.tags, ignore_conflicts=True)
        self.updates.clear()
        self.appended.clear()
        self.transitions = []
        self.tags = []


def _trim_transitions(using: str, appended: list[JobTransition], cap: int) -> None:
    """Drop the oldest entries of jobs whose log grew past ``cap``; ordinals keep climbing."""
    newest: dict[int, int] = {}
    for entry in appended:
        newest[entry.job_id] = max(newest.get(entry.job_id, -1), entry.ordinal)
    over = [Q(job_id=job, ordinal__lte=last - cap) for job, last in newest.items() if last >= cap]
    if over:
        JobTransition.objects.using(using).filter(reduce(or_, over)).delete()


def _audit(using: str, actor: str, action: OperatorAction, target: str, now: datetime) -> None:
    OperatorAudit.objects.using(using).create(actor=actor, action=action, target=target, recorded_at=now)


def _require_actor(actor: object) -> str:
    if not isinstance(actor, str) or not actor:
        raise ValueError(f"actor must be a non-empty string naming who acts, got {actor!r}")
    return actor


def _require_worker_id(worker_id: object) -> str:
    if not isinstance(worker_id, str) or not worker_id:
        raise ValueError(f"worker_id must be a non-empty string, got {worker_id!r}")
    return worker_id


def _require_count(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} must be an int >= 0, got {value!r}")
    return value


def _require_queues(queues: object) -> list[str]:
    if isinstance(queues, str) or not isinstance(queues, Iterable):
        raise TypeError(f"queues must be a list of queue names, got {queues!r}")
    return list(dict.fromkeys(validate_queue_name(q, "queues[]") for q in queues))


def _require_uuid(name: str, value: object) -> uuid.UUID:
    if not isinstance(value, uuid.UUID):
        raise TypeError(f"{name} must be a uuid.UUID, got {type(value).__name__}")
    return value


# --- The cascade ------------------------------------------------------------------------------


def _cascade(uow: _UnitOfWork, using: str, resolved: list[tuple[_Row, JobState]]) -> None:
    """Resolve the dependency latches of every child of the jobs that just became terminal.

    Runs level by level (so a cancelled child's own children are resolved next), deleting each
    parent's edges and locking the waiting children in ``sequence`` order.
    """
    now = uow.now
    frontier = resolved
    while frontier:
        parents = {row.sequence: (row, state) for row, state in frontier}
        edges = list(
            JobDependency.objects.using(using)
            .filter(parent_id__in=parents)
            .values_list("parent_id", "child_id")
        )
        if not edges:
            return
        JobDependency.objects.using(using).filter(parent_id__in=parents).delete()
        # A child already changed earlier in this operation is taken from memory: its row in
        # the database does not show that change until the flush.
        children = {
            row.sequence: uow.rows.get(row.sequence, row)
            for row, _ in _lock_rows(
                JobRecord.objects.using(using)
                .filter(sequence__in={child for _, child in edges}, state=_S.AWAITING_PARENT)
                .order_by("sequence")
            )
        }
        parent_order = {sequence: index for index, sequence in enumerate(parents)}
        edges.sort(key=lambda e: (parent_order[e[0]], e[1]))
        frontier = []
        for parent_sequence, child_sequence in edges:
            child = children.get(child_sequence)
            if child is None or child.state != _S.AWAITING_PARENT:
                continue  # purged, or already resolved through another parent
            parent_row, parent_state = parents[parent_sequence]
            actor = CASCADE_ACTOR.format(parent=parent_row.job_id)
            if child.mode == DependencyMode.ON_SUCCESS and parent_state != _S.SUCCEEDED:
                uow.transition(
                    child,
                    _S.CANCELLED,
                    actor=actor,
                    parents_remaining=0,
                    terminal_at=now,
                    terminal_cause=PARENT_FAILURE_CAUSE.format(state=parent_state.pascal),
                )
                frontier.append((child, _S.CANCELLED))
            elif child.parents_remaining > 1:
                uow.set(child, parents_remaining=child.parents_remaining - 1)
            else:
                uow.transition(
                    child, _S.SCHEDULED, actor=actor, parents_remaining=0, due_time=max(child.due_time, now)
                )


# --- Enqueue ----------------------------------------------------------------------------------


def enqueue(new_job: NewJob, *, now: datetime) -> EnqueueResult:
    """Insert a job. Bounds are checked before anything is written; see ``EnqueueResult``.

    Joins the caller's ``transaction.atomic()`` block when there is one.
    """
    if not isinstance(new_job, NewJob):
        raise TypeError(f"new_job must be a NewJob, got {type(new_job).__name__}")
    return enqueue_many([new_job], now=now)[0]


def enqueue_many(new_jobs: Sequence[NewJob], *, now: datetime) -> list[EnqueueResult]:
    """Insert many jobs in one transaction, each judged exactly as :func:`enqueue` would.

    A job may name as parent a job earlier in the same batch. Results come in input order; a
    refused job writes nothing, and the others are inserted with one statement per table.
    """
    jobs = list(new_jobs)
    for index, new_job in enumerate(jobs):
        if not isinstance(new_job, NewJob):
            raise TypeError(f"new_jobs[{index}] must be a NewJob, got {type(new_job).__name__}")
    require_aware("now", now)
    settings = get_settings()
    results: list[EnqueueResult | None] = [check_bounds(j, settings) for j in jobs]
    if all(r is not None for r in results):
        return [r for r in results if r is not None]
    using = _db()
    if _postgres(using) and not any(j.parents for j, r in zip(jobs, results, strict=True) if r is None):
        return _pg_enqueue_without_parents(using, jobs, results, now, settings)
    for attempt in (1, 2, 3):
        try:
            return _atomic_retrying(using, lambda: _insert_many(jobs, list(results), now, settings, using))
        except IntegrityError:
            # Another transaction committed one of these ids after we looked: look again.
            if attempt == 3:
                raise
    raise AssertionError("unreachable")


def check_bounds(new_job: NewJob, settings: BackWaveSettings) -> EnqueueResult | None:
    """The bound an enqueue breaks (payload, wire name, parents, in that order), or None."""
    if len(new_job.payload_json) > settings.max_payload_bytes:
        return EnqueueResult.PAYLOAD_TOO_LARGE
    if len(new_job.wire_name) > settings.max_wire_name_length:
        return EnqueueResult.WIRE_NAME_TOO_LONG
    if len(dict.fromkeys(new_job.parents)) > settings.max_parents_per_job:
        return EnqueueResult.TOO_MANY_PARENTS
    return None


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
) -> list[EnqueueResult]:
    candidates = [j for j, r in zip(jobs, results, strict=True) if r is None]
    records = JobRecord.objects.using(using)
    existing = set(records.filter(job_id__in={j.job_id for j in candidates}).values_list("job_id", flat=True))
    wanted_parents = {p for j in candidates for p in j.parents}
    parents: dict[uuid.UUID, tuple[int | None, JobState]] = {
        job_id: (sequence, _S(state))
        for sequence, job_id, state in records.filter(job_id__in=wanted_parents)
        .order_by("sequence")
        .select_for_update()
        .values_list("sequence", "job_id", "state")
    }
    planned: list[_Planned] = []
    for index, new_job in enumerate(jobs):
        if results[index] is not None:
            continue
        if new_job.job_id in existing:
            results[index] = EnqueueResult.DUPLICATE
            continue
        declared = list(dict.fromkeys(new_job.parents))
        if any(p not in parents for p in declared):
            results[index] = EnqueueResult.UNKNOWN_PARENT
            continue
        state, cause, live = _initial_state(new_job, [parents[p][1] for p in declared], declared)
        record = JobRecord(
            job_id=new_job.job_id,
            wire_name=new_job.wire_name,
            queue=new_job.queue,
            payload=new_job.payload,
            state=state,
            due_time=new_job.due_time,
            parents_remaining=len(live),
            mode=new_job.mode,
            terminal_at=now if state.is_terminal else None,
            terminal_cause=cause,
            enqueued_at=now,
            next_ordinal=1,
        )
        planned.append(_Planned(new_job, record, live))
        existing.add(new_job.job_id)
        parents[new_job.job_id] = (None, state)  # a later job of the batch may name it as parent
        results[index] = EnqueueResult.OK
    if planned:
        _write_planned(planned, now, settings, using)
    return [r for r in results if r is not None]


def _initial_state(
    new_job: NewJob, parent_states: list[JobState], declared: list[uuid.UUID]
) -> tuple[JobState, str | None, list[uuid.UUID]]:
    """The state a new job starts in, its cause if born Cancelled, and its still-live parents."""
    live = [p for p, s in zip(declared, parent_states, strict=True) if not s.is_terminal]
    failed = [s for s in parent_states if s.is_terminal and s != _S.SUCCEEDED]
    if new_job.mode == DependencyMode.ON_SUCCESS and failed:
        # The last failed parent in declared order names the cause. Edges to the still-live
        # parents are written all the same (reference behaviour); resolution skips them.
        return _S.CANCELLED, PARENT_FAILURE_CAUSE.format(state=failed[-1].pascal), live
    return (_S.AWAITING_PARENT if live else _S.SCHEDULED), None, live


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
                    actor=ENQUEUE_ACTOR,
                )
                for plan in planned
            ]
        )
    due_queues = {
        plan.new_job.queue
        for plan in planned
        if plan.record.state == _S.SCHEDULED and plan.new_job.due_time <= now
    }
    for queue in sorted(due_queues):
        _notify(using, queue)


def missing_jobs(job_ids: Iterable[uuid.UUID]) -> list[uuid.UUID]:
    """Which of these job ids have no row (in the order given); a read, for error messages."""
    wanted = list(dict.fromkeys(job_ids))
    found = set(JobRecord.objects.using(_db()).filter(job_id__in=wanted).values_list("job_id", flat=True))
    return [j for j in wanted if j not in found]


def _notify(using: str, queue: str) -> None:
    """Send a wake-up hint (PostgreSQL only); inside a transaction it is delivered on commit."""
    connection = connections[using]
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, %s)", [HINT_CHANNEL, queue])


# --- Claim ------------------------------------------------------------------------------------


def _queue_key(queue: str) -> int:
    return zlib.crc32(queue.encode()) - 0x8000_0000  # fits PostgreSQL's int4


def _queue_lock_calls(queues: Iterable[str], *, exclusive: bool) -> tuple[str, list[Any]]:
    """The advisory-lock calls for these queues, in key order, and their parameters: the select
    list of the one statement that takes them (empty when there are no queues)."""
    keys = sorted({_queue_key(q) for q in queues})
    function = "pg_advisory_xact_lock" if exclusive else "pg_advisory_xact_lock_shared"
    calls = ", ".join(f"{function}(%s, %s)" for _ in keys)
    return calls, [v for key in keys for v in (_QUEUE_LOCK_CLASS, key)]


def _lock_queues(using: str, queues: Iterable[str], *, exclusive: bool) -> None:
    """Serialize against operator changes to these queues' settings (PostgreSQL advisory locks).

    Claims take the locks shared, so they do not block each other; pause, resume and limit
    changes take theirs exclusively, so a new limit waits for claims already in flight to commit
    and every later claim sees both the limit and those claims' leases. The locks are taken in
    one statement, in key order. Elsewhere this is a no-op: SQLite serializes writers, and a
    limited queue is serialized through its settings row (see :func:`_queue_gates`).
    """
    connection = connections[using]
    if connection.vendor != "postgresql":
        return
    calls, params = _queue_lock_calls(queues, exclusive=exclusive)
    if not calls:
        return
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {calls}", params)


def _queue_gates(using: str, queues: list[str], *, async_commit: bool = False) -> dict[str, int | None]:
    """How many jobs each queue may lease now: 0 when paused or full, None when unlimited."""
    if _postgres(using):
        options = _pg_queue_options(using, queues, async_commit=async_commit)
    else:
        _lock_queues(using, queues, exclusive=False)
        options = {
            queue: (paused, limit)
            for queue, paused, limit in QueueSettings.objects.using(using)
            .filter(queue__in=queues)
            .values_list("queue", "paused", "concurrency_limit")
        }
    limited = sorted(q for q, (paused, limit) in options.items() if limit is not None and not paused)
    leased: dict[str, int] = {}
    if limited:
        # Claimers of a limited queue take turns on its settings row (locked in name order), so
        # the Leased count below is exact when they commit.
        options.update(
            (queue, (paused, limit))
            for queue, paused, limit in QueueSettings.objects.using(using)
            .filter(queue__in=limited)
            .order_by("queue")
            .select_for_update()
            .values_list("queue", "paused", "concurrency_limit")
        )
        leased = dict(
            JobRecord.objects.using(using)
            .filter(queue__in=limited, state=_S.LEASED)
            .values("queue")
            .annotate(n=Count("sequence"))
            .values_list("queue", "n")
        )
    gates: dict[str, int | None] = {}
    for queue in queues:
        paused, limit = options.get(queue, (False, None))
        gates[queue] = 0 if paused else None if limit is None else max(limit - leased.get(queue, 0), 0)
    return gates


def claim(
    *,
    worker_id: str,
    queues: Sequence[str],
    max_jobs: int,
    lease_duration: timedelta,
    now: datetime,
) -> list[ClaimedJob]:
    """Lease up to ``max_jobs`` (clamped to ``MAX_CLAIM_BATCH``) due jobs, queue-major in the order given.

    Within a queue jobs come by due time, then sequence. Paused queues yield nothing and a
    queue's concurrency limit counts its Leased jobs exactly, across all workers.
    """
    _require_worker_id(worker_id)
    served = _require_queues(queues)
    _require_count("max_jobs", max_jobs)
    require_positive_duration("lease_duration", lease_duration)
    require_aware("now", now)
    settings = get_settings()
    limit = min(max_jobs, settings.max_claim_batch)
    if limit == 0 or not served:
        return []
    using = _db()
    expiry = now + lease_duration
    # A claim that is its own transaction commits without waiting for the disk (see _pg_queue_options).
    own_transaction = _own_transaction(using)
    head: list[ClaimedJob] = []
    if own_transaction and _postgres(using):
        head, limited_from = _retrying(
            lambda: _pg_claim_in_one_flight(
                using, served, limit, worker_id=worker_id, expiry=expiry, now=now, settings=settings
            )
        )
        if limited_from is None or len(head) >= limit:
            return head
        # A queue with a concurrency limit: it and the queues after it are served exactly, below.
        served, limit = served[limited_from:], limit - len(head)

    def body() -> list[ClaimedJob]:
        gates = _queue_gates(using, served, async_commit=own_transaction)
        if _postgres(using):
            claimed: list[ClaimedJob] = []
            for queue in served:
                take = _take(limit - len(claimed), gates[queue])
                if take > 0:
                    claimed += _pg_claim_queue(
                        using, queue, take, worker_id=worker_id, expiry=expiry, now=now, settings=settings
                    )
            return claimed
        uow = _UnitOfWork(settings, now)
        leased: list[tuple[_Row, str, Any]] = []
        for queue in served:
            take = _take(limit - len(leased), gates[queue])
            if take <= 0:
                continue
            candidates = _lock_rows(
                JobRecord.objects.using(using)
                .filter(queue=queue, state=_S.SCHEDULED, due_time__lte=now)
                .order_by("due_time", "sequence")[:take],
                skip_locked=True,
                extra=("wire_name", "payload"),
            )
            for row, (wire_name, payload) in candidates:
                uow.transition(
                    row,
                    _S.LEASED,
                    actor=worker_id,
                    attempt=row.attempt + 1,
                    lease_owner=worker_id,
                    lease_expiry=expiry,
                )
                leased.append((row, wire_name, payload))
        if not leased:
            return []
        uow.flush(using)
        tags = _tags_of(using, [row.sequence for row, _, _ in leased])
        return [
            ClaimedJob(
                job_id=row.job_id,
                wire_name=wire_name,
                queue=row.queue,
                payload=payload,
                attempt=row.attempt,
                due_time=row.due_time,
                lease_owner=worker_id,
                lease_expiry=expiry,
                tags=tags.get(row.sequence, ()),
            )
            for row, wire_name, payload in leased
        ]

    return head + _atomic_retrying(using, body)


def _take(wanted: int, slots: int | None) -> int:
    """How many to claim from a queue: what the batch still wants, within the queue's free slots."""
    return max(wanted if slots is None else min(wanted, slots), 0)


def _tags_of(using: str, sequences: list[int]) -> dict[int, tuple[Any, ...]]:
    result: dict[int, list[Any]] = {}
    rows = (
        JobTag.objects.using(using)
        .filter(job_id__in=sequences)
        .order_by("id")
        .values_list("job_id", "key", "value")
    )
    for sequence, key, value in rows:
        result.setdefault(sequence, []).append(tag_from_pair((key, value)))
    return {sequence: tuple(tags) for sequence, tags in result.items()}


# --- Heartbeat --------------------------------------------------------------------------------


def heartbeat(
    *, worker_id: str, job_ids: Sequence[uuid.UUID], lease_duration: timedelta, now: datetime
) -> list[HeartbeatResult]:
    """Renew every live lease ``worker_id`` holds among ``job_ids``; results in input order.

    A lease that is not renewed (expired, taken over, or the job ended) is lost: the worker
    must abandon that job and report nothing. ``cancel_requested`` carries the cancel flag.
    """
    _require_worker_id(worker_id)
    ids = [_require_uuid("job_ids[]", j) for j in job_ids]
    require_positive_duration("lease_duration", lease_duration)
    require_aware("now", now)
    if not ids:
        return []
    using = _db()

    def body() -> dict[uuid.UUID, tuple[int, bool]]:
        live = {
            job_id: (sequence, flag)
            for sequence, job_id, flag in JobRecord.objects.using(using)
            .filter(job_id__in=set(ids), state=_S.LEASED, lease_owner=worker_id, lease_expiry__gt=now)
            .order_by("sequence")
            .select_for_update()
            .values_list("sequence", "job_id", "cancel_requested")
        }
        if live:
            JobRecord.objects.using(using).filter(sequence__in=[s for s, _ in live.values()]).update(
                lease_expiry=now + lease_duration
            )
        return live

    live = _atomic_retrying(using, body)
    return [
        HeartbeatResult(job_id=j, renewed=j in live, cancel_requested=j in live and live[j][1]) for j in ids
    ]


# --- Outcomes ---------------------------------------------------------------------------------


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
    using = _db()
    if _postgres(using) and len({r.job_id for r in reports}) == len(reports):
        # One statement for the batch. (A batch naming a job twice takes the ORM path, which
        # applies its reports in order.)
        if _own_transaction(using):
            written = _retrying(lambda: _pg_report_in_one_flight(using, reports, now, settings))
            if written is not None:
                return written
        return _atomic_retrying(using, lambda: _pg_report(using, reports, now, settings))

    def body() -> list[OutcomeResult]:
        results: list[OutcomeResult] = []
        rows = {
            row.job_id: row
            for row, _ in _lock_rows(
                JobRecord.objects.using(using)
                .filter(job_id__in={r.job_id for r in reports})
                .order_by("sequence")
            )
        }
        uow = _UnitOfWork(settings, now)
        terminal: list[tuple[_Row, JobState]] = []
        for report in reports:
            row = rows.get(report.job_id)
            if (
                row is None
                or row.state != _S.LEASED
                or row.lease_owner != report.worker_id
                or row.attempt != report.attempt
                or row.lease_expiry is None
                or row.lease_expiry <= now
            ):
                results.append(OutcomeResult.STALE_LEASE)
                continue
            new_state = _apply_outcome(uow, row, report, now)
            if new_state.is_terminal:
                terminal.append((row, new_state))
            if report.added_tags:
                uow.add_tags(row.sequence, normalize_tags(report.added_tags))
            results.append(OutcomeResult.APPLIED)
        _cascade(uow, using, terminal)
        uow.flush(using)
        return results

    return _atomic_retrying(using, body)


def _apply_outcome(uow: _UnitOfWork, row: _Row, report: OutcomeReport, now: datetime) -> JobState:
    outcome = report.outcome
    actor = report.worker_id
    released = {"lease_owner": None, "lease_expiry": None}
    if isinstance(outcome, Success):
        uow.transition(row, _S.SUCCEEDED, actor=actor, terminal_at=now, output=report.output, **released)
        return _S.SUCCEEDED
    if isinstance(outcome, Failure):
        if outcome.next_due_time is not None:
            uow.transition(
                row,
                _S.SCHEDULED,
                actor=actor,
                failure_detail=report.failure_detail,
                due_time=outcome.next_due_time,
                **released,
            )
            return _S.SCHEDULED
        uow.transition(
            row,
            _S.DEAD_LETTERED,
            actor=actor,
            failure_detail=report.failure_detail,
            terminal_at=now,
            terminal_cause=outcome.error,
            **released,
        )
        return _S.DEAD_LETTERED
    if isinstance(outcome, Cancelled):
        uow.transition(
            row,
            _S.CANCELLED,
            actor=actor,
            terminal_at=now,
            terminal_cause=outcome.cause,
            cancel_requested=False,
            **released,
        )
        return _S.CANCELLED
    assert isinstance(outcome, Unroutable)
    uow.transition(
        row, _S.QUARANTINED, actor=actor, terminal_at=now, terminal_cause=outcome.reason, **released
    )
    return _S.QUARANTINED


# --- Lease expiry -----------------------------------------------------------------------------


def expire_leases(*, now: datetime, queues: Sequence[str], retry: RetryPolicy, max_jobs: int = 32) -> int:
    """Dispose up to ``max_jobs`` expired leases in ``queues``: retry them, or dead-letter at the ceiling.

    Concurrent sweeps skip each other's rows, so each lease is disposed exactly once.
    Returns how many were disposed.
    """
    require_aware("now", now)
    served = _require_queues(queues)
    if not isinstance(retry, RetryPolicy):
        raise TypeError(f"retry must be a RetryPolicy, got {type(retry).__name__}")
    _require_count("max_jobs", max_jobs)
    if not served or max_jobs == 0:
        return 0
    settings = get_settings()
    using = _db()

    def body() -> int:
        rows = _lock_rows(
            JobRecord.objects.using(using)
            .filter(queue__in=served, state=_S.LEASED, lease_expiry__lte=now)
            .order_by("lease_expiry", "sequence")[:max_jobs],
            skip_locked=True,
        )
        uow = _UnitOfWork(settings, now)
        terminal: list[tuple[_Row, JobState]] = []
        released = {"lease_owner": None, "lease_expiry": None}
        for row, _ in rows:
            retry_at = retry.next_attempt_at(row.attempt, now)
            if retry_at is not None:
                uow.transition(row, _S.SCHEDULED, actor=LEASE_EXPIRY_ACTOR, due_time=retry_at, **released)
            else:
                uow.transition(
                    row,
                    _S.DEAD_LETTERED,
                    actor=LEASE_EXPIRY_ACTOR,
                    terminal_at=now,
                    terminal_cause=LEASE_EXPIRED_CAUSE.format(attempt=row.attempt),
                    **released,
                )
                terminal.append((row, _S.DEAD_LETTERED))
        _cascade(uow, using, terminal)
        uow.flush(using)
        return len(rows)

    return _atomic_retrying(using, body)


# --- Operator actions -------------------------------------------------------------------------


def cancel_job(job_id: uuid.UUID, *, actor: str, now: datetime) -> CancelResult:
    """Cancel a pending job at once (cascading), or raise the cancel flag of a running one."""
    _require_uuid("job_id", job_id)
    _require_actor(actor)
    require_aware("now", now)
    settings = get_settings()
    using = _db()

    def body() -> CancelResult:
        found = _lock_rows(JobRecord.objects.using(using).filter(job_id=job_id))
        if not found:
            return CancelResult.NOT_CANCELLABLE
        row = found[0][0]
        uow = _UnitOfWork(settings, now)
        if row.state in (_S.SCHEDULED, _S.AWAITING_PARENT):
            uow.transition(row, _S.CANCELLED, actor=actor, terminal_at=now, terminal_cause=actor)
            _cascade(uow, using, [(row, _S.CANCELLED)])
            result = CancelResult.CANCELLED_IMMEDIATELY
        elif row.state == _S.LEASED:
            uow.set(row, cancel_requested=True)
            result = CancelResult.CANCELLATION_REQUESTED
        else:
            return CancelResult.NOT_CANCELLABLE
        uow.flush(using)
        _audit(using, actor, OperatorAction.CANCEL, str(job_id), now)
        return result

    return _atomic_retrying(using, body)


def requeue(job_id: uuid.UUID, *, actor: str, now: datetime) -> RequeueResult:
    """Give a Dead-Lettered or Quarantined job a fresh start: Scheduled, due now, attempt 0."""
    _require_uuid("job_id", job_id)
    _require_actor(actor)
    require_aware("now", now)
    settings = get_settings()
    using = _db()

    def body() -> RequeueResult:
        found = _lock_rows(
            JobRecord.objects.using(using).filter(job_id=job_id, state__in=[_S.DEAD_LETTERED, _S.QUARANTINED])
        )
        if not found:
            return RequeueResult.NOT_REQUEUEABLE
        row = found[0][0]
        uow = _UnitOfWork(settings, now)
        uow.transition(
            row,
            _S.SCHEDULED,
            actor=actor,
            attempt=0,
            due_time=now,
            lease_owner=None,
            lease_expiry=None,
            cancel_requested=False,
            terminal_at=None,
            terminal_cause=None,
        )
        uow.flush(using)
        _audit(using, actor, OperatorAction.REQUEUE, str(job_id), now)
        return RequeueResult.REQUEUED

    return _atomic_retrying(using, body)


def _update_queue_settings(
    queue: str, actor: str, now: datetime, action: OperatorAction, **fields: Any
) -> None:
    validate_queue_name(queue)
    _require_actor(actor)
    require_aware("now", now)
    using = _db()

    def body() -> None:
        _lock_queues(using, [queue], exclusive=True)
        QueueSettings.objects.using(using).update_or_create(queue=queue, defaults=fields)
        _audit(using, actor, action, queue, now)

    _atomic_retrying(using, body)


def pause_queue(queue: str, *, actor: str, now: datetime) -> None:
    """Stop claims from ``queue`` (running jobs carry on); idempotent, always audited."""
    _update_queue_settings(queue, actor, now, OperatorAction.PAUSE_QUEUE, paused=True)


def resume_queue(queue: str, *, actor: str, now: datetime) -> None:
    """Let claims take from ``queue`` again; idempotent, always audited."""
    _update_queue_settings(queue, actor, now, OperatorAction.RESUME_QUEUE, paused=False)


def set_concurrency_limit(queue: str, limit: int | None, *, actor: str, now: datetime) -> None:
    """Cap ``queue`` at ``limit`` Leased jobs across all workers (``None`` clears, 0 blocks)."""
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ValueError(f"limit must be None or an int >= 0, got {limit!r}")
    _update_queue_settings(queue, actor, now, OperatorAction.SET_CONCURRENCY_LIMIT, concurrency_limit=limit)


# --- Retention --------------------------------------------------------------------------------


def purge_terminal(state_class: TerminalStateClass, *, terminal_before: datetime, max_jobs: int = 500) -> int:
    """Delete up to ``max_jobs`` (clamped to ``MAX_PURGE_BATCH``) terminal jobs of ``state_class``.

    Eligible jobs ended at or before ``terminal_before``; the oldest go first. Their transitions,
    tags and any edges in either direction go with them. Returns how many were deleted.
    """
    if not isinstance(state_class, TerminalStateClass):
        raise ValueError(
            f"state_class must be a TerminalStateClass "
            f"({', '.join(TerminalStateClass.names)}), got {state_class!r}"
        )
    require_aware("terminal_before", terminal_before)
    _require_count("max_jobs", max_jobs)
    limit = min(max_jobs, get_settings().max_purge_batch)
    if limit == 0:
        return 0
    using = _db()

    def body() -> int:
        doomed = list(
            JobRecord.objects.using(using)
            .filter(state__in=state_class.states, terminal_at__lte=terminal_before)
            .order_by("terminal_at", "sequence")
            .select_for_update(skip_locked=True)
            .values_list("sequence", flat=True)[:limit]
        )
        if not doomed:
            return 0
        JobTransition.objects.using(using).filter(job_id__in=doomed).delete()
        JobTag.objects.using(using).filter(job_id__in=doomed).delete()
        JobDependency.objects.using(using).filter(Q(parent_id__in=doomed) | Q(child_id__in=doomed)).delete()
        JobRecord.objects.using(using).filter(sequence__in=doomed).delete()
        return len(doomed)

    return _atomic_retrying(using, body)


# --- Worker support ---------------------------------------------------------------------------


def release_leases(*, worker_id: str, job_ids: Sequence[uuid.UUID], now: datetime) -> int:
    """End ``worker_id``'s live leases on ``job_ids`` now, so the next expiry sweep (on any
    worker) retries or dead-letters them. Used by a worker that stops with jobs still running.
    Returns how many leases were released."""
    _require_worker_id(worker_id)
    ids = [_require_uuid("job_ids[]", j) for j in job_ids]
    require_aware("now", now)
    if not ids:
        return 0
    using = _db()

    def body() -> int:
        return (
            JobRecord.objects.using(using)
            .filter(job_id__in=ids, state=_S.LEASED, lease_owner=worker_id, lease_expiry__gt=now)
            .update(lease_expiry=now)
        )

    return _atomic_retrying(using, body)


def job_output(job_id: uuid.UUID) -> Any:
    """The stored output of a job, or None (no such job, or no output); a read."""
    _require_uuid("job_id", job_id)
    return JobRecord.objects.using(_db()).filter(job_id=job_id).values_list("output", flat=True).first()


def register_worker(
    *, worker_id: str, hostname: str, pid: int, queues: Sequence[str], concurrency: int, now: datetime
) -> None:
    """Record a running worker process for the console."""
    _require_worker_id(worker_id)
    require_aware("now", now)
    WorkerNode.objects.using(_db()).update_or_create(
        worker_id=worker_id,
        defaults={
            "hostname": hostname,
            "pid": pid,
            "queues": list(queues),
            "concurrency": concurrency,
            "started_at": now,
            "last_seen_at": now,
        },
    )


def touch_worker(worker_id: str, *, now: datetime) -> None:
    """Refresh a worker's ``last_seen_at`` (on every heartbeat round)."""
    require_aware("now", now)
    WorkerNode.objects.using(_db()).filter(worker_id=worker_id).update(last_seen_at=now)


def unregister_worker(worker_id: str) -> None:
    WorkerNode.objects.using(_db()).filter(worker_id=worker_id).delete()


def prune_workers(*, seen_before: datetime) -> int:
    """Delete the rows of workers not seen since ``seen_before`` (crashed or killed processes)."""
    require_aware("seen_before", seen_before)
    deleted, _ = WorkerNode.objects.using(_db()).filter(last_seen_at__lt=seen_before).delete()
    return deleted


# --- PostgreSQL fast paths --------------------------------------------------------------------
#
# The hot operations (claim, outcomes) as one data-modifying CTE each, so a batch of 32 costs one
# round trip instead of one per table. They do exactly what the ORM paths above do (the same
# tests run against both: PostgreSQL takes these, SQLite and MariaDB the ORM paths) and are
# chosen only for PostgreSQL with client-side parameter binding (Django's default), which the
# multi-statement queue gate needs.


def _postgres(using: str) -> bool:
    """Whether this module's PostgreSQL statements apply: Django's PostgreSQL backend on psycopg 3,
    binding parameters on the client (Django's default). Otherwise (psycopg2, or the
    ``server_side_binding`` option) the ORM path does the same work."""
    connection = connections[using]
    if connection.vendor != "postgresql" or connection.settings_dict.get("OPTIONS", {}).get(
        "server_side_binding"
    ):
        return False
    from django.db.backends.postgresql.psycopg_any import is_psycopg3

    return is_psycopg3


def _tables() -> dict[str, str]:
    return {
        "jobs": JobRecord._meta.db_table,
        "transitions": JobTransition._meta.db_table,
        "tags": JobTag._meta.db_table,
        "edges": JobDependency._meta.db_table,
        "queues": QueueSettings._meta.db_table,
    }


def _pg_queue_options(
    using: str, queues: list[str], *, async_commit: bool
) -> dict[str, tuple[bool, int | None]]:
    """Open a claim: commit without waiting for the WAL flush, take the shared queue locks and
    read the queues' settings, in one round trip.

    Three statements in one string: the settings are read by the last, whose snapshot is taken
    after the locks were acquired.

    A claim's durability is not needed for any guarantee, so its commit does not wait for the
    disk (``SET LOCAL synchronous_commit = off``, this transaction only). If PostgreSQL crashes
    and loses a claim that a worker already acted on, the job is simply Scheduled again, as if
    the claim had never happened: the worker's outcome for it is fenced off (the job is not
    Leased by it), and the job runs again, which at-least-once execution allows. Outcomes,
    enqueues and operator actions keep waiting for the flush. A claim made inside the caller's
    own transaction leaves that transaction's commit alone (``async_commit=False``).
    """
    calls, params = _queue_lock_calls(queues, exclusive=False)
    table = _tables()["queues"]
    sql = (
        ("SET LOCAL synchronous_commit = off; " if async_commit else "")
        + f"SELECT {calls}; SELECT queue, paused, concurrency_limit FROM {table} WHERE queue = ANY(%s)"
    )
    with connections[using].cursor() as cursor:
        cursor.execute(sql, [*params, queues])
        for _ in range(2 if async_commit else 1):
            cursor.nextset()
        return {queue: (paused, limit) for queue, paused, limit in cursor.fetchall()}


_PG_CLAIM = """
WITH picked AS (
    SELECT sequence FROM {jobs}
    WHERE queue = %(queue)s AND state = 0 AND due_time <= %(now)s
    ORDER BY due_time, sequence
    LIMIT %(take)s
    FOR UPDATE SKIP LOCKED
), leased AS (
    UPDATE {jobs} AS j
    SET state = 2, attempt = j.attempt + 1, lease_owner = %(worker)s, lease_expiry = %(expiry)s,
        next_ordinal = j.next_ordinal + 1
    -- ANY(ARRAY(…)) rather than a join: a prepared statement's generic plan guesses the LIMIT
    -- at a tenth of the table and would hash-join a full scan; an array probes the primary key.
    WHERE j.sequence = ANY(ARRAY(SELECT sequence FROM picked))
    RETURNING j.sequence, j.job_id, j.wire_name, j.queue, j.payload, j.attempt, j.due_time,
              j.next_ordinal - 1 AS ordinal
), logged AS (
    INSERT INTO {transitions} (job_id, ordinal, recorded_at, state, attempt, failure_detail, actor)
    SELECT sequence, ordinal, %(now)s, 2, attempt, NULL, %(worker)s FROM leased WHERE %(history)s
), trimmed AS (
    DELETE FROM {transitions} AS t
    USING (SELECT sequence, ordinal FROM leased WHERE ordinal >= %(cap)s) AS l
    WHERE %(history)s AND t.job_id = l.sequence AND t.ordinal <= l.ordinal - %(cap)s
      AND t.job_id = ANY(ARRAY(SELECT sequence FROM leased WHERE ordinal >= %(cap)s))
)
SELECT l.job_id, l.wire_name, l.queue, l.payload, l.attempt, l.due_time,
       (SELECT json_agg(json_build_array(t.key, t.value) ORDER BY t.id) FROM {tags} AS t
        WHERE t.job_id = l.sequence)
FROM leased AS l
ORDER BY l.due_time, l.sequence
"""


def _pg_claim_queue(
    using: str,
    queue: str,
    take: int,
    *,
    worker_id: str,
    expiry: datetime,
    now: datetime,
    settings: BackWaveSettings,
) -> list[ClaimedJob]:
    params = {**_pg_claim_params(take, worker_id, expiry, now, settings), "queue": queue}
    rows = _pg_fetch_prepared(using, _PG_CLAIM.format(**_tables()), params)
    return _claimed_jobs(rows, worker_id, expiry)


def _pg_claim_params(
    take: int, worker_id: str, expiry: datetime, now: datetime, settings: BackWaveSettings
) -> dict[str, Any]:
    """The parameters a claim statement shares across queues (``queue`` is added per statement)."""
    return {
        "now": now,
        "take": take,
        "worker": worker_id,
        "expiry": expiry,
        "history": settings.history is not HistoryPolicy.OFF,
        "cap": settings.max_transitions_per_job,
    }


# The claim as sent in one flight: the LIMIT is worked out in the statement, from the queue
# settings it reads (its snapshot is taken after the flight's earlier statement took the queue
# locks) and from what the flight's claims for earlier queues have leased (rows of this
# transaction: their version was written by it).
_PG_CLAIM_GATED = _PG_CLAIM.replace(
    "LIMIT %(take)s",
    """LIMIT (
        SELECT CASE
            WHEN coalesce(bool_or(s.paused) FILTER (WHERE s.queue = %(queue)s), false) THEN 0
            -- A limited queue (this one or an earlier one) is served by the exact path, not here.
            WHEN coalesce(bool_or(s.concurrency_limit IS NOT NULL AND NOT s.paused), false) THEN 0
            ELSE greatest(%(take)s - (
                SELECT count(*) FROM {jobs} AS e
                WHERE e.state = 2 AND e.queue = ANY(%(before)s) AND e.lease_expiry = %(expiry)s
                  AND e.lease_owner = %(worker)s AND e.xmin = pg_current_xact_id_if_assigned()::xid
            ), 0)
        END
        FROM {queues} AS s WHERE s.queue = ANY(%(through)s)
    )""",
)


def _pg_claim_in_one_flight(
    using: str,
    queues: list[str],
    take: int,
    *,
    worker_id: str,
    expiry: datetime,
    now: datetime,
    settings: BackWaveSettings,
) -> tuple[list[ClaimedJob], int | None]:
    """A claim that is its own transaction, sent to PostgreSQL in one round trip.

    ``BEGIN``, the asynchronous commit and the shared queue locks (with a look at which queues
    are limited), one claim statement per queue and ``COMMIT`` go out together in psycopg's
    pipeline mode, and the server runs them in order; the worker waits once instead of four
    times. Each claim statement works out its own batch size (paused queues take nothing, and
    later queues take what earlier ones left). Queues with a concurrency limit need the exact, locked count of
    :func:`_queue_gates`: the flight takes nothing from the first such queue on, and returns its
    index so that :func:`claim` serves the rest in a transaction of the classic shape.
    """
    tables = _tables()
    locks, lock_params = _queue_lock_calls(queues, exclusive=False)
    claim_sql = _PG_CLAIM_GATED.format(**tables)
    common = _pg_claim_params(take, worker_id, expiry, now, settings)
    with _pg_by_hand(using) as (pipeline, cursor):
        control, gates, *claims = (cursor() for _ in range(2 + len(queues)))
        with pipeline():
            control.execute("BEGIN")
            # Which queues are limited, read beside the locks: this snapshot may predate a change
            # the locks waited for, so it only picks the path; the claim statements' own, later
            # reads decide what is leased (a queue they see limited or paused yields nothing).
            gates.execute(
                f"SELECT set_config('synchronous_commit', 'off', true), {locks}, ARRAY("
                f"SELECT queue FROM {tables['queues']} WHERE queue = ANY(%s)"
                " AND concurrency_limit IS NOT NULL AND NOT paused)",
                [*lock_params, queues],
            )
            for index, (queue, claim_cursor) in enumerate(zip(queues, claims, strict=True)):
                bounds = {"before": queues[:index], "through": queues[: index + 1]}
                claim_cursor.execute(claim_sql, {**common, "queue": queue, **bounds})
            control.execute("COMMIT")
        limited = set(gates.fetchone()[-1])
        claimed = [job for c in claims for job in _claimed_jobs(c.fetchall(), worker_id, expiry)]
    limited_from = next((index for index, queue in enumerate(queues) if queue in limited), None)
    return claimed, limited_from


@contextmanager
def _pg_by_hand(using: str) -> Iterator[tuple[Callable[[], Any], Callable[[], Any]]]:
    """A transaction that a hot-path function begins and ends itself, with SQL, so that several
    statements can go to the server in one round trip: yields psycopg's ``pipeline`` context of
    the connection and a factory of (Django-wrapped) cursors on it.

    Only for a transaction of its own (never inside the caller's ``atomic()``: Django's
    connection stays in autocommit mode throughout, and nothing here uses savepoints). Errors come
    out as Django's database exceptions; a transaction left open by one is rolled back.
    """
    import psycopg  # only PostgreSQL projects have it

    connection = connections[using]
    connection.ensure_connection()
    raw: Any = connection.connection
    with connection.wrap_database_errors:
        try:
            yield raw.pipeline, lambda: _wrapped(connection, psycopg.Cursor(raw))
        except BaseException:
            if raw.pgconn.transaction_status in (
                psycopg.pq.TransactionStatus.INTRANS,
                psycopg.pq.TransactionStatus.INERROR,
            ):
                raw.execute("ROLLBACK")
            raise


def _claimed_jobs(rows: list[tuple[Any, ...]], worker_id: str, expiry: datetime) -> list[ClaimedJob]:
    return [
        ClaimedJob(
            job_id=job_id,
            wire_name=wire_name,
            queue=queue_name,
            payload=json.loads(payload) if isinstance(payload, str) else payload,
            attempt=attempt,
            due_time=due_time,
            lease_owner=worker_id,
            lease_expiry=expiry,
            tags=tuple(tag_from_pair((k, v)) for k, v in _json(tags)) if tags else (),
        )
        for job_id, wire_name, queue_name, payload, attempt, due_time, tags in rows
    ]


def _pg_fetch_prepared(using: str, sql: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
    """Run one of the hot-path statements with server-side parameters, and fetch its rows."""
    with _pg_server_cursor(using) as cursor:
        cursor.execute(sql, params)
        rows: list[tuple[Any, ...]] = cursor.fetchall()
        return rows


#: Above this many parameters a statement is bound on the client (the protocol allows 65,535).
_SERVER_SIDE_PARAMS_MAX = 10_000


@contextmanager
def _pg_server_cursor(using: str) -> Iterator[Any]:
    """A cursor on the same connection (so in the same transaction) that binds on the server.

    Django's cursors bind parameters on the client, which for the hot-path statements means
    quoting every value into SQL text on each call and planning the query afresh on the server.
    A plain psycopg cursor sends the parameters separately; psycopg then prepares the statement
    after ``prepare_threshold`` executions (Django's default, None, never prepares; 5 is psycopg's
    own default; leave it None behind PgBouncer in transaction mode), so the server plans it once
    per connection. It is wrapped like Django's own cursors: execute wrappers, ``connection.queries``
    under DEBUG, ``assertNumQueries`` and Django's database exceptions all see it.
    """
    import psycopg  # only PostgreSQL projects have it

    connection = connections[using]
    connection.ensure_connection()
    with _wrapped(connection, psycopg.Cursor(connection.connection)) as cursor:
        yield cursor


def _wrapped(connection: Any, raw: Any) -> Any:
    """A psycopg cursor wrapped like Django's own (execute wrappers, DEBUG's query log, error
    translation). (django-stubs type the wrappers for Django's own cursors only.)"""
    return connection.make_debug_cursor(raw) if connection.queries_logged else connection.make_cursor(raw)


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


_PG_REPORT = """
WITH input AS (
    SELECT * FROM jsonb_to_recordset(%(batch)s::jsonb) AS i (
        job_id uuid, worker_id text, attempt int, state smallint, due_time timestamptz, cause text,
        output jsonb, detail text, clear_cancel bool
    )
), locked AS (
    -- Lock the reported rows by job_id (the unique index) in sequence order, and judge the fence
    -- on the locked, current row version: Leased, same owner and attempt, lease still live.
    SELECT j.sequence, i.*,
           (j.state = 2 AND j.lease_owner = i.worker_id AND j.attempt = i.attempt
            AND j.lease_expiry > %(now)s) AS fenced_in
    FROM {jobs} AS j JOIN input AS i ON i.job_id = j.job_id
    -- The planner cannot see how many rows the JSON holds (it guesses 100) and would scan the
    -- whole table for the join; naming the ids as an array makes it probe the unique index.
    WHERE j.job_id = ANY(ARRAY(SELECT job_id FROM input))
    ORDER BY j.sequence
    FOR UPDATE OF j
), applied AS (
    UPDATE {jobs} AS j SET
        state = f.state,
        lease_owner = NULL,
        lease_expiry = NULL,
        due_time = CASE WHEN f.state = 0 THEN f.due_time ELSE j.due_time END,
        terminal_at = CASE WHEN f.state >= 3 THEN %(now)s ELSE j.terminal_at END,
        terminal_cause = CASE WHEN f.state >= 3 THEN f.cause ELSE j.terminal_cause END,
        output = CASE WHEN f.state = 3 THEN f.output ELSE j.output END,
        cancel_requested = j.cancel_requested AND NOT f.clear_cancel,
        next_ordinal = j.next_ordinal + 1
    FROM locked AS f
    WHERE j.sequence = f.sequence AND f.fenced_in
    RETURNING j.sequence, j.job_id, j.state, j.attempt, j.next_ordinal - 1 AS ordinal, f.detail, f.worker_id
), logged AS (
    INSERT INTO {transitions} (job_id, ordinal, recorded_at, state, attempt, failure_detail, actor)
    SELECT sequence, ordinal, %(now)s, state, attempt, detail, worker_id FROM applied WHERE %(history)s
), trimmed AS (
    DELETE FROM {transitions} AS t
    USING (SELECT sequence, ordinal FROM applied WHERE ordinal >= %(cap)s) AS a
    WHERE %(history)s AND t.job_id = a.sequence AND t.ordinal <= a.ordinal - %(cap)s
      AND t.job_id = ANY(ARRAY(SELECT sequence FROM applied WHERE ordinal >= %(cap)s))
){tagging}
SELECT a.job_id, a.sequence, a.state FROM applied AS a
"""

# Which of the jobs that just ended have waiting children. A statement of its own, on purpose: the
# report statement may have waited for a parent's row lock held by an enqueue that then committed
# a new edge to it; that statement's snapshot predates the edge, a new statement's does not (and the
# parent's row lock, held until commit, keeps any later enqueue from adding one).
_PG_PARENTS_WITH_CHILDREN = "SELECT DISTINCT parent_id FROM {edges} WHERE parent_id = ANY(%(ended)s)"

_PG_REPORT_TAGS = """, tagged AS (
    INSERT INTO {tags} (job_id, key, value)
    SELECT a.sequence, x.key, x.value
    FROM applied AS a
    JOIN jsonb_to_recordset(%(tags)s::jsonb) AS x (job_id uuid, key text, value text) ON x.job_id = a.job_id
    ON CONFLICT (job_id, key, value) DO NOTHING
)"""


def _pg_report_statement(
    reports: list[OutcomeReport], now: datetime, settings: BackWaveSettings
) -> tuple[str, dict[str, Any]]:
    # The batch travels as one JSON document (C-encoded here, parsed by jsonb_to_recordset):
    # far cheaper than quoting nine arrays of values in Python.
    keep_detail = settings.history is HistoryPolicy.TRANSITIONS_AND_FAILURE_DETAIL
    batch: list[dict[str, Any]] = []
    tags: list[dict[str, str]] = []
    for report in reports:
        state, due, cause, clear = _outcome_columns(report)
        row: dict[str, Any] = {
            "job_id": str(report.job_id),
            "worker_id": report.worker_id,
            "attempt": report.attempt,
            "state": int(state),
            "clear_cancel": clear,
        }
        if due is not None:
            row["due_time"] = due.isoformat()
        if cause is not None:
            row["cause"] = cause
        if state == _S.SUCCEEDED and report.output is not None:
            row["output"] = report.output
        if isinstance(report.outcome, Failure) and keep_detail and report.failure_detail is not None:
            row["detail"] = truncate_utf8(report.failure_detail, settings.max_failure_detail_bytes)
        batch.append(row)
        tags.extend(
            {"job_id": row["job_id"], "key": key, "value": value}
            for key, value in normalize_tags(report.added_tags)
        )
    tables = _tables()
    tagging = _PG_REPORT_TAGS.format(**tables) if tags else ""
    sql = _PG_REPORT.format(tagging=tagging, **tables)
    params: dict[str, Any] = {
        "now": now,
        "history": settings.history is not HistoryPolicy.OFF,
        "cap": settings.max_transitions_per_job,
        "batch": json.dumps(batch),
        **({"tags": json.dumps(tags)} if tags else {}),
    }
    return sql, params


def _pg_report(
    using: str, reports: list[OutcomeReport], now: datetime, settings: BackWaveSettings
) -> list[OutcomeResult]:
    rows = _pg_fetch_prepared(using, *_pg_report_statement(reports, now, settings))
    ended = [sequence for _, sequence, state in rows if state >= _S.SUCCEEDED]
    with_children: set[int] = set()
    if ended:
        query = _PG_PARENTS_WITH_CHILDREN.format(**_tables())
        with_children = {parent for (parent,) in _pg_fetch_prepared(using, query, {"ended": ended})}
    # Parents that just ended and have waiting children: resolve their latches (rare; the ORM path).
    parents = [
        (_Row(sequence, job_id, "", state, 0, now, None, None, False, 0, 0, 0), _S(state))
        for job_id, sequence, state in rows
        if sequence in with_children
    ]
    if parents:
        parents.sort(key=lambda entry: entry[0].sequence)
        uow = _UnitOfWork(settings, now)
        _cascade(uow, using, parents)
        uow.flush(using)
    return _report_results(reports, rows)


def _report_results(reports: list[OutcomeReport], rows: list[tuple[Any, ...]]) -> list[OutcomeResult]:
    applied = {job_id for job_id, _, _ in rows}
    return [OutcomeResult.APPLIED if r.job_id in applied else OutcomeResult.STALE_LEASE for r in reports]


# The flight's check for waiting children: the reported jobs that this transaction (top level, no
# savepoints: see _pg_by_hand) just ended, and that are parents. A statement of its own, after the
# report statement, for the reason given at _PG_PARENTS_WITH_CHILDREN.
_PG_ENDED_WITH_CHILDREN = """
SELECT 1 FROM {jobs} AS j
WHERE j.job_id = ANY(%(ids)s) AND j.state >= 3 AND j.xmin = pg_current_xact_id_if_assigned()::xid
  AND EXISTS (SELECT 1 FROM {edges} AS d WHERE d.parent_id = j.sequence)
LIMIT 1
"""


def _pg_report_in_one_flight(
    using: str, reports: list[OutcomeReport], now: datetime, settings: BackWaveSettings
) -> list[OutcomeResult] | None:
    """An outcome batch that is its own transaction, in two round trips instead of four.

    ``BEGIN``, the report statement and the check for waiting children go out together; the
    ``COMMIT`` follows once the check has found none. When a job that just ended has waiting
    children (its dependents' latches must be resolved in the same transaction, through the
    ORM), the flight is rolled back and None returned: :func:`report_outcomes` then writes the
    batch in a transaction of the classic shape.
    """
    sql, params = _pg_report_statement(reports, now, settings)
    check = _PG_ENDED_WITH_CHILDREN.format(**_tables())
    with _pg_by_hand(using) as (pipeline, cursor):
        control, report, parents = cursor(), cursor(), cursor()
        with pipeline():
            control.execute("BEGIN")
            report.execute(sql, params)
            parents.execute(check, {"ids": [r.job_id for r in reports]})
        if parents.fetchall():
            control.execute("ROLLBACK")
            return None
        rows = report.fetchall()
        control.execute("COMMIT")
    return _report_results(reports, rows)


def _outcome_columns(report: OutcomeReport) -> tuple[JobState, datetime | None, str | None, bool]:
    """(new state, retry due time, terminal cause, clears the cancel flag) of an outcome."""
    outcome = report.outcome
    if isinstance(outcome, Success):
        return _S.SUCCEEDED, None, None, False
    if isinstance(outcome, Failure):
        if outcome.next_due_time is not None:
            return _S.SCHEDULED, outcome.next_due_time, None, False
        return _S.DEAD_LETTERED, None, outcome.error, False
    if isinstance(outcome, Cancelled):
        return _S.CANCELLED, None, outcome.cause, True
    assert isinstance(outcome, Unroutable)
    return _S.QUARANTINED, None, outcome.reason, False


_PG_ENQUEUE = """
WITH inserted AS (
    INSERT INTO {jobs} (job_id, wire_name, queue, payload, due_time, mode, state, attempt, cancel_requested,
                        parents_remaining, enqueued_at, next_ordinal)
    VALUES {values}
    ON CONFLICT (job_id) DO NOTHING
    RETURNING sequence, job_id, queue, due_time
), logged AS (
    INSERT INTO {transitions} (job_id, ordinal, recorded_at, state, attempt, failure_detail, actor)
    SELECT sequence, 0, %(now)s, 0, 0, NULL, %(actor)s FROM inserted WHERE %(history)s
){tagging}, hinted AS (
    SELECT pg_notify(%(channel)s, queue)
    FROM (SELECT DISTINCT queue FROM inserted WHERE due_time <= %(now)s) AS due
)
SELECT job_id, (SELECT count(*) FROM hinted) FROM inserted
"""

_PG_ENQUEUE_TAGS = """, tagged AS (
    INSERT INTO {tags} (job_id, key, value)
    SELECT i.sequence, x.key, x.value
    FROM inserted AS i JOIN (VALUES {tag_values}) AS x (job_id, key, value) ON x.job_id = i.job_id
)"""


def _pg_enqueue_without_parents(
    using: str,
    jobs: list[NewJob],
    results: list[EnqueueResult | None],
    now: datetime,
    settings: BackWaveSettings,
) -> list[EnqueueResult]:
    """Insert jobs that have no parents in one statement (atomic by itself, so it needs no
    transaction of its own and simply joins the caller's). A job id already stored, or repeated
    earlier in the batch, is a DUPLICATE."""
    params: dict[str, Any] = {
        "now": now,
        "actor": ENQUEUE_ACTOR,
        "history": settings.history is not HistoryPolicy.OFF,
        "channel": HINT_CHANNEL,
    }
    values: list[str] = []
    tag_values: list[str] = []
    first: dict[uuid.UUID, int] = {}
    for i, (new_job, result) in enumerate(zip(jobs, results, strict=True)):
        if result is not None or new_job.job_id in first:
            continue
        first[new_job.job_id] = i
        params.update(
            {
                f"id{i}": new_job.job_id,
                f"wire{i}": new_job.wire_name,
                f"queue{i}": new_job.queue,
                f"payload{i}": new_job.payload_json.decode(),
                f"due{i}": new_job.due_time,
                f"mode{i}": int(new_job.mode),
            }
        )
        # Rows are inserted in list order, so the first of two equal ids is the one stored.
        values.append(
            f"(%(id{i})s, %(wire{i})s, %(queue{i})s, %(payload{i})s::jsonb, %(due{i})s, %(mode{i})s, "
            "0, 0, false, 0, %(now)s, 1)"
        )
        for k, (key, value) in enumerate(new_job.tag_pairs):
            params.update({f"tk{i}_{k}": key, f"tv{i}_{k}": value})
            tag_values.append(f"(%(id{i})s::uuid, %(tk{i}_{k})s, %(tv{i}_{k})s)")
    if values:
        tables = _tables()
        tagging = _PG_ENQUEUE_TAGS.format(tag_values=", ".join(tag_values), **tables) if tag_values else ""
        sql = _PG_ENQUEUE.format(values=", ".join(values), tagging=tagging, **tables)
        if len(params) <= _SERVER_SIDE_PARAMS_MAX:
            rows = _pg_fetch_prepared(using, sql, params)
        else:
            with connections[using].cursor() as cursor:
                cursor.execute(sql, params)
                rows = cursor.fetchall()
        inserted = {job_id for job_id, _ in rows}
    else:
        inserted = set()
    return [
        result
        if result is not None
        else EnqueueResult.OK
        if first.get(new_job.job_id) == i and new_job.job_id in inserted
        else EnqueueResult.DUPLICATE
        for i, (new_job, result) in enumerate(zip(jobs, results, strict=True))
    ]


# --- Recurring schedules ----------------------------------------------------------------------


def upsert_schedule(
    spec: ScheduleSpec, *, now: datetime, declared_in_settings: bool = False, actor: str | None = None
) -> None:
    """Create a schedule, or redefine it in place keeping its cursor and skipped ticks.

    The cron and zone are validated first (``ValueError``, nothing stored). A new schedule's
    cursor starts at ``now``: only ticks strictly after it are ever minted. With an ``actor`` (an
    operator's save) one ``save_schedule`` audit row is written in the same transaction.
    """
    if not isinstance(spec, ScheduleSpec):
        raise TypeError(f"spec must be a ScheduleSpec, got {type(spec).__name__}")
    require_aware("now", now)
    if actor is not None:
        _require_actor(actor)
    settings = get_settings()
    cron = resolve_schedule(spec.cron, spec.time_zone)
    if len(spec.wire_name) > settings.max_wire_name_length:
        raise ValueError(
            f"wire name '{spec.wire_name[:40]}…' is {len(spec.wire_name):,} characters; "
            f"MAX_WIRE_NAME_LENGTH is {settings.max_wire_name_length:,}"
        )
    definition = {
        "cron": cron.canonical,
        "wire_name": spec.wire_name,
        "payload": spec.payload,
        "queue": spec.queue,
        "time_zone": spec.time_zone,
        "catch_up": spec.catch_up,
        "no_overlap": spec.no_overlap,
        "declared_in_settings": declared_in_settings,
    }
    using = _db()

    def body() -> None:
        RecurringSchedule.objects.using(using).update_or_create(
            schedule_id=spec.schedule_id,
            defaults=definition,  # a redefinition keeps the cursor and the skipped ticks
            create_defaults={**definition, "cursor": now, "skipped_ticks": []},
        )
        if actor is not None:
            _audit(using, actor, OperatorAction.SAVE_SCHEDULE, spec.schedule_id, now)

    _atomic_retrying(using, body)


def resolve_schedule(cron: str, time_zone: str | None) -> CronExpression:
    """The parsed cron, after checking that it and the zone resolve; ``ValueError`` otherwise."""
    planner.resolve(cron, time_zone)
    return CronExpression.parse(cron)


def remove_schedule(schedule_id: str, *, actor: str | None = None, now: datetime | None = None) -> bool:
    """Stop a schedule. Instances already minted are untouched and keep their ``schedule_id``.

    Returns whether a schedule was removed. With an ``actor`` (an operator's removal; ``now`` is
    then required) a removal writes one ``remove_schedule`` audit row in the same transaction.
    """
    if actor is not None:
        _require_actor(actor)
        if now is None:
            raise ValueError("remove_schedule needs now= when an actor is given (the audit's instant)")
    if now is not None:
        require_aware("now", now)
    using = _db()

    def body() -> bool:
        deleted, _ = RecurringSchedule.objects.using(using).filter(schedule_id=schedule_id).delete()
        if deleted and actor is not None and now is not None:
            _audit(using, actor, OperatorAction.REMOVE_SCHEDULE, schedule_id, now)
        return bool(deleted)

    return _atomic_retrying(using, body)


def prune_settings_schedules(declared: Iterable[str]) -> list[str]:
    """Remove the settings-declared schedules whose ids are not in ``declared``; returns their ids."""
    stale = (
        RecurringSchedule.objects.using(_db())
        .filter(declared_in_settings=True)
        .exclude(schedule_id__in=list(declared))
    )
    removed = sorted(stale.values_list("schedule_id", flat=True))
    stale.delete()
    return removed


_reported_schedule_errors: set[tuple[str, str, str | None]] = set()


def mint_due(*, now: datetime) -> int:
    """Plan every schedule at ``now`` and apply each decision in its own transaction.

    A decision applies only if the schedule's cursor is still the one it was planned from
    (compare-and-set), and instance ids are a function of (schedule, tick): any number of workers
    minting at once create each instance exactly once. A schedule whose cron or zone no longer
    resolves is skipped. Returns how many jobs were minted.
    """
    require_aware("now", now)
    settings = get_settings()
    using = _db()
    live = set(
        JobRecord.objects.using(using)
        .filter(schedule_id__isnull=False, state__in=[s.value for s in JobState if not s.is_terminal])
        .values_list("schedule_id", flat=True)
        .distinct()
    )
    snapshots = [
        planner.ScheduleSnapshot(
            schedule_id=schedule_id,
            cron=cron,
            time_zone=time_zone,
            cursor=cursor,
            catch_up=CatchUp(catch_up),
            no_overlap=no_overlap,
            has_live_instance=schedule_id in live,
        )
        for schedule_id, cron, time_zone, cursor, catch_up, no_overlap in RecurringSchedule.objects.using(
            using
        ).values_list("schedule_id", "cron", "time_zone", "cursor", "catch_up", "no_overlap")
    ]
    for snapshot in snapshots:
        error = planner.schedule_error(snapshot.cron, snapshot.time_zone)
        key = (snapshot.schedule_id, snapshot.cron, snapshot.time_zone)
        if error is not None and key not in _reported_schedule_errors:
            _reported_schedule_errors.add(key)  # logged once per process, skipped every time
            logger.error("Schedule %r is skipped: %s", snapshot.schedule_id, error)
    minted = 0
    for decision in planner.plan_all(snapshots, now):
        minted += _atomic_retrying(using, lambda d=decision: _apply_mint(using, d, settings))  # type: ignore[misc]
    return minted


def _apply_mint(using: str, decision: planner.MintDecision, settings: BackWaveSettings) -> int:
    row = (
        RecurringSchedule.objects.using(using)
        .select_for_update()
        .filter(schedule_id=decision.schedule_id, cursor=decision.expected_cursor)
        .values_list("skipped_ticks", flat=True)
        .first()
    )
    if row is None:
        return 0  # another worker applied this decision first, or the schedule was removed
    skipped = [*(row or []), *(t.astimezone(UTC).isoformat() for t in decision.skipped_ticks)]
    RecurringSchedule.objects.using(using).filter(schedule_id=decision.schedule_id).update(
        cursor=decision.new_cursor, skipped_ticks=skipped[-settings.max_recorded_skipped_ticks :]
    )
    actor = SCHEDULE_ACTOR.format(schedule_id=decision.schedule_id)
    return _insert_instances(using, decision.schedule_id, list(decision.ticks), actor, settings)


def _insert_instances(
    using: str,
    schedule_id: str,
    ticks: list[datetime],
    actor: str,
    settings: BackWaveSettings,
    *,
    recorded_at: datetime | None = None,
) -> int:
    """Insert one Scheduled instance per tick (due at the tick); an id already present is skipped.

    Each instance's transition is recorded at its tick, or at ``recorded_at`` when given.
    """
    if not ticks:
        return 0
    wire_name, payload, queue = (
        RecurringSchedule.objects.using(using)
        .filter(schedule_id=schedule_id)
        .values_list("wire_name", "payload", "queue")
        .get()
    )
    ids = {tick: planner.instance_id(schedule_id, tick) for tick in ticks}
    present = set(
        JobRecord.objects.using(using).filter(job_id__in=ids.values()).values_list("job_id", flat=True)
    )
    fresh = [tick for tick in ticks if ids[tick] not in present]
    created = JobRecord.objects.using(using).bulk_create(
        [
            JobRecord(
                job_id=ids[tick],
                wire_name=wire_name,
                queue=queue,
                payload=payload,
                state=_S.SCHEDULED,
                due_time=tick,
                schedule_id=schedule_id,
                enqueued_at=recorded_at or tick,
                next_ordinal=1,
            )
            for tick in fresh
        ]
    )
    if settings.history is not HistoryPolicy.OFF and created:
        sequences = dict(
            JobRecord.objects.using(using)
            .filter(job_id__in=[ids[t] for t in fresh])
            .values_list("job_id", "sequence")
        )
        JobTransition.objects.using(using).bulk_create(
            [
                JobTransition(
                    job_id=sequences[ids[tick]],
                    ordinal=0,
                    recorded_at=recorded_at or tick,
                    state=_S.SCHEDULED,
                    attempt=0,
                    actor=actor,
                )
                for tick in fresh
            ]
        )
    if fresh:
        _notify(using, queue)
    return len(fresh)


def trigger_schedule(schedule_id: str, *, actor: str, now: datetime) -> TriggerScheduleResult:
    """Mint one instance of the schedule due now, ignoring no-overlap and leaving the cursor.

    The instance id is that of a tick at ``now``, so triggering twice at the same instant (or at
    the exact instant of a tick that is also minted) creates one job. Audited when found.
    """
    _require_actor(actor)
    require_aware("now", now)
    settings = get_settings()
    using = _db()

    def body() -> TriggerScheduleResult:
        found = (
            RecurringSchedule.objects.using(using)
            .select_for_update()
            .filter(schedule_id=schedule_id)
            .exists()
        )
        if not found:
            return TriggerScheduleResult.SCHEDULE_NOT_FOUND
        _insert_instances(using, schedule_id, [now], actor, settings, recorded_at=now)
        _audit(using, actor, OperatorAction.TRIGGER_SCHEDULE, schedule_id, now)
        return TriggerScheduleResult.TRIGGERED

    return _atomic_retrying(using, body)
