"""Running one claimed job: route it, call its handler, and turn what happened into an outcome.

Sync handlers run on a thread pool, ``async def`` handlers on one event loop in its own thread.
Whatever the handler does, exactly one :class:`Finished` comes back through ``on_finished``.

Routing and the outcome rules (output limits, cancel versus failure, the retry instant) are plain
functions below, shared by the :class:`Executor` and by :func:`run_inline`, which runs a job to
completion on the calling thread for the test harness (``backwave_django.testing``): one execution
path, two ways of scheduling it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import logging
import threading
import time
import traceback
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from django.db import close_old_connections

from .. import clock, tracing
from ..conf import BackWaveSettings
from ..context import JobCancelled, JobContext, running_as
from ..core import actors
from ..core.encoding import json_size
from ..core.outcomes import (
    Cancelled,
    ClaimedJob,
    Failure,
    Outcome,
    OutcomeReport,
    Snoozed,
    Success,
    Unroutable,
)
from ..exceptions import Discard, JobTimeout, OutputTooLarge, Snooze
from ..registry import AttemptHooks, NotRoutable, Routed, get, retry_policy, route
from .threads import Call as _Call, JobThreads
from .timeouts import Deadline, Watchdog

logger = logging.getLogger("backwave_django.worker")

_T = TypeVar("_T")


@dataclass(slots=True, eq=False)
class Running:
    """A job this worker holds a lease on and is executing."""

    claimed: ClaimedJob
    context: JobContext
    started: datetime
    task: asyncio.Task[Any] | None = None
    abandoned: bool = False
    #: The adapter's view of this attempt, when the job's definition has execution hooks.
    attempt_hooks: AttemptHooks | None = None
    #: The attempt's time limit while its handler runs (None: the job has no timeout).
    deadline: Deadline | None = None
    #: Set once the attempt's outcome is decided: a later one (a handler that returns after it
    #: was abandoned) is dropped.
    finished: bool = False
    #: The handler's thread was abandoned past its timeout's grace (and replaced).
    thread_retired: bool = False
    #: The sync handler's call returned (so its thread is not stuck).
    returned: bool = False
    #: Set with the attempt's outcome when a job thread waits on an ``async def`` handler.
    decided: threading.Event | None = None
    #: When the handler started and returned (Unix time), stamped only for a worker with metrics
    #: or whose prefetch grows with short jobs (``options.Prefetch``).
    handler_started: float = 0.0
    handler_ended: float = 0.0
    #: The attempt's trace span, once its handler started (only with OpenTelemetry; docs/tracing.md).
    span: Any = None

    @property
    def timed_out(self) -> bool:
        return self.deadline is not None and self.deadline.timed_out


@dataclass(frozen=True, slots=True)
class Finished:
    """How an attempt ended, ready to become an ``OutcomeReport``."""

    running: Running
    outcome: Outcome
    output: Any = None
    failure_detail: str | None = None
    #: What a Failure was made of (the trace span records it).
    exception: BaseException | None = None

    def report(self, worker_id: str) -> OutcomeReport:
        """The fenced outcome write for this attempt, with the tags and progress the handler added."""
        claimed = self.running.claimed
        context = self.running.context
        return OutcomeReport(
            job_id=claimed.job_id,
            worker_id=worker_id,
            attempt=claimed.attempt,
            outcome=self.outcome,
            failure_detail=self.failure_detail,
            added_tags=context.added_tags,
            output=self.output,
            progress=context.take_unsaved_progress(),
        )


def failure_detail(exc: BaseException) -> str:
    """``{qualified type}: {message}\\n{traceback}`` (the store truncates it to the limit)."""
    kind = type(exc)
    name = f"{kind.__module__}.{kind.__qualname__}"
    trace = "".join(traceback.format_exception(kind, exc, exc.__traceback__))
    return f"{name}: {exc}\n{trace}"


def route_claimed(running: Running) -> Routed | Finished:
    """Bind a claimed job's payload to its handler, or the Unroutable outcome that quarantines it."""
    claimed = running.claimed
    routed = route(claimed.wire_name, claimed.payload)
    if isinstance(routed, NotRoutable):
        return Finished(running, Unroutable(reason=routed.reason))
    return routed


