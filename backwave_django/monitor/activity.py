"""What is due, and when something happens next: the reads the testing harness's pump runs on.

The harness (``backwave_django.testing``) drives a virtual clock: it asks which jobs are due at its
``now``, which queue the job due first is in, whether work is still pending, and when the next job
comes due or the next lease expires. ``queues`` limits each read to the served queues (None: every
queue). Each is one query over the job table's state indexes (the Scheduled partial index for due
jobs, the Leased one for leases).
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Any

from django.db.models import Min, QuerySet

from ..core.states import LIVE_STATES, JobState
from ..core.validation import require_aware
from ..database import jobs_database
from ..models import JobRecord


def _jobs(queues: Collection[str] | None, **filters: Any) -> QuerySet[JobRecord]:
    jobs = JobRecord.objects.using(jobs_database()).filter(**filters)
    return jobs if queues is None else jobs.filter(queue__in=list(queues))


def has_due_jobs(now: datetime, *, queues: Collection[str] | None = None) -> bool:
    """Whether a Scheduled job is due at ``now``."""
    require_aware("now", now)
    return _jobs(queues, state=JobState.SCHEDULED, due_time__lte=now).exists()


def first_due_queue(
    now: datetime, *, queues: Collection[str] | None = None, excluding: Collection[str] = ()
) -> str | None:
    """The queue of the job due first at ``now`` (by due time, then ``sequence``), leaving out the
    ``excluding`` queues (paused or full ones); None when nothing is due there."""
    require_aware("now", now)
    due = _jobs(queues, state=JobState.SCHEDULED, due_time__lte=now).exclude(queue__in=list(excluding))
    found: str | None = due.order_by("due_time", "sequence").values_list("queue", flat=True).first()
    return found


def has_pending_jobs(*, queues: Collection[str] | None = None) -> bool:
    """Whether a job is not terminal yet."""
    return _jobs(queues, state__in=[int(state) for state in LIVE_STATES]).exists()


def next_due_time(after: datetime, *, queues: Collection[str] | None = None) -> datetime | None:
    """When the first Scheduled job due after ``after`` comes due, or None."""
    require_aware("after", after)
    due = _jobs(queues, state=JobState.SCHEDULED, due_time__gt=after)
    first: datetime | None = due.aggregate(first=Min("due_time"))["first"]
    return first


def next_lease_expiry(after: datetime) -> datetime | None:
    """When the first lease live after ``after`` expires, or None."""
    require_aware("after", after)
    leased = _jobs(None, state=JobState.LEASED, lease_expiry__gt=after)
    first: datetime | None = leased.aggregate(first=Min("lease_expiry"))["first"]
    return first


def leased_queues() -> list[str]:
    """The queues holding a Leased job, sorted."""
    rows = _jobs(None, state=JobState.LEASED).order_by().values_list("queue", flat=True).distinct()
    return sorted(set(rows))
