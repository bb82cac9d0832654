"""The job threads: a fixed set of threads running the worker's handler calls from one queue."""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Callable
from typing import Any

logger = logging.getLogger("backwave_django.worker")

#: A call the threads run: a function and its arguments (the first is the job's ``Running``).
Call = tuple[Callable[..., None], tuple[Any, ...]]


class JobThreads:
    """A fixed set of threads running calls from one queue, for the sync handlers.

    Leaner than ``concurrent.futures.ThreadPoolExecutor`` on the hot path: no future per job, and
    a batch of calls wakes one idle thread, not one per call. A thread that takes a call while
    more wait wakes the next idle one before running it, so calls that block (I/O, sleeps) fan
    out over the threads at once, while quick calls are run back to back by the first thread
    awake instead of paying a thread switch each. At most one thread is on its way up at a time
    (``waking``): it takes the next call when it arrives and wakes the one after, so a batch of
    quick calls costs one wake-up, not one per call. The calls report their own outcome (see
    :meth:`Executor._run_sync`), so nothing waits on them. Threads are daemons: :meth:`shutdown`
    drops calls not yet started and lets running ones finish in the background.

    A thread stuck in a handler that was abandoned is :meth:`retire`\\ d: a new thread takes its
    place at once, and the stuck one exits if its call ever returns.
    """

    def __init__(self, size: int) -> None:
        self.lock = threading.Lock()
        self.ready = threading.Condition(self.lock)
        self.calls: collections.deque[Call] = collections.deque()
        self.idle = 0
        self.waking = False
        self.stopped = False
        self.retired: set[int] = set()
        self.started = 0
        self.threads: list[threading.Thread] = []
        for _ in range(size):
            self._start_thread()

    def _start_thread(self) -> None:
        thread = threading.Thread(target=self._serve, name=f"backwave-job-{self.started}", daemon=True)
        self.started += 1
        self.threads.append(thread)
        thread.start()

    def submit_many(self, calls: list[Call]) -> None:
        if not calls:
            return
        with self.lock:
            self.calls.extend(calls)
            self._wake_one()

    def retire(self, thread_id: int) -> None:
        """Replace a thread stuck in an abandoned call; it exits if the call ever returns."""
        with self.lock:
            self.retired.add(thread_id)
            if self.stopped:
                return
        self._start_thread()

    def shutdown(self) -> None:
        with self.lock:
            self.stopped = True
            self.calls.clear()
            self.ready.notify_all()

    def pending(self) -> int:
        """How many calls wait for a thread (prefetched jobs not started yet)."""
        return len(self.calls)

    def take_pending(self) -> list[Call]:
        """Remove and return every call no thread has taken yet: they will never run."""
        with self.lock:
            taken = list(self.calls)
            self.calls.clear()
            return taken

    def withdraw(self, first_arg: object) -> bool:
        """Remove the waiting call whose first argument is ``first_arg``; False once it started."""
        with self.lock:
            for index, (_, args) in enumerate(self.calls):
                if args and args[0] is first_arg:
                    del self.calls[index]
                    return True
            return False

    def _next(self) -> Call | None:
        with self.lock:
            if threading.get_ident() in self.retired:
                self.retired.discard(threading.get_ident())
                return None  # its place was taken while it was stuck
            while not self.calls and not self.stopped:
                self.idle += 1
                try:
                    self.ready.wait()
                finally:
                    self.idle -= 1
                    self.waking = False  # (only a woken thread returns from the wait)
            if self.stopped:
                return None
            call = self.calls.popleft()
            if self.calls:
                self._wake_one()  # more work: wake the next thread while this one runs
            return call

    def _wake_one(self) -> None:
        """With the lock held: wake an idle thread, unless one is already on its way."""
        if self.idle and not self.waking:
            self.waking = True
            self.ready.notify()

    def _serve(self) -> None:
        while (item := self._next()) is not None:
            call, args = item
            try:
                call(*args)
            except BaseException:  # the calls catch their own errors; this is the last line of defence
                logger.exception("A job thread's call failed")
