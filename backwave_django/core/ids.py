"""Ids: time-ordered UUIDv7 for new jobs and workflows, stable UUIDv5 for caller-chosen string keys."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator

from .frozen import uuid_unchecked

#: Namespace of the stable ids derived from string job keys (``job_id="order-42"``).
JOB_KEY_NAMESPACE = uuid.UUID("6f1c1f3e-0b8a-4a7e-9c55-6b61636b7761")


def uuid7() -> uuid.UUID:
    """A random UUIDv7: 48 bits of Unix milliseconds, then randomness (RFC 9562).

    Time-ordered ids keep the job table's unique index append-mostly. The random bits come from
    the operating system's generator (``os.urandom``), read for many ids at once
    (:func:`_random_parts`).
    """
    random = next(_pool, None)
    if random is None:
        random = _refill()
    return uuid_unchecked((time.time_ns() // 1_000_000 & 0xFFFF_FFFF_FFFF) << 80 | random)


#: Of the 80 bits after the milliseconds, the ones that stay random (not version nor variant).
_RANDOM_BITS = ((1 << 80) - 1) & ~(0xF << 76) & ~(0x3 << 62)
#: Version 7 (bits 76 to 79) and the standard variant, binary 10 (bits 62 and 63).
_VERSION_AND_VARIANT = 0x7 << 76 | 0x2 << 62
#: How many ids' random bits one ``os.urandom`` call reads (10 bytes each).
_POOL_SIZE = 256


def _random_parts() -> Iterator[int]:
    """The low 80 bits of :data:`_POOL_SIZE` ids (version and variant set), from one read of the
    system's generator: one system call per id cost about as much as the rest of the id."""
    data = os.urandom(10 * _POOL_SIZE)
    return iter(
        [
            int.from_bytes(data[start : start + 10]) & _RANDOM_BITS | _VERSION_AND_VARIANT
            for start in range(0, len(data), 10)
        ]
    )


_pool: Iterator[int] = iter(())


def _refill() -> int:
    """A new pool, and its first value. Taking a value is one ``next()`` on a list iterator, which
    no other thread can interleave with, so threads never share one; two threads that find the
    pool empty together each make a new one, and the values of the one that is dropped are never
    used."""
    global _pool
    _pool = _random_parts()
    return next(_pool)


def _forget_pool() -> None:
    """A forked child starts with an empty pool: it must not reuse its parent's random bits."""
    global _pool
    _pool = iter(())


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


def job_id_for_key(wire_name: str, key: str) -> uuid.UUID:
    """The stable id of the job of type ``wire_name`` keyed ``key``: the same key, the same job."""
    return uuid.uuid5(JOB_KEY_NAMESPACE, f"{wire_name}\x00{key}")


#: Namespace of the stable ids derived from string workflow keys (``workflow_id="import-2026-01-01"``).
WORKFLOW_KEY_NAMESPACE = uuid.UUID("0c2f4e6a-57d1-4c3b-8f0e-776f726b666c")


def workflow_id_for_key(key: str) -> uuid.UUID:
    """The stable id of the workflow keyed ``key``: the same key, the same workflow."""
    return uuid.uuid5(WORKFLOW_KEY_NAMESPACE, key)
