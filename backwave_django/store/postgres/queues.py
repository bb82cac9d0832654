"""The per-queue advisory locks: claims take them shared, operator changes to a queue's settings
exclusively (see ``store._tx.lock_queues`` for what that guarantees)."""

from __future__ import annotations

import zlib
from collections.abc import Iterable

from django.db import connections

from .statements import statement

LOCK_QUEUES_SHARED = statement("LOCK_QUEUES_SHARED")
LOCK_QUEUES_EXCLUSIVE = statement("LOCK_QUEUES_EXCLUSIVE")
#: What a claim that is its own transaction sends first, the plain claim's and the flow claim's
#: alike (sql/claims.sql says why it is a statement of its own).
PIPELINED_SETTINGS = statement("PIPELINED_SETTINGS")


def queue_key(queue: str) -> int:
    """A queue's advisory-lock key: its CRC32, shifted to fit PostgreSQL's int4."""
    return zlib.crc32(queue.encode()) - 0x8000_0000


def queue_keys(queues: Iterable[str]) -> list[int]:
    """The lock keys of these queues, sorted: every transaction takes them in the same order."""
    return sorted({queue_key(q) for q in queues})


def lock_queues(using: str, queues: Iterable[str], *, exclusive: bool) -> None:
    """Take these queues' advisory locks in one statement, in key order, until the transaction ends."""
    keys = queue_keys(queues)
    if not keys:
        return
    with connections[using].cursor() as cursor:
        cursor.execute(LOCK_QUEUES_EXCLUSIVE if exclusive else LOCK_QUEUES_SHARED, {"queue_keys": keys})
