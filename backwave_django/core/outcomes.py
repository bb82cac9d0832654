"""The value types of the storage contract: what goes into the store and what comes out.

All are frozen, keyword-only dataclasses that validate their own shape on construction, so a
malformed call fails before any database work with a message naming the argument.
"""

from __future__ import annotations

import uuid
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, TypeAlias

from .encoding import json_bytes
from .frozen import copy_unchecked
from .limits import WHOLE_LIMIT, LimitKeys, lane_of, require_bucket
from .policy import resolve_policy
from .states import CatchUp, DependencyMode, JobState
from .tags import Tag, TagPair, normalize_tags, tag_from_pair
from .unique import UniqueKey
from .validation import (
    require_aware,
    require_str as _require_str,
    require_trace_context,
    require_uuid as _require_uuid,
    validate_queue_name,
    validate_schedule_id,
)

__all__ = [
    "OUTCOME_TYPES",
    "PREPARED_NOT_DUE",
    "Cancelled",
    "ClaimedJob",
    "Failure",
    "HeartbeatResult",
    "NewJob",
    "Outcome",
    "OutcomeEffect",
    "OutcomeReport",
    "ScheduleSpec",
    "Snoozed",
    "Success",
    "Unroutable",
    "outcome_effect",
]


def _require_json(name: str, value: object) -> None:
    try:
        json_bytes(value)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be JSON-serializable: {exc}") from None


# --- Outcomes ---------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Success:
    """The handler finished; the job becomes Succeeded."""


@dataclass(frozen=True, kw_only=True)
class Failure:
    """The handler failed: retry at ``next_due_time``, or dead-letter with ``error`` when it is None."""

    next_due_time: datetime | None
    error: str

    def __post_init__(self) -> None:
        if self.next_due_time is not None:
            require_aware("next_due_time", self.next_due_time)
        _require_str("error", self.error, allow_empty=True)


@dataclass(frozen=True, kw_only=True)
class Snoozed:
    """The handler asked to run again at ``next_due_time`` (``Snooze``): Scheduled again, and the
    attempt does not count toward the ceiling (``max_attempts`` is raised by one)."""

    next_due_time: datetime

    def __post_init__(self) -> None:
        require_aware("next_due_time", self.next_due_time)


@dataclass(frozen=True, kw_only=True)
class Cancelled:
    """The handler stopped after observing a cancel request; ``cause`` is recorded."""

    cause: str

    def __post_init__(self) -> None:
        _require_str("cause", self.cause)


@dataclass(frozen=True, kw_only=True)
class Unroutable:
    """No handler can take this job (unknown wire name, payload no longer binds): Quarantined."""

    reason: str

    def __post_init__(self) -> None:
        _require_str("reason", self.reason)


Outcome: TypeAlias = Success | Failure | Snoozed | Cancelled | Unroutable
OUTCOME_TYPES = (Success, Failure, Snoozed, Cancelled, Unroutable)


def outcome_name(outcome: Outcome) -> str:
    """What an attempt's outcome does to its job, as one word: ``succeeded``, ``retried`` (a retry
    is due), ``dead_lettered`` (no retry left, or ``Discard``), ``snoozed``, ``cancelled`` or
    ``quarantined``. The metrics' ``result`` label and the tracing span's outcome attribute."""
    if isinstance(outcome, Success):
        return "succeeded"
    if isinstance(outcome, Failure):
        return "retried" if outcome.next_due_time is not None else "dead_lettered"
    if isinstance(outcome, Snoozed):
        return "snoozed"
    if isinstance(outcome, Cancelled):
        return "cancelled"
    if isinstance(outcome, Unroutable):
        return "quarantined"
    raise TypeError(f"not an outcome: {outcome!r}")


@dataclass(frozen=True, slots=True)
class OutcomeEffect:
    """What writing an outcome does to its Leased job: the one rule every path applies.

    The store's portable and PostgreSQL paths, the Django Tasks backend and the test harness all
    read an outcome through :func:`outcome_effect`, so they cannot disagree about where it leads.
    """

    #: The state the job moves to.
    state: JobState
    #: The retry instant, when the job goes back to Scheduled.
    due_time: datetime | None
    #: The recorded ``terminal_cause`` (None for Succeeded and for a retry).
    cause: str | None
    #: Whether the job's cancel flag is cleared (only a Cancelled outcome answers it).
    clears_cancel: bool
    #: Whether the attempt's failure detail is recorded with the transition.
    records_failure: bool
    #: Whether the attempt is given back: ``max_attempts`` is raised by one (a snooze).
    gives_back_attempt: bool = False


