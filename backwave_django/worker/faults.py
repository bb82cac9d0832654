"""Database faults in the worker: how long to wait before trying a failed call again, and when a
worker stops trying (see docs/worker.md, "When the database goes away").

A failed call (connection refused or dropped, server restarting, database missing) is tried
again after half a second, then after twice the last wait, up to :data:`MAX_FAULT_BACKOFF_SECONDS`;
a call that succeeds ends the run of faults. A long-running worker keeps trying: the database may
come back. A ``--burst`` worker, or one given ``--give-up-after``, tries for that long (its last
wait is cut short to try once more when the time is up), then stops and exits with
:data:`EXIT_GAVE_UP`.
"""

from __future__ import annotations

import logging
from time import monotonic

logger = logging.getLogger("backwave_django.worker")

#: The first wait after a fault; each fault after it doubles the wait.
FIRST_FAULT_BACKOFF_SECONDS = 0.5
#: Longest wait between retries of a failing database call.
MAX_FAULT_BACKOFF_SECONDS = 30.0
#: How long a ``--burst`` worker's faults may last before it gives up (when ``--give-up-after`` is not given).
BURST_GIVE_UP_SECONDS = 60.0
#: The exit status of a worker that gave up on a database that kept failing.
EXIT_GAVE_UP = 4


class FaultBackoff:
    """One kind of database call's run of faults: the wait before the next try (``seconds``, 0
    when the last call succeeded) and when the run began (``since``, monotonic seconds)."""

    __slots__ = ("seconds", "since")

    def __init__(self) -> None:
        self.seconds = 0.0
        self.since: float | None = None

    def failed(self, now: float) -> float:
        """A call failed at ``now``: the wait before the next try."""
        self.seconds = min(max(self.seconds * 2, FIRST_FAULT_BACKOFF_SECONDS), MAX_FAULT_BACKOFF_SECONDS)
        if self.since is None:
            self.since = now
        return self.seconds

    def succeeded(self) -> None:
        self.seconds = 0.0
        self.since = None

    def lasted(self, now: float) -> float:
        """How long the current run of faults has lasted at ``now`` (0 without one)."""
        return 0.0 if self.since is None else now - self.since


def give_up_seconds(burst: bool, give_up_after: float | None) -> float | None:
    """How long faults may last before a worker gives up: ``--give-up-after`` if given, else
    :data:`BURST_GIVE_UP_SECONDS` for ``--burst``, else never (None)."""
    if give_up_after is not None:
        return give_up_after
    return BURST_GIVE_UP_SECONDS if burst else None


class WorkerFaults:
    """A worker's faults: its own calls' run (``calls``), its outcome writes' run (``writes``),
    and whether it gave up (``gave_up``) because one of them lasted ``give_up_after`` seconds."""

    def __init__(self, worker_id: str, give_up_after: float | None) -> None:
        self.worker_id = worker_id
        self.give_up_after = give_up_after
        self.calls = FaultBackoff()
        self.writes = FaultBackoff()
        self.gave_up = False

    def failed(self, run: FaultBackoff, exc: BaseException, doing: str = "") -> float | None:
        """A call of ``run``'s kind failed with ``exc``: log it, and return the wait before the
        next try, or None once the worker gives up (logged once, as an ERROR)."""
        now = monotonic()
        wait = run.failed(now)
        if self.gave_up:
            return None
        lasted = run.lasted(now)
        if self.give_up_after is not None and lasted >= self.give_up_after:
            self.gave_up = True
            logger.error(
                "Database faults%s for %.0f s (the last: %s: %s); worker %s gives up, exit status %d",
                doing,
                lasted,
                type(exc).__name__,
                exc,
                self.worker_id,
                EXIT_GAVE_UP,
            )
            return None
        if self.give_up_after is not None:  # the last try comes when the time is up
            wait = min(wait, self.give_up_after - lasted)
        logger.warning("Database fault%s (%s: %s); retrying in %.1f s", doing, type(exc).__name__, exc, wait)
        return wait
