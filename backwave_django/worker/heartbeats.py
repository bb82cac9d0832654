"""Heartbeats: renewing the leases of every job a worker holds, running or prefetched.

One ``store.heartbeat`` statement for all of them. A lease that was not renewed is lost: a job
still waiting for a thread is taken back before it starts, a running one is abandoned (its
result will not be reported). A raised cancel flag is delivered to the handler.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta

from .. import store
from .execution import Executor, Running

logger = logging.getLogger("backwave_django.worker")


def renew_leases(
    worker_id: str,
    running: dict[uuid.UUID, Running],
    executor: Executor,
    lease_duration: timedelta,
    now: datetime,
    on_withdrawn: Callable[[], None],
) -> None:
    """Renew the leases of ``running`` (the worker's own dict, from which lost ones are removed);
    ``on_withdrawn`` is called for each prefetched job taken back before it started."""
    if not running:
        return
    results = store.heartbeat(
        worker_id=worker_id, job_ids=list(running), lease_duration=lease_duration, now=now
    )
    for beat in results:
        held = running.get(beat.job_id)
        if held is None:
            continue
        if not beat.renewed:
            logger.warning(
                "Lease of %s %s lost; abandoning it (its result will not be reported)",
                held.claimed.wire_name,
                beat.job_id,
            )
            held.abandoned = True
            del running[beat.job_id]
            if executor.withdraw(held):  # prefetched, not started: it never will
                on_withdrawn()
            else:
                executor.cancel(held)
        elif beat.cancel_requested and not held.context.cancel_requested:
            logger.info("Cancel requested for %s %s", held.claimed.wire_name, beat.job_id)
            executor.cancel(held)
