"""The parameters of the store's PostgreSQL statements as the tests that run or plan them by hand
pass them (``CLAIM`` in ``sql/claims.sql``, ``REPORT`` in ``sql/outcomes.sql``)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from backwave_django import store
from backwave_django.core.claim_floors import FloorBounds

from ..conftest import LEASE, T0, WORKER


def claim_params(
    queue: str,
    *,
    through: list[str] | None = None,
    before: list[str] | None = None,
    now: datetime = T0,
    take: int = 32,
    bounds: FloorBounds | None = None,
) -> dict[str, Any]:
    """``CLAIM`` of ``queue`` at ``now`` (``through`` defaults to the queue alone; ``bounds``,
    the worker's floors, to none: every level read from its head)."""
    return {
        "queue": queue,
        "now": now,
        "take": take,
        "worker": WORKER,
        "expiry": now + LEASE,
        "history": True,
        "cap": 64,
        "before": before or [],
        "through": [queue] if through is None else through,
        "levels": bounds.levels if bounds else [],
        "floors": bounds.floors if bounds else [],
    }


def report_params(batch: list[dict[str, Any]]) -> dict[str, Any]:
    """``REPORT`` of ``batch`` (one dict per outcome, as ``_report_params`` builds them) at T0."""
    return {
        "now": T0,
        "history": True,
        "cap": 64,
        "default_max_attempts": 5,
        "batch": json.dumps(batch),
        "tags": "[]",
        "hint_channel": store.HINT_CHANNEL,
    }
