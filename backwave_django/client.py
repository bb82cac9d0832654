"""Enqueueing for application code: the real clock, the caller's transaction, clear errors.

``send_invoice.enqueue("o-1")`` or ``send_invoice.using(queue="eu").enqueue("o-1")`` stores one
job; ``enqueue_many([...prepare(...)])`` stores many in a few round trips per batch. Inside
``transaction.atomic()`` the job commits or rolls back with the caller's writes.
"""

from __future__ import annotations

import uuid
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Generic

from asgiref.sync import sync_to_async
from django.db import transaction
from django.utils import timezone

from . import clock, signals, store, tracing
from .core.callables import P, R
from .core.frozen import frozen_builder
from .core.ids import job_id_for_key, uuid7
from .core.outcomes import NewJob
from .core.states import DependencyMode, EnqueueResult
from .core.tags import Tag
from .core.unique import Unique, UniqueKey
from .core.validation import require_trace_context, validate_queue_name
from .database import jobs_database

if TYPE_CHECKING:
    from .registry import JobDefinition

#: How many jobs ``enqueue_many`` writes per transaction.
ENQUEUE_MANY_BATCH = 1000
#: The id and due time of :meth:`JobOptions.checked_job`'s job, which every prepared job replaces.
_PLACEHOLDER_ID = uuid.UUID(int=0)
_PLACEHOLDER_DUE = datetime(2000, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class EnqueueReceipt:
    """What an enqueue did: ``enqueue_result`` is ``OK`` or ``DUPLICATE`` (nothing was stored: the
    job already exists), and ``job_id`` is the stored job's id, for a duplicate of a unique job
    the existing one's. The job's own state and output: :func:`backwave_django.get_job`."""

    job_id: uuid.UUID
    enqueue_result: EnqueueResult

    @property
    def result(self) -> EnqueueResult:
        """Deprecated name of :attr:`enqueue_result` (it is not the job's return value)."""
        warnings.warn(
            "EnqueueReceipt.result is deprecated: use .enqueue_result (the job's output is "
            "get_job(job_id).output)",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.enqueue_result

    @property
    def duplicate(self) -> bool:
        """Whether nothing was stored because the job already exists."""
        return self.enqueue_result is EnqueueResult.DUPLICATE


@dataclass(frozen=True, slots=True)
class PreparedJob:
    """A job ready to enqueue; its due time is fixed when it is enqueued (``run_after`` is relative)."""

    definition: JobDefinition[Any, Any]
    job_id: uuid.UUID
    payload: dict[str, Any]
    queue: str
    run_after: timedelta | datetime | None
    parents: tuple[uuid.UUID, ...]
    mode: DependencyMode
    tags: tuple[Tag, ...]
    max_attempts: int | None = None
    backoff: tuple[float, ...] | None = None
    timeout: float | None = None
    priority: int = 0
    unique: UniqueKey | None = None
    #: A trace context given with ``.using(trace_context=...)``; None: the caller's current span's.
    trace_context: str | None = None
    #: Set by ``prepare()`` only: its options as one checked ``NewJob`` (see
    #: :meth:`JobOptions.checked_job`) and the payload's stored JSON (two slots, not a tuple: one
    #: object fewer per job for the garbage collector to track). A job built any other way (or
    #: copied with ``dataclasses.replace``) has None, and is checked in full when enqueued.
    _checked: NewJob | None = field(default=None, init=False, repr=False, compare=False)
    _payload_json: bytes = field(default=b"", init=False, repr=False, compare=False)
    #: Set by ``prepare()`` only: whether it made the job's id (see ``NewJob.id_is_new``).
    _id_is_new: bool = field(default=False, init=False, repr=False, compare=False)

    def new_job(self, now: datetime, trace_context: str | None = None) -> NewJob:
        """The job to store, due by ``run_after`` from ``now``; ``trace_context`` is the enqueuing
        span's (:func:`tracing.current_traceparent`), unless this job was given its own."""
        run_after = self.run_after
        if run_after is None:
            due = now
        elif isinstance(run_after, timedelta):
            due = now + run_after
        else:
            due = run_after
        checked = self._checked
        if checked is not None:
            return checked.for_another(
                job_id=self.job_id,
                payload=self.payload,
                payload_json=self._payload_json,
                due_time=due,
                unique=self.unique,
                trace_context=self.trace_context or trace_context,
                id_is_new=self._id_is_new,
            )
        return NewJob(
            job_id=self.job_id,
            wire_name=self.definition.wire_name,
            payload=self.payload,
            queue=self.queue,
            due_time=due,
            parents=self.parents,
            mode=self.mode,
            tags=(*self.definition.tags, *self.tags),
            max_attempts=self.max_attempts,
            backoff=self.backoff,
            timeout=self.timeout,
            priority=self.priority,
            unique=self.unique,
            trace_context=self.trace_context or trace_context,
        )


#: Builds a :class:`PreparedJob` from every field's value in field order (the private ones
#: too) in a fifth of the time its frozen ``__init__`` takes, which was about half of
#: ``prepare()``'s cost (see :func:`core.frozen.frozen_builder`; ``tests/test_prepared_batches.py``
#: compares the two).
_build_prepared = frozen_builder(PreparedJob)


@dataclass(frozen=True, slots=True)
class JobOptions(Generic[P, R]):
    """A definition with per-enqueue options, from ``definition.using(...)``."""

    definition: JobDefinition[P, R]
    queue: str | None
    run_after: timedelta | datetime | None
    parents: tuple[uuid.UUID, ...]
    mode: DependencyMode
    tags: tuple[Tag, ...]
    job_id: uuid.UUID | str | None
    max_attempts: int | None = None
    backoff: tuple[float, ...] | None = None
    timeout: float | None = None
    priority: int = 0
    unique: Unique | None = None
    trace_context: str | None = None
    #: The options as checked by the first ``prepare()`` (see :meth:`checked_job`).
    _checked: NewJob | None = field(default=None, init=False, repr=False, compare=False)

    def prepare(self, *args: P.args, **kwargs: P.kwargs) -> PreparedJob:
        """Encode the call and validate the options, without touching the database."""
        definition = self.definition
        payload, payload_json = definition.encode_stored(args, kwargs)
        checked = self._checked or self.checked_job()
        if self.job_id is None:
            job_id = uuid7()
        elif isinstance(self.job_id, str):
            job_id = job_id_for_key(definition.wire_name, self.job_id)
        else:  # a UUID: checked_job() refused anything else
            job_id = self.job_id
        return _build_prepared(
            definition,
            job_id,
            payload,
            checked.queue,
            self.run_after,
            checked.parents,
            checked.mode,
            self.tags,
            checked.max_attempts,
            checked.backoff,
            checked.timeout,
            checked.priority,
            None if self.unique is None else definition.unique_key(self.unique, args, kwargs),
            self.trace_context,
            checked,
            payload_json,
            self.job_id is None,
        )

    def checked_job(self) -> NewJob:
        """Check the options and keep them, as the ``NewJob`` they give every job (its id,
        payload and due time are placeholders): they are immutable, so every later ``prepare()``
        reuses it. Raises for the first bad option, every time until it is fixed."""
        definition = self.definition
        if self.run_after is not None and not isinstance(self.run_after, timedelta | datetime):
            raise TypeError(f"run_after must be a timedelta or an aware datetime, got {self.run_after!r}")
        if isinstance(self.run_after, datetime) and timezone.is_naive(self.run_after):
            raise ValueError(
                f"run_after must be timezone-aware, got the naive datetime {self.run_after.isoformat()}"
            )
        if self.job_id is not None and not isinstance(self.job_id, str | uuid.UUID):
            raise TypeError(f"job_id must be a UUID or a str key, got {type(self.job_id).__name__}")
        queue = validate_queue_name(self.queue or definition.queue)
        for index, parent in enumerate(self.parents):
            if not isinstance(parent, uuid.UUID):
                raise TypeError(f"parents[{index}] must be a uuid.UUID, got {type(parent).__name__}")
        declared_attempts, declared_backoff, declared_timeout = definition.stored_policy()
        checked = NewJob(  # checks everything else, as for any job
            job_id=_PLACEHOLDER_ID,
            wire_name=definition.wire_name,
            payload=None,
            queue=queue,
            due_time=_PLACEHOLDER_DUE,
            parents=self.parents,
            mode=DependencyMode(self.mode),
            tags=(*definition.tags, *self.tags),
            max_attempts=declared_attempts if self.max_attempts is None else self.max_attempts,
            backoff=declared_backoff if self.backoff is None else self.backoff,
            timeout=declared_timeout if self.timeout is None else self.timeout,
            priority=self.priority,
            trace_context=self.trace_context,
        )
        object.__setattr__(self, "_checked", checked)
        return checked

    def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> EnqueueReceipt:
        """Store the job; raises ``EnqueueError`` for anything but ``OK`` and ``DUPLICATE``."""
        return enqueue_many([self.prepare(*args, **kwargs)])[0]

    async def aenqueue(self, *args: P.args, **kwargs: P.kwargs) -> EnqueueReceipt:
        """:meth:`enqueue` for ``async def`` code (see :func:`aenqueue_many`)."""
        return (await aenqueue_many([self.prepare(*args, **kwargs)]))[0]


def enqueue_many(prepared: Sequence[PreparedJob]) -> list[EnqueueReceipt]:
    """Store many jobs in batches (one transaction each, joining the caller's if there is one).

    Every job is judged as ``enqueue`` would; the first refusal raises ``EnqueueError`` and, in
    the batch where it happened, nothing is written. Receipts come back in input order.
    """
    jobs = list(prepared)
    for index, item in enumerate(jobs):
        if not isinstance(item, PreparedJob):
            raise TypeError(f"enqueue_many takes prepared jobs (job.prepare(...)); item {index} is {item!r}")
    receipts: list[EnqueueReceipt] = []
    trace_context = tracing.current_traceparent() if tracing.ENABLED else None
    if trace_context is not None and any(item.trace_context is None for item in jobs):
        require_trace_context(trace_context)  # once, not per job (NewJob.for_another does not check it)

    def batches() -> Iterator[tuple[list[NewJob], datetime]]:
        # Built one at a time, as the store asks: on PostgreSQL while the database writes the last.
        for start in range(0, len(jobs), ENQUEUE_MANY_BATCH):
            now = clock.now()
            yield [item.new_job(now, trace_context) for item in jobs[start : start + ENQUEUE_MANY_BATCH]], now

    def written(entries: list[store.Enqueued]) -> None:
        start = len(receipts)
        receipts.extend(EnqueueReceipt(job_id=entry.job_id, enqueue_result=entry.result) for entry in entries)
        if signals.job_enqueued.has_listeners():
            announce_enqueued(
                [item for item, e in zip(jobs[start:], entries, strict=False) if e.result is EnqueueResult.OK]
            )

    if len(jobs) <= ENQUEUE_MANY_BATCH:  # one batch (or none): nothing to overlap
        for batch, now in batches():
            written(store.enqueue_batch(batch, now=now, raise_refusals=True))
    else:
        store.enqueue_batches(batches(), written=written, raise_refusals=True)
    return receipts


def announce_enqueued(enqueued: Sequence[PreparedJob]) -> None:
    """Send ``job_enqueued`` for each stored job once the caller's transaction commits."""

    def send() -> None:
        for item in enqueued:
            signals.send(
                signals.job_enqueued,
                type(item.definition),
                job_id=item.job_id,
                wire_name=item.definition.wire_name,
                queue=item.queue,
            )

    transaction.on_commit(send, using=jobs_database())


async def aenqueue_many(prepared: Sequence[PreparedJob]) -> list[EnqueueReceipt]:
    """:func:`enqueue_many` for ``async def`` code: an async view, an async task, a consumer.

    The database work runs in Django's thread for synchronous code
    (``sync_to_async(thread_sensitive=True)``), the same thread (and connection) as the ORM calls
    of your other ``sync_to_async`` code in this request. Outside a transaction each batch commits
    on its own. To enqueue atomically with other writes from async code, put both in one
    synchronous function under ``transaction.atomic()`` and call it with ``sync_to_async``:
    Django does not run ``transaction.atomic()`` blocks in async code itself.
    """
    return await sync_to_async(enqueue_many, thread_sensitive=True)(list(prepared))