def handler_arguments(running: Running, routed: Routed) -> list[Any]:
    """The positional arguments of the call: the context first when the job takes it.

    A definition with execution hooks (a Django task, see ``registry.ExecutionHooks``) starts its
    attempt here, right before the call, and supplies its own context argument.
    """
    definition = routed.definition
    context: Any = running.context
    if definition.hooks is not None:
        running.attempt_hooks = definition.hooks.start(running.context)
        context = running.attempt_hooks.handler_context
    return [context, *routed.args] if definition.takes_context else list(routed.args)


def settle(finished: Finished) -> Finished:
    """Tell the attempt's execution hooks how it ended (their errors are logged, never the
    outcome's), and end its trace span. Called once per attempt, whatever way it ended."""
    attempt = finished.running.attempt_hooks
    if attempt is not None:
        try:
            attempt.finish(finished.outcome, finished.output, finished.failure_detail)
        except Exception:
            logger.exception("Execution hooks of job %s failed", finished.running.claimed.job_id)
    if tracing.ENABLED:
        running = finished.running
        # An attempt whose handler never started (quarantined, timed out in the harness) gets its
        # span here, for the outcome alone.
        span = tracing.start_attempt(running.claimed) if running.span is None else running.span
        tracing.end_attempt(span, finished.outcome, finished.exception)
    return finished


_UNTRACED = contextlib.nullcontext()


def traced(running: Running) -> AbstractContextManager[object]:
    """Start the attempt's trace span and make it current while the handler runs (docs/tracing.md);
    :func:`settle` ends it. Nothing without OpenTelemetry."""
    if not tracing.ENABLED:
        return _UNTRACED
    running.span = tracing.start_attempt(running.claimed)
    return tracing.current(running.span)


def success(running: Running, result: Any, *, settings: BackWaveSettings, now: datetime) -> Finished:
    """A returned value is a Success, unless it cannot be stored as the job's output (a Failure)."""
    if result is None:  # most handlers return nothing: no output to encode and measure
        return Finished(running, Success(), output=None)
    try:
        size = json_size(result)
    except (TypeError, ValueError) as exc:
        message = f"output of job {running.claimed.job_id} is not JSON-serializable: {exc}"
        return failure(running, TypeError(message), settings=settings, now=now)
    if size > settings.max_output_bytes:
        too_large = OutputTooLarge(running.claimed.job_id, size, settings.max_output_bytes)
        return failure(running, too_large, settings=settings, now=now)
    return Finished(running, Success(), output=result)


def from_exception(
    running: Running, exc: BaseException, *, settings: BackWaveSettings, now: datetime
) -> Finished:
    """What a raised exception makes of the attempt.

    Past its time limit: a timeout failure. ``Snooze``: Scheduled again, the attempt given back.
    ``Discard``, or an exception ``discard_on`` names (or ``retry_on`` does not): Dead-Lettered at
    once. A cancellation after an operator's cancel request: Cancelled. Anything else: a failure,
    retried by the job's policy.
    """
    if running.timed_out or isinstance(exc, JobTimeout):
        return timed_out(running, exc, settings=settings, now=now)
    if isinstance(exc, Snooze):
        return Finished(running, Snoozed(next_due_time=now + exc.delay))
    if isinstance(exc, JobCancelled | asyncio.CancelledError) and running.context.cancel_requested:
        return Finished(running, Cancelled(cause=actors.OPERATOR_CANCEL))
    if isinstance(exc, Discard):
        return Finished(
            running,
            Failure(next_due_time=None, error=exc.reason),
            failure_detail=failure_detail(exc),
            exception=exc,
        )
    definition = get(running.claimed.wire_name)
    discard = definition is not None and definition.discards(exc)
    return failure(running, exc, settings=settings, now=now, discard=discard)


