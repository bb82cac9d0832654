"""Housekeeping: retention (purging terminal jobs) and the console's rows of running workers."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from django.db.models import Q

from ..conf import get_settings
from ..core.states import TerminalStateClass
from ..core.validation import require_aware, require_count, require_worker_id
from ..database import jobs_database
from ..models import JobDependency, JobRecord, JobTag, JobTransition, WorkerNode
from ._tx import atomic_retrying


def purge_terminal(state_class: TerminalStateClass, *, terminal_before: datetime, max_jobs: int = 500) -> int:
    """Delete up to ``max_jobs`` (clamped to ``MAX_PURGE_BATCH``) terminal jobs of ``state_class``.

    Eligible jobs ended at or before ``terminal_before``; the oldest go first. Their transitions,
    tags and any edges in either direction go with them. Returns how many were deleted.
    """
    if not isinstance(state_class, TerminalStateClass):
        raise ValueError(
            f"state_class must be a TerminalStateClass "
            f"({', '.join(TerminalStateClass.names)}), got {state_class!r}"
        )
    require_aware("terminal_before", terminal_before)
    require_count("max_jobs", max_jobs)
    limit = min(max_jobs, get_settings().max_purge_batch)
    if limit == 0:
        return 0
    using = jobs_database()

    def body() -> int:
        expired = list(
            JobRecord.objects.using(using)
            .filter(state__in=state_class.states, terminal_at__lte=terminal_before)
            .order_by("terminal_at", "sequence")
            .select_for_update(skip_locked=True)
            .values_list("sequence", flat=True)[:limit]
        )
        if not expired:
            return 0
        JobTransition.objects.using(using).filter(job_id__in=expired).delete()
        JobTag.objects.using(using).filter(job_id__in=expired).delete()
        JobDependency.objects.using(using).filter(Q(parent_id__in=expired) | Q(child_id__in=expired)).delete()
        JobRecord.objects.using(using).filter(sequence__in=expired).delete()
        return len(expired)

    return atomic_retrying(using, body)


def register_worker(
    *, worker_id: str, hostname: str, pid: int, queues: Sequence[str], concurrency: int, now: datetime
) -> None:
    """Record a running worker process for the console."""
    require_worker_id(worker_id)
    require_aware("now", now)
    WorkerNode.objects.using(jobs_database()).update_or_create(
        worker_id=worker_id,
        defaults={
            "hostname": hostname,
            "pid": pid,
            "queues": list(queues),
            "concurrency": concurrency,
            "started_at": now,
            "last_seen_at": now,
        },
    )


def touch_worker(worker_id: str, *, now: datetime) -> None:
    """Refresh a worker's ``last_seen_at`` (on every heartbeat round)."""
    require_aware("now", now)
    WorkerNode.objects.using(jobs_database()).filter(worker_id=worker_id).update(last_seen_at=now)


def unregister_worker(worker_id: str) -> None:
    """Remove a worker's row (it stopped)."""
    WorkerNode.objects.using(jobs_database()).filter(worker_id=worker_id).delete()


def prune_workers(*, seen_before: datetime) -> int:
    """Delete the rows of workers not seen since ``seen_before`` (crashed or killed processes)."""
    require_aware("seen_before", seen_before)
    deleted, _ = WorkerNode.objects.using(jobs_database()).filter(last_seen_at__lt=seen_before).delete()
    return deleted
