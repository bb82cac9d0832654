"""Ids: time-ordered UUIDv7 for new jobs and workflows, stable UUIDv5 for caller-chosen string keys."""

from __future__ import annotations

import os
import time
import uuid

#: Namespace of the stable ids derived from string job keys (``job_id="order-42"``).
JOB_KEY_NAMESPACE = uuid.UUID("6f1c1f3e-0b8a-4a7e-9c55-6b61636b7761")


def uuid7() -> uuid.UUID:
    """A random UUIDv7: 48 bits of Unix milliseconds, then randomness (RFC 9562).

    Time-ordered ids keep the job table's unique index append-mostly.
    """
    millis = time.time_ns() // 1_000_000
    random = int.from_bytes(os.urandom(10), "big") & _RANDOM_BITS
    return _uuid_from_int((millis & 0xFFFF_FFFF_FFFF) << 80 | random | _VERSION_AND_VARIANT)


def _uuid_from_int(value: int) -> uuid.UUID:
    """``uuid.UUID(int=value)`` for a value known to be a valid 128-bit UUID, without the
    constructor's argument checks (a third of the cost of a new job id): the two slots a
    ``UUID`` has, set as its constructor sets them."""
    made = object.__new__(uuid.UUID)
    object.__setattr__(made, "int", value)
    object.__setattr__(made, "is_safe", uuid.SafeUUID.unknown)
    return made


#: Of the 80 bits after the milliseconds, the ones that stay random (not version nor variant).
_RANDOM_BITS = ((1 << 80) - 1) & ~(0xF << 76) & ~(0x3 << 62)
#: Version 7 (bits 76 to 79) and the standard variant, binary 10 (bits 62 and 63).
_VERSION_AND_VARIANT = 0x7 << 76 | 0x2 << 62


def job_id_for_key(wire_name: str, key: str) -> uuid.UUID:
    """The stable id of the job of type ``wire_name`` keyed ``key``: the same key, the same job."""
    return uuid.uuid5(JOB_KEY_NAMESPACE, f"{wire_name}\x00{key}")


#: Namespace of the stable ids derived from string workflow keys (``workflow_id="import-2026-01-01"``).
WORKFLOW_KEY_NAMESPACE = uuid.UUID("0c2f4e6a-57d1-4c3b-8f0e-776f726b666c")


def workflow_id_for_key(key: str) -> uuid.UUID:
    """The stable id of the workflow keyed ``key``: the same key, the same workflow."""
    return uuid.uuid5(WORKFLOW_KEY_NAMESPACE, key)
