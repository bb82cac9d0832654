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
    value = (millis & 0xFFFF_FFFF_FFFF) << 80 | int.from_bytes(os.urandom(10), "big")
    value = (value & ~(0xF << 76)) | (0x7 << 76)  # version 7
    value = (value & ~(0x3 << 62)) | (0x2 << 62)  # RFC 4122 variant
    return uuid.UUID(int=value)


def job_id_for_key(wire_name: str, key: str) -> uuid.UUID:
    """The stable id of the job of type ``wire_name`` keyed ``key``: the same key, the same job."""
    return uuid.uuid5(JOB_KEY_NAMESPACE, f"{wire_name}\x00{key}")


#: Namespace of the stable ids derived from string workflow keys (``workflow_id="import-2026-01-01"``).
WORKFLOW_KEY_NAMESPACE = uuid.UUID("0c2f4e6a-57d1-4c3b-8f0e-776f726b666c")


def workflow_id_for_key(key: str) -> uuid.UUID:
    """The stable id of the workflow keyed ``key``: the same key, the same workflow."""
    return uuid.uuid5(WORKFLOW_KEY_NAMESPACE, key)
