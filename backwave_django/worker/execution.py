"""Running one claimed job: route it, call its handler, and turn what happened into an outcome.

Sync handlers run on a thread pool, ``async def`` handlers on one event loop in its own thread.
Whatever the handler does, exactly one :class:`Finished` comes back through ``on_finished``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import close_old_connections
from django.utils import timezone

from ..conf import BackWaveSettings
from ..context import JobCancelled, JobContext
from ..core.encoding import json_size
from ..core.outcomes import Cancelled, ClaimedJob, Failure, Outcome, Success, Unroutable
from ..exceptions import OutputTooLarge
from ..registry import NotRoutable, Routed, get, route

logger = logging.getLogger("backwave_django.worker")

OPERATOR_CANCEL_CAUSE = "operator-cancel"


@dataclass(slots=True)
class Running:
    """A job this worker holds a lease on and is executing."""

    claimed: ClaimedJob
    context: JobContext
    started: datetime
    task: asyncio.Task[Any] | None = None
    abandoned: bool = False


@dataclass(frozen=True, slots=True)
class Finished:
    """How an attempt ended, ready to become an ``OutcomeReport``."""

    running: Running
    outcome: Outcome
    output: Any = None
    failure_detail: str | None = None


def failure_detail(exc: BaseException) -> str:
    """``{qualified type}: {message}\\n{traceback}`` (the store truncates it to the limit)."""
    kind = type(exc)
    name = f"{kind.__module__}.{kind.__qualname__}"
    trace = "".join(traceback.format_exception(kind, exc, exc.__traceback__))
    return f"{name}: {exc}\n{trace}"


class Executor:
    """Runs handlers for the pump: threads for sync handlers, one event loop for async ones."""

    def __init__(
        self, *, concurrency: int, settings: BackWaveSettings, on_finished: Callable[[Finished], None]
    ) -> None:
        self.settings = settings
        self.on_finished = on_finished
        self.threads = concurrent.futures.ThreadPoolExecutor(
            max_workers=concurrency, thread_name_prefix="backwave-job"
        )
        self.loop = asyncio.new_event_loop()
        self.loop_thread = threading.Thread(target=self.loop.run_forever, name="backwave-async", daemon=True)
        self.loop_thread.start()

    def start(self, running: Running) -> None:
        claimed = running.claimed
        routed = route(claimed.wire_name, claimed.payload)
        if isinstance(routed, NotRoutable):
            self.on_finished(Finished(running, Unroutable(reason=routed.reason)))
            return
        if routed.definition.is_async:
            future = asyncio.run_coroutine_threadsafe(self._run_async(running, routed), self.loop)
            future.add_done_callback(lambda f: self._crashed(running, f))
        else:
            self.threads.submit(self._run_sync, running, routed).add_done_callback(
                lambda f: self._crashed(running, f)
            )

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

    def _args(self, running: Running, routed: Routed) -> list[Any]:
        return [running.context, *routed.args] if routed.definition.takes_context else list(routed.args)

    def _run_sync(self, running: Running, routed: Routed) -> None:
        close_old_connections()
        try:
            result = routed.definition.func(*self._args(running, routed), **routed.kwargs)
        except BaseException as exc:
            self.on_finished(self._from_exception(running, exc))
        else:
            self.on_finished(self._success(running, result))
        finally:
            close_old_connections()

    async def _run_async(self, running: Running, routed: Routed) -> None:
        coroutine = routed.definition.func(*self._args(running, routed), **routed.kwargs)
        running.task = asyncio.ensure_future(coroutine)
        if running.context.cancel_requested:
            running.task.cancel()
        try:
            result = await running.task
        except BaseException as exc:
            self.on_finished(self._from_exception(running, exc))
        else:
            self.on_finished(self._success(running, result))

    def _success(self, running: Running, result: Any) -> Finished:
        try:
            size = json_size(result)
        except (TypeError, ValueError) as exc:
            message = f"output of job {running.claimed.job_id} is not JSON-serializable: {exc}"
            return self._failure(running, TypeError(message))
        if size > self.settings.max_output_bytes:
            too_large = OutputTooLarge(running.claimed.job_id, size, self.settings.max_output_bytes)
            return self._failure(running, too_large)
        return Finished(running, Success(), output=result)

    def _from_exception(self, running: Running, exc: BaseException) -> Finished:
        cancelled = isinstance(exc, JobCancelled | asyncio.CancelledError)
        if cancelled and running.context.cancel_requested:
            return Finished(running, Cancelled(cause=OPERATOR_CANCEL_CAUSE))
        return self._failure(running, exc)

    def _failure(self, running: Running, exc: BaseException) -> Finished:
        claimed = running.claimed
        definition = get(claimed.wire_name)
        policy = (
            definition.retry
            if definition is not None and definition.retry is not None
            else self.settings.retry
        )
        retry_at = policy.next_attempt_at(claimed.attempt, timezone.now())
        return Finished(
            running,
            Failure(next_due_time=retry_at, error=str(exc) or type(exc).__name__),
            failure_detail=failure_detail(exc),
        )

    def shutdown(self) -> None:
        self.threads.shutdown(wait=False, cancel_futures=True)
        self.loop.call_soon_threadsafe(self.loop.stop)
