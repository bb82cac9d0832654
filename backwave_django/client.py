"""Enqueueing for application code: the real clock, the caller's transaction, clear errors.

``send_invoice.enqueue("o-1")`` or ``send_invoice.using(queue="eu").enqueue("o-1")`` stores one
job; ``enqueue_many([...prepare(...)])`` stores many in a few round trips per batch. Inside
``transaction.atomic()`` the job commits or rolls back with the caller's writes.
"""

from __future__ import annotations

import uuid
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Generic

from asgiref.sync import sync_to_async
from django.db import transaction
from django.utils import timezone

from . import clock, signals, store, tracing
from .core.callables import P, R
from .core.frozen import copy_unchecked
from .core.ids import job_id_for_key, uuid7
from .core.limits import LimitKeys, require_bucket
from .core.outcomes import NewJob
from .core.policy import resolve_policy
from .core.states import DependencyMode, EnqueueResult
from .core.tags import Tag
from .core.unique import Unique
from .core.validation import require_trace_context
from .database import jobs_database

if TYPE_CHECKING:
    from .registry import JobDefinition

#: How many jobs ``enqueue_many`` writes per transaction.
ENQUEUE_MANY_BATCH = 1000
#: The id of the ``NewJob`` a :class:`JobWithOptions` keeps, which every prepared job replaces,
#: and its due time when that is relative (fixed at enqueue: ``NewJob.run_after``).
_PLACEHOLDER_ID = uuid.UUID(int=0)
_PLACEHOLDER_DUE = datetime(2000, 1, 1, tzinfo=UTC)
#: ``run_after`` of a job due when it is enqueued.
_NOW = timedelta(0)


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


