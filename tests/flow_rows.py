"""Flow-control rows written directly, for the tests of what operators see (the Limits page, the
CLI, the metrics, the monitor): declarations, jobs under limits, leases and starts, as the
workers' declarations and the claim write them (docs/flow-control.md)."""

from __future__ import annotations

from datetime import datetime

from backwave_django.core.limits import LimitKeys, lane_of
from backwave_django.core.states import JobState
from backwave_django.models import JobRecord, LimitLease, LimitSettings, LimitStart

from .conftest import T0
from .factories import JobRecordFactory


def declare(
    name: str, *, concurrency: int | None = None, rate: int | None = None, period: float = 1.0, at: datetime = T0
) -> LimitSettings:
    """A limit as a worker declares it at start."""
    row, _ = LimitSettings.objects.update_or_create(
        name=name,
        defaults={
            "declared_concurrency": concurrency,
            "declared_rate": rate,
            "declared_period": period,
            "declared_at": at,
        },
    )
    return row


def job_under(
    keys: LimitKeys,
    *,
    partition: str | None = None,
    queue: str = "default",
    due: datetime = T0,
    state: JobState = JobState.SCHEDULED,
    wire_name: str = "send-invoice",
) -> JobRecord:
    """A job stored with these buckets (as enqueue stores them: pairs, sorted, and its lane)."""
    keys = tuple(sorted(keys))
    return JobRecordFactory(
        queue=queue,
        due_time=due,
        state=state,
        wire_name=wire_name,
        partition=partition,
        limit_keys=[list(pair) for pair in keys] or None,
        lane=lane_of(partition, keys),
    )


def leased(name: str, bucket: str, job: JobRecord, *, at: datetime = T0) -> LimitLease:
    """A concurrency slot held by ``job`` (the claim writes one per concurrency-bounded limit)."""
    return LimitLease.objects.create(name=name, bucket=bucket, job=job.sequence, acquired_at=at)


def started(name: str, bucket: str, *, at: datetime = T0, times: int = 1) -> None:
    """``times`` claims counted by a rate bound, at ``at``."""
    LimitStart.objects.bulk_create([LimitStart(name=name, bucket=bucket, started_at=at) for _ in range(times)])
