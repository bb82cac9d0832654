"""Time limits for running handlers: a watchdog that stops attempts past their ``timeout``.

One thread per worker process, started by the first job that has a time limit (a worker whose
jobs have none never starts it, and pays nothing per job). It keeps the deadlines in a heap and,
when one passes while its attempt is still in the handler:

1. marks the attempt timed out and interrupts it: an ``async def`` handler's task is cancelled;
   a sync handler gets :class:`~backwave_django.JobTimeout` raised in its thread (CPython's
   ``PyThreadState_SetAsyncExc``, delivered at the thread's next Python instruction);
2. after ``TIMEOUT_GRACE`` more, an attempt that still has not stopped (blocked in C code, or
   swallowing the cancellation) is abandoned: its timeout failure is reported without it, its
   slot is freed, and the executor replaces its thread.

See docs/jobs.md ("Timeouts").
"""

from __future__ import annotations

import ctypes
import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..exceptions import JobTimeout

logger = logging.getLogger("backwave_django.worker")


def raise_in_thread(thread_id: int, exception: type[BaseException] | None) -> bool:
    """Raise ``exception`` in another Python thread at its next instruction (None: cancel a pending
    one). Returns whether the thread was found."""
    argument = ctypes.py_object(exception) if exception is not None else None
    found = ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), argument)
    if found > 1:  # more than one thread state touched: undo, as CPython's documentation asks
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), None)
    return bool(found)


@dataclass(eq=False)
class Deadline:
    """One attempt's time limit, shared between the job thread and the watchdog under ``lock``."""

    seconds: float
    #: The job thread running a sync handler (None for an ``async def`` handler).
    thread_id: int | None
    #: Cancels an async handler's task (None for a sync handler).
    cancel_task: Callable[[], None] | None
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: True while the handler runs; the watchdog interrupts only then.
    armed: bool = True
    timed_out: bool = False

    #: The watchdog watching this deadline (set by :meth:`Watchdog.watch`), told when it is disarmed.
    watchdog: Watchdog | None = None

    def disarm(self) -> None:
        """Called by the job thread as the handler returns or raises: no interruption after this.

        A ``JobTimeout`` raised in this thread but not yet delivered is withdrawn, so that it can
        never go off in the worker's own code. (One delivered before this call ends the attempt as
        timed out, which it was.)
        """
        with self.lock:
            was_armed, self.armed = self.armed, False
            if self.timed_out and self.thread_id is not None:
                raise_in_thread(self.thread_id, None)
        if was_armed and self.watchdog is not None:
            self.watchdog.forget()

    def interrupt(self) -> bool:
        """Stop the handler if it still runs; returns whether it did (it is then timed out)."""
        with self.lock:
            if not self.armed:
                return False
            self.timed_out = True
            if self.thread_id is not None:
                raise_in_thread(self.thread_id, JobTimeout)
            elif self.cancel_task is not None:
                self.cancel_task()
            return True


#: The fewest disarmed entries worth compacting the watchdog's heap for.
COMPACT_AT = 256


class Watchdog:
    """Interrupts attempts at their deadline and gives up on them ``grace`` seconds later.

    An attempt that ends in time leaves its entry in the heap until the entry's due time; a busy
    worker with long time limits would keep every finished attempt (and what it holds) alive
    that long. So the heap is compacted, dropping disarmed entries, whenever they are more than
    half of it (and at least :data:`COMPACT_AT`): memory stays proportional to the attempts
    running, for amortized constant work per attempt.
    """

    def __init__(self, *, grace: float, on_abandon: Callable[[Any], None]) -> None:
        self.grace = grace
        self.on_abandon = on_abandon
        self.lock = threading.Lock()
        self.wakeup = threading.Condition(self.lock)
        self.heap: list[tuple[float, int, bool, Deadline, Any]] = []
        self.order = itertools.count()
        self.thread: threading.Thread | None = None
        self.stopped = False
        #: Heap entries whose deadline was disarmed before it came due.
        self.disarmed = 0

    def watch(self, deadline: Deadline, owner: Any) -> None:
        """Start ``deadline``'s clock now; ``owner`` is what ``on_abandon`` receives."""
        due = time.monotonic() + deadline.seconds
        deadline.watchdog = self
        with self.lock:
            if self.thread is None:
                self.thread = threading.Thread(target=self._serve, name="backwave-timeouts", daemon=True)
                self.thread.start()
            heapq.heappush(self.heap, (due, next(self.order), False, deadline, owner))
            if self.heap[0][3] is deadline:
                self.wakeup.notify()

    def forget(self) -> None:
        """A watched deadline was disarmed: compact the heap when disarmed entries are most of it."""
        with self.lock:
            self.disarmed += 1
            if self.disarmed >= COMPACT_AT and 2 * self.disarmed > len(self.heap):
                # Entries due for their grace check belong to attempts already interrupted: kept.
                self.heap = [entry for entry in self.heap if entry[2] or entry[3].armed]
                heapq.heapify(self.heap)
                self.disarmed = 0

    def stop(self) -> None:
        with self.lock:
            self.stopped = True
            self.wakeup.notify()

    def _serve(self) -> None:
        while True:
            with self.lock:
                while not self.stopped and (not self.heap or self.heap[0][0] > time.monotonic()):
                    timeout = None if not self.heap else self.heap[0][0] - time.monotonic()
                    self.wakeup.wait(timeout)
                if self.stopped:
                    return
                _, _, grace_over, deadline, owner = heapq.heappop(self.heap)
                if not grace_over and not deadline.armed:
                    self.disarmed = max(self.disarmed - 1, 0)  # popped a disarmed entry
            if not grace_over:
                if deadline.interrupt():
                    with self.lock:
                        due = time.monotonic() + self.grace
                        heapq.heappush(self.heap, (due, next(self.order), True, deadline, owner))
            elif deadline.armed:
                try:
                    self.on_abandon(owner)
                except Exception:
                    logger.exception("Abandoning a timed-out job failed")