def outcome_effect(outcome: Outcome) -> OutcomeEffect:
    """The state, retry instant, cause and cancel-flag change an attempt's outcome leads to."""
    if isinstance(outcome, Success):
        return _SUCCEEDED
    if isinstance(outcome, Failure):
        if outcome.next_due_time is not None:
            return OutcomeEffect(
                JobState.SCHEDULED, outcome.next_due_time, None, clears_cancel=False, records_failure=True
            )
        return OutcomeEffect(
            JobState.DEAD_LETTERED, None, outcome.error, clears_cancel=False, records_failure=True
        )
    if isinstance(outcome, Snoozed):
        return OutcomeEffect(
            JobState.SCHEDULED,
            outcome.next_due_time,
            None,
            clears_cancel=False,
            records_failure=False,
            gives_back_attempt=True,
        )
    if isinstance(outcome, Cancelled):
        return OutcomeEffect(
            JobState.CANCELLED, None, outcome.cause, clears_cancel=True, records_failure=False
        )
    if isinstance(outcome, Unroutable):
        return OutcomeEffect(
            JobState.QUARANTINED, None, outcome.reason, clears_cancel=False, records_failure=False
        )
    raise TypeError(f"not an outcome: {outcome!r}")


#: Every Success leads to the same effect (the values are immutable): one, not one per outcome.
_SUCCEEDED = OutcomeEffect(JobState.SUCCEEDED, None, None, clears_cancel=False, records_failure=False)


# --- Inputs -----------------------------------------------------------------------------------

#: Why the store refuses a prepared job whose due time is still relative (``NewJob.run_after``).
PREPARED_NOT_DUE = (
    "is a prepared job whose due time counts from its enqueue (run_after is set): "
    "pass new_job.due_at(now), as backwave_django.enqueue_many does"
)


