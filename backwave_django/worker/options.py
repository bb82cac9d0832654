"""A worker process's options (from ``backwave_worker``'s flags) and its id."""

from __future__ import annotations

import os
import secrets
import socket
from dataclasses import dataclass

from ..core.dispatch import Dispatch


@dataclass(frozen=True, kw_only=True)
class WorkerOptions:
    dispatch: Dispatch
    concurrency: int
    name: str | None = None
    burst: bool = False
    max_jobs: int | None = None
    shutdown_timeout: float = 30.0
    #: Leases held ready beyond the busy slots (None: ``BACKWAVE["PREFETCH"]``).
    prefetch: int | None = None


def make_worker_id(name: str | None) -> str:
    """``{name or host}:{pid}:{random}``."""
    return f"{name or socket.gethostname()}:{os.getpid()}:{secrets.token_hex(6)}"
