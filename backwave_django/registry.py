"""Wire name → job definition: declaring jobs, encoding their payloads, routing claimed jobs.

A job's identity in storage is its **wire name**, given explicitly to :func:`job`. Renaming the
Python function never changes it; two definitions may never share it. The payload of a job
enqueued through a definition is ``{"args": [...], "kwargs": {...}}``, checked at enqueue to
bind to the function's signature and to survive a JSON round trip unchanged.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cached_property
from typing import TYPE_CHECKING, Any, Concatenate, Generic, Literal, Protocol, overload

from django.core.exceptions import ImproperlyConfigured

from . import job_flow
from .core import actors
from .core.binding import CallShape
from .core.callables import P, R
from .core.encoding import json_bytes, plain_json
from .core.limits import KeySource, Limit, LimitKeys, LimitValues, agreeing
from .core.policy import JobPolicy, resolve_policy
from .core.retry import DEFAULT_MAX_ATTEMPTS, Backoff, RetryPolicy, job_retry_policy
from .core.states import DependencyMode
from .core.tags import Tag, normalize_tags, tag_from_pair
from .core.unique import Unique, UniqueKey, unique_digest

if TYPE_CHECKING:
    import uuid

    from .client import EnqueueReceipt, JobWithOptions
    from .context import JobContext
    from .core.outcomes import NewJob, Outcome


_REGISTRY: dict[str, JobDefinition[Any, Any]] = {}


class PayloadError(ValueError):
    """A stored payload that does not decode or bind to its handler's signature any more."""


class AttemptHooks(Protocol):
    """One attempt as an adapter sees it: the context argument it supplies, and how it ended."""

    @property
    def handler_context(self) -> Any:
        """Passed as the handler's first argument (``takes_context``) instead of the ``JobContext``."""

    def finish(self, outcome: Outcome, output: Any, failure_detail: str | None) -> None:
        """The attempt's outcome is decided (it is written afterwards, in the worker's next batch)."""


class ExecutionHooks(Protocol):
    """Lets another task API run its functions as BackWave jobs through the one execution path.

    The Django Tasks backend (``backwave_django.tasks``) uses it to hand Django's ``TaskContext``
    to the function and to send ``task_started`` / ``task_finished``; ``@job`` handlers have none.
    """

    def start(self, context: JobContext) -> AttemptHooks:
        """An attempt is about to call the handler (exceptions fail the attempt like the handler's)."""