class JobWithOptions(Generic[P, R]):
    """A job definition with per-enqueue options, from ``definition.using(...)``.

    Every option is checked when it is made, together with the definition's own policy
    (``core.policy.resolve_policy``), as the one ``NewJob`` they give every job; ``prepare()``
    then copies that job with the call's id and payload (``core.frozen.copy_unchecked``), so
    each job costs its payload's encoding and a copy. It is immutable: keep one and prepare many
    jobs from it.
    """

    __slots__ = (
        "_flow", "_job_id", "_limit_keys", "_partition", "_sender", "_template", "_unique", "definition"
    )

    def __init__(
        self,
        definition: JobDefinition[P, R],
        *,
        queue: str | None = None,
        run_after: timedelta | datetime | None = None,
        parents: Sequence[uuid.UUID] = (),
        mode: DependencyMode = DependencyMode.ON_SUCCESS,
        tags: Sequence[Tag] = (),
        job_id: uuid.UUID | str | None = None,
        max_attempts: int | None = None,
        backoff: Sequence[float | timedelta] | None = None,
        timeout: timedelta | float | None = None,
        priority: int | None = None,
        unique: Unique | None = None,
        trace_context: str | None = None,
        partition: str | None = None,
        limit_keys: Mapping[str, str] | None = None,
    ) -> None:
        policy = resolve_policy(
            definition.policy,
            queue=queue,
            max_attempts=max_attempts,
            backoff=backoff,
            timeout=timeout,
            priority=priority,
        )
        if trace_context is not None:
            require_trace_context(trace_context)
        if unique is not None:
            definition.require_unique(unique)
        if run_after is not None and not isinstance(run_after, timedelta | datetime):
            raise TypeError(f"run_after must be a timedelta or an aware datetime, got {run_after!r}")
        if isinstance(run_after, datetime) and timezone.is_naive(run_after):
            raise ValueError(
                f"run_after must be timezone-aware, got the naive datetime {run_after.isoformat()}"
            )
        if job_id is not None and not isinstance(job_id, str | uuid.UUID):
            raise TypeError(f"job_id must be a UUID or a str key, got {type(job_id).__name__}")
        parents = tuple(parents)
        for index, parent in enumerate(parents):
            if not isinstance(parent, uuid.UUID):
                raise TypeError(f"parents[{index}] must be a uuid.UUID, got {type(parent).__name__}")
        if partition is not None:
            require_bucket("partition", partition)
        chosen = None if limit_keys is None else definition.check_limit_keys(limit_keys)
        self.definition = definition
        self._job_id = job_id
        self._unique = unique
        self._partition = partition
        self._limit_keys = chosen
        #: Whether each job's partition or buckets come from its arguments (plain jobs: never).
        self._flow = bool(definition.limits) or (definition.partition is not None and partition is None)
        # The job every prepare() copies: its id and payload are placeholders; a relative due time
        # is fixed by enqueue_many (NewJob.due_at).
        self._template = NewJob(
            job_id=_PLACEHOLDER_ID,
            wire_name=definition.wire_name,
            payload=None,
            queue=policy.queue,
            due_time=run_after if isinstance(run_after, datetime) else _PLACEHOLDER_DUE,
            run_after=None if isinstance(run_after, datetime) else run_after or _NOW,
            parents=parents,
            mode=DependencyMode(mode),
            tags=(*definition.tags, *tags),
            max_attempts=policy.max_attempts,
            backoff=policy.backoff,
            timeout=policy.timeout,
            priority=policy.priority,
            trace_context=trace_context,
            partition=partition,
        )
        # Its jobs' job_enqueued names the definition's class as its sender (see announce_enqueued).
        self._sender = type(definition)
        if job_id is None and unique is None and not self._flow:
            # What every job of these options shares beyond the checked fields: prepare() then
            # copies in only the id and the payload (docs/performance.md, "Keyword arguments: a
            # `prepare()` that binds by sets").
            self._template = copy_unchecked(self._template, id_is_new=True, _sender=self._sender)

    def prepare(self, *args: P.args, **kwargs: P.kwargs) -> NewJob:
        """The job of this call, ready for :func:`enqueue_many`: its payload encoded and checked,
        its id made (or derived from a ``job_id`` key), without touching the database."""
        definition = self.definition
        payload, payload_json = definition.encode_stored(args, kwargs)
        key = self._job_id
        unique = self._unique
        if key is None and unique is None and not self._flow:  # the template carries the rest (see __init__)
            return copy_unchecked(self._template, job_id=uuid7(), payload=payload, _payload_json=payload_json)
        partition: str | None = self._template.partition
        limit_keys: LimitKeys = ()
        if self._flow:
            partition, limit_keys = definition.flow(
                args, kwargs, partition=self._partition, chosen=self._limit_keys
            )
        if key is None:
            job_id = uuid7()
        elif isinstance(key, str):
            job_id = job_id_for_key(definition.wire_name, key)
        else:
            job_id = key
        return copy_unchecked(
            self._template,
            job_id=job_id,
            payload=payload,
            _payload_json=payload_json,
            unique=None if unique is None else definition.unique_key(unique, args, kwargs),
            id_is_new=key is None,
            _sender=self._sender,
            partition=partition,
            limit_keys=limit_keys,
        )

    def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> EnqueueReceipt:
        """Store the job; raises ``EnqueueError`` for anything but ``OK`` and ``DUPLICATE``."""
        return enqueue_many([self.prepare(*args, **kwargs)])[0]

    async def aenqueue(self, *args: P.args, **kwargs: P.kwargs) -> EnqueueReceipt:
        """:meth:`enqueue` for ``async def`` code (see :func:`aenqueue_many`)."""
        return (await aenqueue_many([self.prepare(*args, **kwargs)]))[0]

    def enqueue_many(self, calls: Iterable[Mapping[str, Any]]) -> list[EnqueueReceipt]:
        """One job per dict of keyword arguments, prepared here and stored by :func:`enqueue_many`:
        ``send_invoice.enqueue_many([{"order_id": 1}, {"order_id": 2}])``. Every call is prepared
        (bound, checked, encoded) before anything is written; receipts come in input order."""
        return enqueue_many(self._prepare_each(calls))

    async def aenqueue_many(self, calls: Iterable[Mapping[str, Any]]) -> list[EnqueueReceipt]:
        """:meth:`enqueue_many` for ``async def`` code (see :func:`aenqueue_many`)."""
        return await aenqueue_many(self._prepare_each(calls))

    def _prepare_each(self, calls: Iterable[Mapping[str, Any]]) -> list[NewJob]:
        if isinstance(calls, Mapping | str | bytes) or not isinstance(calls, Iterable):
            raise TypeError(
                f"enqueue_many takes a list of dicts of keyword arguments, got {type(calls).__name__}"
            )
        prepare: Callable[..., NewJob] = self.prepare
        prepared = []
        for index, kwargs in enumerate(calls):
            if not isinstance(kwargs, Mapping):
                raise TypeError(f"enqueue_many takes dicts of keyword arguments; item {index} is {kwargs!r}")
            try:
                prepared.append(prepare(**kwargs))
            except TypeError as exc:
                raise TypeError(f"enqueue_many item {index}: {exc}") from None
        return prepared

    def __repr__(self) -> str:
        return f"<JobWithOptions {self.definition.wire_name}: {self._template!r}>"