def timed_out(
    running: Running, exc: BaseException | None, *, settings: BackWaveSettings, now: datetime
) -> Finished:
    """The failure of an attempt stopped at its time limit: ``timed out after {seconds}s``, with
    the traceback of where the handler was (when it stopped at all)."""
    seconds = running.claimed.timeout
    message = f"timed out after {seconds:g}s" if seconds is not None else (str(exc) if exc else "timed out")
    stopped = JobTimeout(message)
    if exc is not None:
        stopped = stopped.with_traceback(exc.__traceback__)
    return failure(running, stopped, settings=settings, now=now)


def failure(
    running: Running, exc: BaseException, *, settings: BackWaveSettings, now: datetime, discard: bool = False
) -> Finished:
    """A Failure due again by the job's own retry policy; at the ceiling (or ``discard``) it dead-letters."""
    claimed = running.claimed
    retry_at = None
    if not discard:
        policy = retry_policy(claimed.wire_name, claimed.max_attempts, claimed.backoff, settings.retry)
        retry_at = policy.next_attempt_at(claimed.attempt, now)
    return Finished(
        running,
        Failure(next_due_time=retry_at, error=str(exc) or type(exc).__name__),
        failure_detail=failure_detail(exc),
        exception=exc,
    )


class Executor:
    """Runs handlers for the pump: threads for sync handlers, one event loop for async ones.

    Exactly one outcome per attempt reaches ``on_finished``. Jobs with a ``timeout`` are watched
    by a :class:`~backwave_django.worker.timeouts.Watchdog` (started with the first such job).
    ``abandoned_threads`` counts the sync handlers abandoned past their grace that are still stuck.
    """

    def __init__(
        self,
        *,
        concurrency: int,
        settings: BackWaveSettings,
        on_finished: Callable[[Finished], None],
        on_started: Callable[[Running], None] | None = None,
    ) -> None:
        self.settings = settings
        self.report: Callable[[Finished], None] = on_finished
        #: Called on the job thread as each handler starts (a prefetched job's, when it leaves the queue).
        self.on_started = on_started
        #: Stamp each handler's start and end (``Running.handler_started``/``handler_ended``): only
        #: when the worker records metrics or its prefetch grows with short jobs.
        self.timed = False
        self.threads = JobThreads(concurrency)
        self.loop = asyncio.new_event_loop()
        self.loop_thread = threading.Thread(target=self.loop.run_forever, name="backwave-async", daemon=True)
        self.loop_thread.start()
        self.watchdog: Watchdog | None = None
        self.abandoned_threads = 0
        self.abandoned_lock = threading.Lock()

    def start_many(self, batch: list[Running]) -> None:
        """Route a claimed batch and hand it to the job threads in one hand-off.

        Every attempt, sync or async, takes one job thread while its handler runs (an ``async
        def`` handler runs on the event loop while its thread waits for the outcome), so at most
        ``concurrency`` handlers run at once. A batch larger than the idle threads (the pump's
        prefetch) waits in the threads' queue, and a thread that finishes takes the next job at
        once; its time limit starts only then, when its handler starts.
        """
        calls: list[_Call] = []
        for running in batch:
            if running.claimed.cancel_requested:
                running.context.request_cancel()  # a retried job whose cancel flag is still raised
            routed = route_claimed(running)
            if isinstance(routed, Finished):
                self.on_finished(routed)
            elif routed.definition.is_async:
                calls.append((self._run_async_on_thread, (running, routed)))
            else:
                calls.append((self._run_sync, (running, routed)))
        self.threads.submit_many(calls)

    def pending(self) -> int:
        """Handed-over jobs whose handler has not started (they hold a lease, not a slot)."""
        return self.threads.pending()

    def take_pending(self) -> list[Running]:
        """Take back every job whose handler has not started: none of them will run."""
        return [args[0] for _, args in self.threads.take_pending()]

    def withdraw(self, running: Running) -> bool:
        """Take back one job if its handler has not started yet."""
        return self.threads.withdraw(running)

    def on_finished(self, finished: Finished) -> None:
        """Pass an attempt's first outcome on, through its execution hooks; drop any later one."""
        running = finished.running
        with self.abandoned_lock:
            if running.finished:
                return
            running.finished = True
        try:
            self.report(settle(finished))
        finally:
            if running.decided is not None:
                running.decided.set()  # the async handler's thread is free for the next job

    def cancel(self, running: Running) -> None:
        """Deliver a cancel request: raise the flag, and cancel an async handler's task."""
        running.context.request_cancel()
        task = running.task
        if task is not None:
            self.loop.call_soon_threadsafe(task.cancel)

    def _crashed(self, running: Running, future: concurrent.futures.Future[Any]) -> None:
        exc = future.exception()
        if exc is not None:  # a bug in the wrapper itself: never leave the job without an outcome
            logger.error("Executing job %s failed unexpectedly", running.claimed.job_id, exc_info=exc)
            self.on_finished(self._failure(running, exc))

    # --- Time limits ----------------------------------------------------------------------------

    def _watch(
        self, running: Running, *, thread_id: int | None, cancel_task: Callable[[], None] | None
    ) -> None:
        """Start the attempt's clock (only jobs with a ``timeout`` get here)."""
        seconds = running.claimed.timeout
        assert seconds is not None
        running.deadline = Deadline(seconds=seconds, thread_id=thread_id, cancel_task=cancel_task)
        if self.watchdog is None:
            self.watchdog = Watchdog(
                grace=self.settings.timeout_grace.total_seconds(), on_abandon=self._abandon
            )
        self.watchdog.watch(running.deadline, running)

    def _cancel_task(self, running: Running) -> None:
        if running.task is not None:
            self.loop.call_soon_threadsafe(running.task.cancel)

    def _abandon(self, running: Running) -> None:
        """From the watchdog: a handler still running ``TIMEOUT_GRACE`` after its timeout. Report
        its timeout failure now, free its slot and replace its thread."""
        claimed = running.claimed
        deadline = running.deadline
        logger.error(
            "Job %s %s (attempt %d) did not stop within %.0f s of its %g s timeout; abandoning its %s",
            claimed.wire_name,
            claimed.job_id,
            claimed.attempt,
            self.settings.timeout_grace.total_seconds(),
            claimed.timeout or 0,
            "thread" if deadline is not None and deadline.thread_id is not None else "task",
        )
        # The outcome first: a pump that sees the stuck count go up must find it already handed
        # over (it gives back the leases of the jobs it still holds when too many are stuck).
        self.on_finished(timed_out(running, None, settings=self.settings, now=clock.now()))
        if deadline is not None and deadline.thread_id is not None:
            with self.abandoned_lock:
                if running.returned:  # it came back meanwhile: nothing is stuck
                    return
                self.abandoned_threads += 1
                running.thread_retired = True
            self.threads.retire(deadline.thread_id)

    # --- Running handlers -----------------------------------------------------------------------

    def _run_sync(self, running: Running, routed: Routed) -> None:
        if self.on_started is not None:
            self.on_started(running)
        try:
            finished = self._call_sync(running, routed)
        except BaseException as exc:  # a bug in the wrapper itself: never leave the job without an outcome
            logger.error("Executing job %s failed unexpectedly", running.claimed.job_id, exc_info=exc)
            finished = self._failure(running, exc)
        with self.abandoned_lock:
            running.returned = True
            if running.thread_retired:  # abandoned, and back at last: no longer stuck
                running.thread_retired = False
                self.abandoned_threads -= 1
        self.on_finished(finished)

    def _call_sync(self, running: Running, routed: Routed) -> Finished:
        close_old_connections()
        try:
            arguments = handler_arguments(running, routed)
            with running_as(running.context), traced(running):
                if running.claimed.timeout is not None:
                    self._watch(running, thread_id=threading.get_ident(), cancel_task=None)
                if self.timed:
                    running.handler_started = time.time()
                try:
                    result = routed.definition.func(*arguments, **routed.kwargs)
                finally:
                    if self.timed:
                        running.handler_ended = time.time()
                    if running.deadline is not None:
                        running.deadline.disarm()
        except BaseException as exc:
            return self._from_exception(running, exc)
        else:
            return self._success(running, result)
        finally:
            close_old_connections()

    def _run_async_on_thread(self, running: Running, routed: Routed) -> None:
        """Start an ``async def`` handler on the event loop and hold this thread (its slot) until
        the attempt's outcome is decided: it ended, or it was abandoned past its time limit."""
        running.decided = threading.Event()
        if self.on_started is not None:
            self.on_started(running)
        future = asyncio.run_coroutine_threadsafe(self._run_async(running, routed), self.loop)
        future.add_done_callback(functools.partial(self._crashed, running))
        running.decided.wait()

    async def _run_async(self, running: Running, routed: Routed) -> None:
        # Execution hooks may use the ORM, which Django refuses on an event loop: run them on a thread.
        hooked = routed.definition.hooks is not None
        try:
            if hooked:
                arguments = await self._off_loop(handler_arguments, running, routed)
            else:
                arguments = handler_arguments(running, routed)
            if self.timed:
                running.handler_started = time.time()
            with running_as(running.context), traced(running):  # the task below copies this context
                running.task = asyncio.ensure_future(routed.definition.func(*arguments, **routed.kwargs))
            if running.claimed.timeout is not None:
                self._watch(
                    running, thread_id=None, cancel_task=functools.partial(self._cancel_task, running)
                )
            if running.context.cancel_requested:
                running.task.cancel()
            try:
                result = await running.task
            finally:
                if self.timed:
                    running.handler_ended = time.time()
                if running.deadline is not None:
                    running.deadline.disarm()
        except BaseException as exc:
            finished = self._from_exception(running, exc)
        else:
            finished = self._success(running, result)
        if hooked:
            await self._off_loop(self.on_finished, finished)
        else:
            self.on_finished(finished)

    async def _off_loop(self, function: Callable[..., _T], *args: Any) -> _T:
        """Await ``function(*args)`` run on a job thread, with the connection checks of a sync job."""

        def call() -> _T:
            close_old_connections()
            try:
                return function(*args)
            finally:
                close_old_connections()

        return await self.loop.run_in_executor(None, call)

    def _success(self, running: Running, result: Any) -> Finished:
        if running.timed_out:  # it caught its JobTimeout (or cancellation) and returned anyway
            return timed_out(running, None, settings=self.settings, now=clock.now())
        return success(running, result, settings=self.settings, now=clock.now())

    def _from_exception(self, running: Running, exc: BaseException) -> Finished:
        return from_exception(running, exc, settings=self.settings, now=clock.now())

    def _failure(self, running: Running, exc: BaseException) -> Finished:
        return failure(running, exc, settings=self.settings, now=clock.now())

    def shutdown(self) -> None:
        if self.watchdog is not None:
            self.watchdog.stop()
        self.threads.shutdown()
        self.loop.call_soon_threadsafe(self.loop.stop)


def run_inline(running: Running, *, settings: BackWaveSettings, now: datetime) -> Finished:
    """Route and run one claimed job to completion on the calling thread; ``now`` stamps a retry.

    The test harness's pump: the same routing and outcome rules as the :class:`Executor`, without
    its threads (and without time limits: the harness decides when an attempt times out, see
    ``BackWaveHarness.time_out``). An ``async def`` handler runs under ``asyncio.run``, so this
    must not be called from a running event loop.
    """
    routed = route_claimed(running)
    if isinstance(routed, Finished):
        return settle(routed)
    try:
        with running_as(running.context), traced(running):
            result = routed.definition.func(*handler_arguments(running, routed), **routed.kwargs)
            if routed.definition.is_async:
                result = asyncio.run(result)
    except BaseException as exc:
        return settle(from_exception(running, exc, settings=settings, now=now))
    return settle(success(running, result, settings=settings, now=now))
