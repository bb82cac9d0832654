"""Flow-control test jobs: enqueue one with a partition and buckets, and declare limits.

Until enqueue writes a job's partition, buckets and lane itself, :func:`enqueue_flow` writes them
after the enqueue (the one place to simplify once it does)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from backwave_django import store
from backwave_django.core.limits import LimitKeys, LimitValues, lane_of
from backwave_django.models import JobRecord, LimitSettings

from ..conftest import T0, enqueue


def enqueue_flow(
    *, keys: LimitKeys = (), partition: str | None = None, now: datetime = T0, **overrides: Any
) -> uuid.UUID:
    """Enqueue a job under the buckets ``keys`` (``((limit, bucket), ...)``) and ``partition``."""
    keys = tuple(sorted(keys))
    job_id = enqueue(now=now, **overrides)
    JobRecord.objects.filter(job_id=job_id).update(
        partition=partition,
        limit_keys=[list(pair) for pair in keys] or None,
        lane=lane_of(partition, keys),
    )
    return job_id


def declare(now: datetime = T0, **limits: LimitValues) -> None:
    """Declare limits as a worker does at start."""
    store.declare_limits(limits, now=now)


def override(
    name: str, *, concurrency: int | None = None, rate: int | None = None, period: float = 1.0
) -> None:
    """An operator's override, written straight to the row (the operator's action is elsewhere)."""
    LimitSettings.objects.update_or_create(
        name=name,
        defaults={
            "overridden": True,
            "override_concurrency": concurrency,
            "override_rate": rate,
            "override_period": period,
            "overridden_by": "test",
            "overridden_at": T0,
        },
    )
