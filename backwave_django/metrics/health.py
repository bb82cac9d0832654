"""When a worker process counts as healthy: what ``/healthz`` answers.

A worker refreshes its worker row every ``HEARTBEAT_INTERVAL`` from its main loop, so a recent
refresh shows both that the loop is turning and that it reaches the database. Healthy means the
last refresh (or, before the first one, the endpoint's start) is at most
:data:`HEALTHY_HEARTBEATS` heartbeat intervals old: a worker stuck in its loop, or cut off from
the database for that long, is unhealthy, well before the console calls it stale (five intervals).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

#: A heartbeat older than this many heartbeat intervals makes the worker unhealthy.
HEALTHY_HEARTBEATS = 3


@dataclass(frozen=True, slots=True)
class Health:
    healthy: bool
    detail: str


@dataclass(frozen=True, slots=True)
class WorkerHealth:
    """The health rule for one worker: ``last_heartbeat`` reads its last refresh (Unix time)."""

    heartbeat_interval: float
    last_heartbeat: Callable[[], float | None]
    started_at: float

    @property
    def limit(self) -> float:
        return HEALTHY_HEARTBEATS * self.heartbeat_interval

    def check(self, now: float) -> Health:
        last = self.last_heartbeat()
        if last is None:
            waited = now - self.started_at
            if waited <= self.limit:
                return Health(True, f"ok: starting, no heartbeat yet ({waited:.1f} s)")
            return Health(False, f"unhealthy: no heartbeat since the start {waited:.1f} s ago "
                                 f"(limit {self.limit:.1f} s)")
        age = now - last
        if age <= self.limit:
            return Health(True, f"ok: last heartbeat {age:.1f} s ago")
        return Health(False, f"unhealthy: last heartbeat {age:.1f} s ago (limit {self.limit:.1f} s)")
