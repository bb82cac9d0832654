"""The watchdog's bookkeeping, without a database or handlers: what it keeps of attempts that
ended in time, and that it still stops the ones that did not."""

from __future__ import annotations

import gc
import threading
import weakref

from backwave_django.worker.timeouts import COMPACT_AT, Deadline, Watchdog


class Owner:
    """Stands for the ``Running`` attempt a deadline belongs to."""


def _watchdog() -> Watchdog:
    return Watchdog(grace=3600.0, on_abandon=lambda owner: None)


def _deadline(seconds: float = 3600.0, on_cancel: threading.Event | None = None) -> Deadline:
    return Deadline(seconds=seconds, thread_id=None, cancel_task=on_cancel.set if on_cancel else None)


def test_attempts_that_end_in_time_are_not_kept_until_their_deadline() -> None:
    watchdog = _watchdog()
    owners: list[weakref.ref[Owner]] = []
    try:
        for _ in range(10 * COMPACT_AT):
            owner, deadline = Owner(), _deadline()
            owners.append(weakref.ref(owner))
            watchdog.watch(deadline, owner)
            deadline.disarm()
            del owner, deadline
        gc.collect()
        # An hour-long limit used to keep every finished attempt (and all it holds) for the hour.
        assert len(watchdog.heap) < 2 * COMPACT_AT
        assert sum(ref() is not None for ref in owners) < 2 * COMPACT_AT
    finally:
        watchdog.stop()


def test_compaction_keeps_every_attempt_still_running_and_it_is_still_stopped() -> None:
    watchdog = _watchdog()
    running = [(Owner(), _deadline()) for _ in range(COMPACT_AT)]
    stopped = threading.Event()
    short = _deadline(seconds=0.2, on_cancel=stopped)
    try:
        for owner, deadline in running:
            watchdog.watch(deadline, owner)
        watchdog.watch(short, Owner())
        for _ in range(4 * COMPACT_AT):
            done = _deadline()
            watchdog.watch(done, Owner())
            done.disarm()
        kept = {id(entry[3]) for entry in watchdog.heap}
        assert {id(deadline) for _, deadline in running} | {id(short)} <= kept
        assert len(watchdog.heap) < 3 * COMPACT_AT
        assert stopped.wait(30), "the short deadline was not interrupted after the heap was compacted"
        assert short.timed_out
        assert not any(deadline.timed_out for _, deadline in running)
    finally:
        watchdog.stop()