#: Deprecated: a prepared job is a :class:`~backwave_django.NewJob` (docs/upgrading.md).
PreparedJob = NewJob


def __getattr__(name: str) -> Any:
    if name == "JobOptions":
        warnings.warn(
            "backwave_django.client.JobOptions is deprecated: .using(...) returns a JobWithOptions",
            DeprecationWarning,
            stacklevel=2,
        )
        return JobWithOptions
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def enqueue_many(prepared: Sequence[NewJob]) -> list[EnqueueReceipt]:
    """Store many jobs in batches (one transaction each, joining the caller's if there is one).

    Every job is judged as ``enqueue`` would; the first refusal raises ``EnqueueError`` and, in
    the batch where it happened, nothing is written. Receipts come back in input order.
    """
    jobs = list(prepared)
    for index, item in enumerate(jobs):
        if not isinstance(item, NewJob):
            raise TypeError(f"enqueue_many takes prepared jobs (job.prepare(...)); item {index} is {item!r}")
    receipts: list[EnqueueReceipt] = []
    trace_context = tracing.current_traceparent() if tracing.ENABLED else None
    if trace_context is not None and any(item.trace_context is None for item in jobs):
        require_trace_context(trace_context)  # once, not per job (NewJob.due_at does not check it)

    def batches() -> Iterator[tuple[list[NewJob], datetime]]:
        # Built one at a time, as the store asks: on PostgreSQL while the database writes the last.
        for start in range(0, len(jobs), ENQUEUE_MANY_BATCH):
            now = clock.now()
            yield [item.due_at(now, trace_context) for item in jobs[start : start + ENQUEUE_MANY_BATCH]], now

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


def announce_enqueued(enqueued: Sequence[NewJob]) -> None:
    """Send ``job_enqueued`` for each stored job once the caller's transaction commits. The sender
    is the class of the definition that prepared it (``JobDefinition``), or None for a job built
    as ``NewJob(...)`` (the class is kept on the jobs ``prepare()`` makes: this module does not
    import the registry, which imports it)."""

    def send() -> None:
        for item in enqueued:
            signals.send(
                signals.job_enqueued,
                getattr(item, "_sender", None),
                job_id=item.job_id,
                wire_name=item.wire_name,
                queue=item.queue,
            )

    transaction.on_commit(send, using=jobs_database())


async def aenqueue_many(prepared: Sequence[NewJob]) -> list[EnqueueReceipt]:
    """:func:`enqueue_many` for ``async def`` code: an async view, an async task, a consumer.

    The database work runs in Django's thread for synchronous code
    (``sync_to_async(thread_sensitive=True)``), the same thread (and connection) as the ORM calls
    of your other ``sync_to_async`` code in this request. Outside a transaction each batch commits
    on its own. To enqueue atomically with other writes from async code, put both in one
    synchronous function under ``transaction.atomic()`` and call it with ``sync_to_async``:
    Django does not run ``transaction.atomic()`` blocks in async code itself.
    """
    return await sync_to_async(enqueue_many, thread_sensitive=True)(list(prepared))
