"""When a worker counts as gone: the one rule the worker's pruning and the console's status share.

A worker refreshes its row every heartbeat interval (``BACKWAVE["HEARTBEAT_INTERVAL"]``). A row not
refreshed for :data:`STALE_WORKER_HEARTBEATS` intervals belongs to a worker that stopped without
saying so: the console shows it as stale and a worker's maintenance pass prunes it
(docs/worker.md). Pure: no clock, no database.
"""

from __future__ import annotations

from datetime import timedelta

#: A worker row not refreshed for this many heartbeat intervals is considered dead and pruned.
STALE_WORKER_HEARTBEATS = 5


def stale_after(heartbeat_interval: timedelta) -> timedelta:
    """How long after its last heartbeat a worker row is stale."""
    return heartbeat_interval * STALE_WORKER_HEARTBEATS