@dataclass(frozen=True, kw_only=True)
class NewJob:
    """A job to insert. ``parents`` are de-duplicated by the store; tags are a set."""

    job_id: uuid.UUID
    wire_name: str
    payload: Any
    queue: str = "default"
    due_time: datetime
    parents: tuple[uuid.UUID, ...] = ()
    mode: DependencyMode = DependencyMode.ON_SUCCESS
    tags: tuple[Tag, ...] = ()
    #: The job's own retry policy and time limit; None takes the settings' (``RETRY``,
    #: ``JOB_TIMEOUT``), resolved and stored at enqueue (a None backoff stays None: the settings'
    #: backoff at the time of each decision). ``backoff`` is stored as seconds, ``timeout`` too.
    max_attempts: int | None = None
    backoff: tuple[float, ...] | None = None
    timeout: float | None = None
    #: Claim order within the queue: higher first (-100…100).
    priority: int = 0
    #: Set for a unique job: an enqueue is ``DUPLICATE`` while a conflicting job exists.
    unique: UniqueKey | None = None
    #: The W3C ``traceparent`` of the span that enqueued the job, stored verbatim (the store never
    #: makes one up; see docs/tracing.md), or None.
    trace_context: str | None = None
    #: Whether ``job_id`` was just made for this job (``uuid7``, by ``prepare()``), so that no
    #: other job can hold it: a conflict on it can only be this same job sent again. A hint for
    #: the store, which then inserts without looking for the id first and looks only if the insert
    #: meets it (docs/store.md); a wrong hint costs a retry, never a wrong result. Set by
    #: ``prepare()`` only: a copy (``dataclasses.replace``) is not known to be new.
    id_is_new: bool = field(default=False, init=False, repr=False, compare=False)
    #: Set on a prepared job (``.prepare()``) whose due time counts from when it is enqueued:
    #: ``enqueue_many`` (:meth:`due_at`) makes it due ``run_after`` after its clock's now, and
    #: ``due_time`` means nothing until then. The store takes jobs with it unset.
    run_after: timedelta | None = None
    #: Flow control (docs/flow-control.md): the job's partition for fair dispatch, or None, and its
    #: buckets, one per limit (``((limit name, bucket), ...)``, stored sorted by name).
    partition: str | None = None
    limit_keys: LimitKeys = ()

    def __post_init__(self) -> None:
        _require_uuid("job_id", self.job_id)
        if self.partition is not None:
            require_bucket("partition", self.partition)
        if self.limit_keys:
            object.__setattr__(self, "limit_keys", _normalize_limit_keys(self.limit_keys))
        if self.trace_context is not None:
            require_trace_context(self.trace_context)
        _normalize_policy(self, self.priority)
        if self.unique is not None and not isinstance(self.unique, UniqueKey):
            raise TypeError(f"unique must be a UniqueKey, got {type(self.unique).__name__}")
        _require_str("wire_name", self.wire_name)
        require_aware("due_time", self.due_time)
        if self.run_after is not None and not isinstance(self.run_after, timedelta):
            raise TypeError(f"run_after must be a timedelta, got {type(self.run_after).__name__}")
        try:
            encoded = json_bytes(self.payload)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"payload must be JSON-serializable: {exc}") from None
        object.__setattr__(self, "_payload_json", encoded)
        if isinstance(self.parents, str | bytes | uuid.UUID) or not isinstance(self.parents, Iterable):
            raise TypeError("parents must be a sequence of job ids")
        parents = tuple(self.parents)
        for index, parent in enumerate(parents):
            _require_uuid(f"parents[{index}]", parent)
        object.__setattr__(self, "parents", parents)
        if not isinstance(self.mode, DependencyMode):
            try:
                object.__setattr__(self, "mode", DependencyMode(self.mode))
            except ValueError:
                raise ValueError(f"mode must be a DependencyMode, got {self.mode!r}") from None
        pairs = normalize_tags(self.tags)
        object.__setattr__(self, "tags", tuple(tag_from_pair(p) for p in pairs))
        object.__setattr__(self, "_tag_pairs", pairs)

    def due_at(self, now: datetime, trace_context: str | None = None) -> NewJob:
        """This job as enqueued at ``now``: a prepared job (``run_after`` set) due ``run_after``
        from ``now``, and with ``trace_context`` (the enqueuing span's, already checked) unless
        it has its own. A job with nothing to fix is returned as it is."""
        run_after = self.run_after
        if run_after is None and (trace_context is None or self.trace_context is not None):
            return self
        return copy_unchecked(
            self,
            due_time=self.due_time if run_after is None else now + run_after,
            run_after=None,
            trace_context=self.trace_context or trace_context,
        )

    def new_job(self, now: datetime, trace_context: str | None = None) -> NewJob:
        """Deprecated name of :meth:`due_at` (from when a prepared job was a type of its own)."""
        warnings.warn(
            "NewJob.new_job (PreparedJob.new_job) is deprecated: use .due_at(now)",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.due_at(now, trace_context)

    @property
    def lane(self) -> int:
        """The lane the job is claimed from (``core.limits.lane_of``): 0 for a plain job."""
        if self.partition is None and not self.limit_keys:
            return 0
        return lane_of(self.partition, self.limit_keys)

    @property
    def tag_pairs(self) -> tuple[TagPair, ...]:
        """The tags as stored ``(key, value)`` pairs (normalized once, when the job was built)."""
        pairs: tuple[TagPair, ...] = self.__dict__["_tag_pairs"]
        return pairs

    @property
    def payload_json(self) -> bytes:
        """The payload as stored (compact UTF-8 JSON), encoded once when the job was built."""
        encoded: bytes = self.__dict__["_payload_json"]
        return encoded


def _normalize_limit_keys(value: object) -> LimitKeys:
    """``((limit name, bucket), ...)`` sorted by name, each name once."""
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise TypeError("limit_keys must be a sequence of (limit name, bucket) pairs")
    pairs: dict[str, str] = {}
    for pair in value:
        if isinstance(pair, str | bytes) or not isinstance(pair, Iterable) or len(pair := tuple(pair)) != 2:
            raise TypeError(f"limit_keys must hold (limit name, bucket) pairs, got {pair!r}")
        name = validate_queue_name(pair[0], "limit_keys name")
        if name in pairs:
            raise ValueError(f"limit_keys names the limit {name!r} twice")
        bucket = pair[1]  # WHOLE_LIMIT: the one bucket of a limit without key
        pairs[name] = bucket if bucket == WHOLE_LIMIT else require_bucket(f"limit_keys[{name!r}]", bucket)
    return tuple(sorted(pairs.items()))


def _normalize_policy(value: Any, priority: object = 0) -> None:
    """Check a value's ``queue``, ``max_attempts``, ``backoff`` and ``timeout`` (and a job's
    ``priority``) by ``core.policy.resolve_policy``, and keep them in their stored form. A queue
    and a priority are required here (None there means "the declared one")."""
    if value.queue is None:
        raise TypeError("queue must be a str, got NoneType")
    if priority is None:
        raise TypeError("priority must be an int from -100 to 100, got None")
    policy = resolve_policy(
        queue=value.queue,
        max_attempts=value.max_attempts,
        backoff=value.backoff,
        timeout=value.timeout,
        priority=priority,  # type: ignore[arg-type]  # resolve_policy checks it
    )
    if policy.backoff is not value.backoff:
        object.__setattr__(value, "backoff", policy.backoff)
    if policy.timeout is not value.timeout:
        object.__setattr__(value, "timeout", policy.timeout)


@dataclass(frozen=True, kw_only=True)
class OutcomeReport:
    """A worker's report of how one attempt ended, fenced by ``(worker_id, attempt, live lease)``."""

    job_id: uuid.UUID
    worker_id: str
    attempt: int
    outcome: Outcome
    failure_detail: str | None = None
    added_tags: tuple[Tag, ...] = ()
    output: Any = None
    #: The attempt's last progress (``{"done", "total", "note", "at"}``), written with the outcome.
    progress: Any = None

    def __post_init__(self) -> None:
        _require_uuid("job_id", self.job_id)
        _require_str("worker_id", self.worker_id)
        if isinstance(self.attempt, bool) or not isinstance(self.attempt, int):
            raise TypeError(f"attempt must be an int, got {type(self.attempt).__name__}")
        if not isinstance(self.outcome, OUTCOME_TYPES):
            raise TypeError(
                "outcome must be Success(), Failure(...), Snoozed(...), Cancelled(...) or Unroutable(...), "
                f"got {type(self.outcome).__name__}"
            )
        if self.failure_detail is not None:
            _require_str("failure_detail", self.failure_detail, allow_empty=True)
        if self.added_tags != ():  # (the empty tuple is already in its normal form)
            object.__setattr__(
                self, "added_tags", tuple(tag_from_pair(p) for p in normalize_tags(self.added_tags))
            )
        if self.output is not None:
            _require_json("output", self.output)
        if self.progress is not None:
            _require_json("progress", self.progress)


# --- Outputs ----------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class ClaimedJob:
    """A leased job as the worker sees it: plain values, no model instance."""

    job_id: uuid.UUID
    wire_name: str
    queue: str
    payload: Any
    attempt: int
    due_time: datetime
    lease_owner: str
    lease_expiry: datetime
    tags: tuple[Tag, ...] = field(default=())
    #: The cancel flag as claimed: a retried job whose flag is still set starts with it raised.
    cancel_requested: bool = False
    #: The job's stored policy (None: the settings' ``RETRY`` / no time limit).
    max_attempts: int | None = None
    backoff: tuple[float, ...] | None = None
    timeout: float | None = None
    #: The job's stored trace context (``JobRecord.trace_context``), so the worker needs no second read.
    trace_context: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class HeartbeatResult:
    job_id: uuid.UUID
    renewed: bool
    cancel_requested: bool


@dataclass(frozen=True, kw_only=True)
class ScheduleSpec:
    """A recurring schedule to upsert. The cron and zone are validated by the store."""

    schedule_id: str
    cron: str
    wire_name: str
    payload: Any
    queue: str = "default"
    time_zone: str | None = None
    catch_up: CatchUp = CatchUp.SKIP
    no_overlap: bool = False
    #: The policy each minted instance is stored with (None: the settings' at each mint).
    max_attempts: int | None = None
    backoff: tuple[float, ...] | None = None
    timeout: float | None = None
    #: Flow control: the partition and buckets each minted instance is stored with
    #: (``JobDefinition.flow`` of the payload; docs/flow-control.md).
    partition: str | None = None
    limit_keys: LimitKeys = ()

    def __post_init__(self) -> None:
        _normalize_policy(self)
        if self.partition is not None:
            require_bucket("partition", self.partition)
        if self.limit_keys:
            object.__setattr__(self, "limit_keys", _normalize_limit_keys(self.limit_keys))
        validate_schedule_id(self.schedule_id)
        _require_str("cron", self.cron)
        _require_str("wire_name", self.wire_name)
        _require_json("payload", self.payload)
        if self.time_zone is not None:
            _require_str("time_zone", self.time_zone)
        try:
            object.__setattr__(self, "catch_up", CatchUp(self.catch_up))
        except ValueError:
            raise ValueError(f"catch_up must be a CatchUp, got {self.catch_up!r}") from None
        if not isinstance(self.no_overlap, bool):
            raise TypeError(f"no_overlap must be a bool, got {type(self.no_overlap).__name__}")