@dataclass(frozen=True, eq=False)
class JobDefinition(Generic[P, R]):
    """What :func:`job` returns: the function plus how its jobs are stored, queued and retried."""

    wire_name: str
    func: Callable[..., Any]
    queue: str
    retry: RetryPolicy | None
    tags: tuple[Tag, ...]
    takes_context: bool
    hooks: ExecutionHooks | None = None
    #: Seconds a handler may run (None: the settings' ``JOB_TIMEOUT``), stored with each job.
    timeout: float | None = None
    #: Exceptions that retry (None: every exception not in ``discard_on``) and that dead-letter at once.
    retry_on: tuple[type[BaseException], ...] | None = None
    discard_on: tuple[type[BaseException], ...] = ()
    #: The ceiling as declared (None: the settings' ``RETRY``, resolved at enqueue).
    max_attempts: int | None = None
    #: Claim order within the queue (-100…100, higher first) unless an enqueue says otherwise.
    priority: int = 0
    #: Flow control (docs/flow-control.md): the limits its jobs are under, and where a job's
    #: partition comes from (an argument's name or a callable; None: no partition).
    limits: tuple[Limit, ...] = ()
    partition: KeySource | None = None

    # The cached properties below are computed once per definition: ``cached_property`` stores
    # into the instance's ``__dict__`` directly, which a frozen dataclass without slots allows.

    @cached_property
    def is_async(self) -> bool:
        """Whether the handler is ``async def`` (the worker asks for every job)."""
        return inspect.iscoroutinefunction(self.func)

    @cached_property
    def signature(self) -> inspect.Signature:
        """The signature the payload binds to (without the context parameter)."""
        signature = inspect.signature(self.func)
        if self.takes_context:
            signature = signature.replace(parameters=list(signature.parameters.values())[1:])
        return signature

    # --- Enqueueing (see client.py) -----------------------------------------------------------

    def using(
        self,
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
    ) -> JobWithOptions[P, R]:
        """Per-enqueue options: ``.using(queue=..., run_after=..., ...).enqueue(...)``.

        ``queue``, ``max_attempts``, ``backoff`` (a list of seconds), ``timeout`` and ``priority``
        override the ``@job``'s own for this job (:attr:`policy`); ``unique`` makes the enqueue a
        no-op while a conflicting job exists; ``trace_context`` (a W3C ``traceparent``) is stored
        instead of the current span's (docs/tracing.md). They are checked here, before anything
        is written. ``partition`` and ``limit_keys`` (``{limit name: bucket}``) set the job's
        partition and buckets instead of the ones its arguments give (docs/flow-control.md).
        """
        from .client import JobWithOptions

        return JobWithOptions(
            self,
            queue=queue,
            run_after=run_after,
            parents=parents,
            mode=mode,
            tags=tags,
            job_id=job_id,
            max_attempts=max_attempts,
            backoff=backoff,
            timeout=timeout,
            priority=priority,
            unique=unique,
            trace_context=trace_context,
            partition=partition,
            limit_keys=limit_keys,
        )

    @cached_property
    def has_flow(self) -> bool:
        """Whether its jobs have limits or a partition (a plain job's enqueue skips all of it)."""
        return bool(self.limits) or self.partition is not None

    def flow(
        self,
        args: Sequence[Any],
        kwargs: Mapping[str, Any],
        *,
        partition: str | None = None,
        chosen: Mapping[str, str] | None = None,
    ) -> tuple[str | None, LimitKeys]:
        """The partition and buckets of a job called with these arguments: ``partition`` and
        ``chosen`` (``.using(partition=..., limit_keys=...)``) win over what the arguments give."""
        return job_flow.partition_and_buckets(self, args, kwargs, partition, chosen)

    def schedule_flow(self, payload: Any) -> dict[str, Any]:
        """The ``partition`` and ``limit_keys`` of a ``ScheduleSpec`` of this job with this stored
        payload (what each minted instance is stored with); empty for a plain job."""
        if not self.has_flow:
            return {}
        partition, keys = self.flow(*self.decode(payload))
        return {"partition": partition, "limit_keys": keys}

    def check_limit_keys(self, chosen: object) -> dict[str, str]:
        """``.using(limit_keys=...)``: a mapping of this job's limit names to buckets."""
        return job_flow.checked_limit_keys(self, chosen)

    @cached_property
    def policy(self) -> JobPolicy:
        """What this job type stores on each of its rows unless an enqueue overrides it (its
        queue, ceiling, list backoff in seconds, time limit and priority; None: the settings')."""
        backoff = None if self.retry is None else self.retry.stored_backoff
        return JobPolicy(
            queue=self.queue,
            max_attempts=self.max_attempts,
            backoff=None if backoff is None else tuple(backoff),
            timeout=self.timeout,
            priority=self.priority,
        )

    def require_unique(self, unique: object) -> None:
        """Raise unless ``unique`` is a ``Unique(...)`` whose ``keys`` are arguments of this job."""
        if not isinstance(unique, Unique):
            raise TypeError(f"unique must be a Unique(...), got {unique!r}")
        unknown = [k for k in unique.keys or () if k not in self.signature.parameters]
        if unknown:
            raise ValueError(
                f"Unique(keys=...) names {', '.join(repr(k) for k in unknown)}, which job "
                f"{self.wire_name!r} does not take; its arguments are "
                f"{', '.join(self.signature.parameters) or '(none)'}"
            )

    def unique_key(self, unique: Unique, args: tuple[Any, ...], kwargs: dict[str, Any]) -> UniqueKey:
        """The identity of one call under ``unique``: the chosen arguments' values (defaults
        applied), or the whole payload."""
        if unique.keys is None:
            identity: Any = {"args": list(args), "kwargs": dict(kwargs)}
        else:
            bound = self.signature.bind(*args, **kwargs)
            bound.apply_defaults()
            identity = {key: bound.arguments[key] for key in unique.keys}
        return UniqueKey(unique_digest(self.wire_name, identity), unique.period, unique.states)

    def discards(self, exc: BaseException) -> bool:
        """Whether ``retry_on`` / ``discard_on`` send this exception straight to Dead-Lettered."""
        if self.discard_on and isinstance(exc, self.discard_on):
            return True
        return self.retry_on is not None and not isinstance(exc, self.retry_on)

    @cached_property
    def _defaults(self) -> JobWithOptions[P, R]:
        """``using()`` without options: it is immutable, and it keeps the job its options were
        checked as (see ``client.JobWithOptions``)."""
        return self.using()

    def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> EnqueueReceipt:
        """Store a job that calls this function with these arguments; see ``client.py``."""
        return self._defaults.enqueue(*args, **kwargs)

    async def aenqueue(self, *args: P.args, **kwargs: P.kwargs) -> EnqueueReceipt:
        """:meth:`enqueue` for ``async def`` code (an async view): see ``client.aenqueue_many``."""
        return await self._defaults.aenqueue(*args, **kwargs)

    def prepare(self, *args: P.args, **kwargs: P.kwargs) -> NewJob:
        """A job ready for :func:`backwave_django.enqueue_many`."""
        return self._defaults.prepare(*args, **kwargs)

    def enqueue_many(self, calls: Iterable[Mapping[str, Any]]) -> list[EnqueueReceipt]:
        """Store one job per dict of keyword arguments, in batches; see ``client.py``."""
        return self._defaults.enqueue_many(calls)

    async def aenqueue_many(self, calls: Iterable[Mapping[str, Any]]) -> list[EnqueueReceipt]:
        """:meth:`enqueue_many` for ``async def`` code."""
        return await self._defaults.aenqueue_many(calls)

    def call(self, *args: P.args, **kwargs: P.kwargs) -> R:
        """Run the handler inline (tests, shells); an ``async def`` handler is awaited to completion."""
        if self.takes_context:
            from .context import JobContext

            args = (JobContext.detached(self.wire_name), *args)  # type: ignore[assignment]
        result = self.func(*args, **kwargs)
        if inspect.isawaitable(result):
            return asyncio.run(_await(result))  # type: ignore[no-any-return]
        return result  # type: ignore[no-any-return]

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.call(*args, **kwargs)

    # --- The payload codec --------------------------------------------------------------------

    def encode(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        """The stored payload for a call, refusing arguments that do not bind or do not survive JSON."""
        return self.encode_stored(args, kwargs)[0]

    def encode_stored(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[dict[str, Any], bytes]:
        """:meth:`encode`, with the payload's stored JSON: the payload is encoded once and checked
        by the types it holds (``core.encoding.plain_json``), else by reading that encoding back
        (an argument that fails the round trip is then named). Whether the call binds is decided
        by ``_call_shape``; ``inspect.Signature.bind`` words the refusals."""
        if not args and not kwargs and self._binds_nothing:
            return {"args": [], "kwargs": {}}, _EMPTY_PAYLOAD_JSON
        if not self._call_shape.binds(args, kwargs):
            self._bind(args, kwargs)  # raises, naming what does not bind
        payload = {"args": list(args), "kwargs": dict(kwargs)}
        try:
            encoded = json_bytes(payload)
            survives = plain_json(payload) or _same_json(json.loads(encoded), payload)
        except (TypeError, ValueError):
            survives = False
        if not survives:
            self._require_round_trips(self._bind(args, kwargs).arguments)
            raise TypeError(f"the arguments of job {self.wire_name!r} do not survive a JSON round trip")
        return payload, encoded

    @cached_property
    def _call_shape(self) -> CallShape:
        """Whether a call binds to :attr:`signature`, decided without binding it where it can be."""
        return CallShape(self.signature)

    def _bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> inspect.BoundArguments:
        try:
            return self.signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise TypeError(f"{self.wire_name}: {exc}") from None

    @cached_property
    def _binds_nothing(self) -> bool:
        """Whether a call without arguments binds (every parameter optional)."""
        return self._call_shape.binds((), {})

    def _require_round_trips(self, arguments: dict[str, Any]) -> None:
        """Raise naming the first bound argument that is not JSON or does not survive a round trip."""
        parameters = self.signature.parameters
        for name, value in arguments.items():
            kind = parameters[name].kind
            if kind is inspect.Parameter.VAR_POSITIONAL:
                for index, item in enumerate(value):
                    _require_round_trip(self.wire_name, f"{name}[{index}]", item)
            elif kind is inspect.Parameter.VAR_KEYWORD:
                for key, item in value.items():
                    _require_round_trip(self.wire_name, key, item)
            else:
                _require_round_trip(self.wire_name, name, value)

    def decode(self, payload: Any) -> tuple[list[Any], dict[str, Any]]:
        """Arguments from a stored payload; ``PayloadError`` when it no longer fits the handler."""
        if not isinstance(payload, dict) or set(payload) != {"args", "kwargs"}:
            raise PayloadError(f"expected an object with 'args' and 'kwargs', got {_preview(payload)}")
        args, kwargs = payload["args"], payload["kwargs"]
        if not isinstance(args, list) or not isinstance(kwargs, dict):
            raise PayloadError("'args' must be a list and 'kwargs' an object")
        if (not args and not kwargs and self._binds_nothing) or self._call_shape.binds(args, kwargs):
            return args, kwargs
        try:
            self.signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise PayloadError(str(exc)) from None
        return args, kwargs


async def _await(awaitable: Any) -> Any:
    return await awaitable


#: The stored JSON of a call without arguments.
_EMPTY_PAYLOAD_JSON = json_bytes({"args": [], "kwargs": {}})


def _preview(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _require_round_trip(wire_name: str, name: str, value: Any) -> None:
    try:
        restored = json.loads(json_bytes(value))
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"argument {name!r} of job {wire_name!r} is not JSON-serializable ({exc}); "
            "pass plain data (str, int, float, bool, None, list, dict) such as an id instead"
        ) from None
    if not _same_json(restored, value):
        raise TypeError(
            f"argument {name!r} of job {wire_name!r} does not survive a JSON round trip "
            f"({type(value).__name__} comes back as {type(restored).__name__}); "
            "pass plain data (str, int, float, bool, None, list, dict) instead"
        )


def _same_json(restored: Any, original: Any) -> bool:
    if type(restored) is not type(original):
        return False
    if isinstance(original, dict):
        return restored.keys() == original.keys() and all(
            _same_json(restored[k], original[k]) for k in original
        )
    if isinstance(original, list):
        return len(restored) == len(original) and all(
            _same_json(a, b) for a, b in zip(restored, original, strict=True)
        )
    return bool(restored == original)


# --- Declaring jobs ---------------------------------------------------------------------------


@overload
def job(
    wire_name: str,
    *,
    queue: str = ...,
    max_attempts: int | None = ...,
    backoff: Backoff | None = ...,
    tags: Sequence[Tag] = ...,
    takes_context: Literal[False] = ...,
    hooks: ExecutionHooks | None = ...,
    timeout: timedelta | float | None = ...,
    retry_on: Sequence[type[BaseException]] | None = ...,
    discard_on: Sequence[type[BaseException]] = ...,
    priority: int = ...,
    limits: Sequence[Limit] = ...,
    partition: KeySource | None = ...,
) -> Callable[[Callable[P, R]], JobDefinition[P, R]]: ...
@overload
def job(
    wire_name: str,
    *,
    queue: str = ...,
    max_attempts: int | None = ...,
    backoff: Backoff | None = ...,
    tags: Sequence[Tag] = ...,
    takes_context: Literal[True],
    hooks: ExecutionHooks | None = ...,
    timeout: timedelta | float | None = ...,
    retry_on: Sequence[type[BaseException]] | None = ...,
    discard_on: Sequence[type[BaseException]] = ...,
    priority: int = ...,
    limits: Sequence[Limit] = ...,
    partition: KeySource | None = ...,
) -> Callable[[Callable[Concatenate[JobContext, P], R]], JobDefinition[P, R]]: ...
def job(
    wire_name: str,
    *,
    queue: str = "default",
    max_attempts: int | None = None,
    backoff: Backoff | None = None,
    tags: Sequence[Tag] = (),
    takes_context: bool = False,
    hooks: ExecutionHooks | None = None,
    timeout: timedelta | float | None = None,
    retry_on: Sequence[type[BaseException]] | None = None,
    discard_on: Sequence[type[BaseException]] = (),
    priority: int = 0,
    limits: Sequence[Limit] = (),
    partition: KeySource | None = None,
) -> Callable[[Callable[..., Any]], JobDefinition[Any, Any]]:
    """Declare a job type: ``@job("send-invoice", queue="billing", max_attempts=5)``.

    The wire name is mandatory and explicit; it is the job's identity in storage. ``max_attempts``,
    a list ``backoff`` and ``timeout`` are stored with each job (None: the settings'); a callable
    ``backoff`` is applied by the worker at each failure. An exception matching ``discard_on``
    dead-letters at once; with ``retry_on``, only matching exceptions retry. ``hooks`` is for
    adapters such as the Django Tasks backend (see :class:`ExecutionHooks`); applications omit it.
    """
    if callable(wire_name):
        name = getattr(wire_name, "__qualname__", repr(wire_name))
        raise ImproperlyConfigured(
            f"@job needs an explicit wire name: write @job('some-name') above {name}. "
            "Wire Names are mandatory and explicit."
        )
    if not isinstance(wire_name, str) or not wire_name.strip():
        raise ImproperlyConfigured(
            f"A job has an empty Wire Name ({wire_name!r}). Wire Names are mandatory and explicit."
        )
    declared = resolve_policy(queue=queue, timeout=timeout, priority=priority)
    retry = None
    if max_attempts is not None or backoff is not None:
        retry = RetryPolicy(
            max_attempts=DEFAULT_MAX_ATTEMPTS if max_attempts is None else max_attempts, backoff=backoff
        )
    retried = None if retry_on is None else exception_classes("retry_on", retry_on)
    discarded = exception_classes("discard_on", discard_on)
    default_tags = tuple(tag_from_pair(p) for p in normalize_tags(tags))
    limits, partition = job_flow.checked_options(wire_name, limits, partition)

    def register(func: Callable[..., Any]) -> JobDefinition[Any, Any]:
        if not callable(func):
            raise TypeError(f"@job({wire_name!r}) decorates a function, got {func!r}")
        if takes_context and not inspect.signature(func).parameters:
            raise ImproperlyConfigured(
                f"Job {wire_name!r} has takes_context=True, so {func.__qualname__} "
                "must take the context as its first parameter."
            )
        definition: JobDefinition[Any, Any] = JobDefinition(
            wire_name=wire_name,
            func=func,
            queue=queue,
            retry=retry,
            tags=default_tags,
            takes_context=takes_context,
            hooks=hooks,
            timeout=declared.timeout,
            retry_on=retried,
            discard_on=discarded,
            max_attempts=max_attempts,
            priority=priority,
            limits=limits,
            partition=partition,
        )
        job_flow.require_declaration(definition, declared_limits(excluding=wire_name))
        existing = _REGISTRY.get(wire_name)
        if existing is not None and _origin(existing.func) != _origin(func):
            raise ImproperlyConfigured(
                f"Duplicate Wire Name {wire_name!r}: {_origin(func)} and {_origin(existing.func)}. "
                "Wire Names must be unique."
            )
        _REGISTRY[wire_name] = definition  # the same function imported again replaces itself
        return definition

    return register


def exception_classes(name: str, classes: object) -> tuple[type[BaseException], ...]:
    """``retry_on`` / ``discard_on``: a sequence of exception classes (not instances, not strings)."""
    if isinstance(classes, type) and issubclass(classes, BaseException):
        return (classes,)
    if isinstance(classes, str | bytes) or not isinstance(classes, Sequence):
        raise TypeError(f"{name} must be a sequence of exception classes, got {classes!r}")
    for index, item in enumerate(classes):
        if not (isinstance(item, type) and issubclass(item, BaseException)):
            raise TypeError(f"{name}[{index}] must be an exception class, got {item!r}")
    return tuple(classes)


#: ``@job(limits=...)`` checked (kept here too: the Tasks backend checks a task's limits with it).
limit_list = job_flow.limit_list


def declared_limits(*, excluding: str | None = None) -> dict[str, LimitValues]:
    """Every limit the registered jobs declare, by name (all declarations of a name agree:
    ``core.limits.agreeing``); a worker stores them at start (``store.declare_limits``)."""
    declared: dict[str, LimitValues] = {}
    for wire_name, definition in _REGISTRY.items():
        if wire_name != excluding:
            declared = agreeing(definition.limits, declared)
    return declared


def _origin(func: Callable[..., Any]) -> str:
    return f"{func.__module__}.{func.__qualname__}"


def get(wire_name: str) -> JobDefinition[Any, Any] | None:
    return _REGISTRY.get(wire_name)


def retry_policy(
    wire_name: str, max_attempts: int | None, backoff: Sequence[float] | None, default: RetryPolicy
) -> RetryPolicy:
    """The retry policy of one job as a worker applies it: what its row stores (``max_attempts``,
    ``backoff``), else the ``@job``'s callable backoff (which no row can store), else ``default``
    (the settings' ``RETRY``). See ``core.retry.job_retry_policy`` for the store's side."""
    definition = _REGISTRY.get(wire_name)
    declared = None if definition is None or definition.retry is None else definition.retry.backoff
    if backoff is None and callable(declared):
        default = RetryPolicy(max_attempts=default.max_attempts, backoff=declared)
    return job_retry_policy(max_attempts, backoff, default)


def definitions() -> dict[str, JobDefinition[Any, Any]]:
    """Every registered job, by wire name."""
    return dict(_REGISTRY)


def unregister(wire_name: str) -> None:
    """Forget a definition (for tests that declare throwaway jobs)."""
    _REGISTRY.pop(wire_name, None)


@dataclass(frozen=True, slots=True)
class Routed:
    definition: JobDefinition[Any, Any]
    args: list[Any]
    kwargs: dict[str, Any]


@dataclass(frozen=True, slots=True)
class NotRoutable:
    reason: str


def route(wire_name: str, payload: Any) -> Routed | NotRoutable:
    """Find the handler for a claimed job and bind its payload, or say exactly why not."""
    definition = _REGISTRY.get(wire_name)
    if definition is None:
        return NotRoutable(actors.no_handler(wire_name))
    try:
        args, kwargs = definition.decode(payload)
    except PayloadError as exc:
        return NotRoutable(actors.no_longer_decodes(wire_name, exc))
    return Routed(definition, args, kwargs)
