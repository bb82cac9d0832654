"""Housekeeping: retention (purging terminal jobs) and the console's rows of running workers."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from django.db import connections
from django.db.models import Exists, OuterRef, Q, QuerySet

from ..conf import get_settings
from ..core.states import LIVE_STATES, OperatorAction, TerminalStateClass
from ..core.validation import require_actor, require_aware, require_count, require_worker_id
from ..database import jobs_database
from ..models import JobDependency, JobRecord, JobTag, WorkerNode
from ._tx import atomic_retrying, audit
from .workflows import drop_emptied_workflows, held_workflows

_LIVE = [int(state) for state in LIVE_STATES]


def _require_state_class(state_class: object) -> None:
    if not isinstance(state_class, TerminalStateClass):
        raise ValueError(
            f"state_class must be a TerminalStateClass "
            f"({', '.join(TerminalStateClass.names)}), got {state_class!r}"
        )


def _eligible(using: str, state_class: TerminalStateClass, terminal_before: datetime) -> QuerySet[JobRecord]:
    """The jobs of ``state_class`` retention lets go at ``terminal_before``: ended at or before it,
    and, for a workflow's members, every member terminal and ended at or before it too."""
    jobs = JobRecord.objects.using(using)
    # A member of its workflow that is live, or ended after the cutoff: the workflow is held.
    unsettled = jobs.filter(workflow_id=OuterRef("workflow_id")).filter(
        Q(state__in=_LIVE) | Q(terminal_at__gt=terminal_before)
    )
    ended = jobs.filter(state__in=state_class.states, terminal_at__lte=terminal_before)
    return ended.filter(~Exists(unsettled))


def purge_terminal(state_class: TerminalStateClass, *, terminal_before: datetime, max_jobs: int = 500) -> int:
    """Delete up to ``max_jobs`` (clamped to ``MAX_PURGE_BATCH``) terminal jobs of ``state_class``.

    Eligible jobs ended at or before ``terminal_before``; the oldest go first. Their transitions,
    tags and any edges in either direction go with them. Returns how many were deleted.

    A workflow is retained as a unit (docs/workflows.md): its members are eligible only once every
    member is terminal and the last ended at or before ``terminal_before`` (the retention window
    starts when the workflow drained). The workflow's row and structural edges go with its last
    member. For jobs outside workflows the check is a probe of ``backwave_job_workflow`` with a
    null key, which matches nothing (PostgreSQL answers it without reading the index).
    """
    _require_state_class(state_class)
    require_aware("terminal_before", terminal_before)
    require_count("max_jobs", max_jobs)
    limit = min(max_jobs, get_settings().max_purge_batch)
    if limit == 0:
        return 0
    using = jobs_database()

    def body() -> int:
        picked = list(
            _eligible(using, state_class, terminal_before)
            .order_by("terminal_at", "sequence")
            .select_for_update(skip_locked=True)
            .values_list("sequence", "workflow_id")[:limit]
        )
        workflows = {workflow_id for _, workflow_id in picked if workflow_id is not None}
        held = held_workflows(using, workflows, terminal_before) if workflows else set()
        expired = [sequence for sequence, workflow_id in picked if workflow_id not in held]
        if not expired:
            return 0
        JobTag.objects.using(using).filter(job_id__in=expired).delete()
        JobDependency.objects.using(using).filter(Q(parent_id__in=expired) | Q(child_id__in=expired)).delete()
        # The transition log goes with the jobs: the relation's CASCADE deletes the entries in one
        # statement before the job rows (only the keys are read for it).
        JobRecord.objects.using(using).filter(sequence__in=expired).only("sequence").delete()
        if workflows - held:
            drop_emptied_workflows(using, workflows - held)
        return len(expired)

    return atomic_retrying(using, body)


def count_purgeable(state_class: TerminalStateClass, *, terminal_before: datetime) -> int:
    """How many jobs :func:`purge_terminal` would delete at ``terminal_before`` if it ran until
    done now (the same rule, workflows as units; one ``COUNT`` over the terminal jobs)."""
    _require_state_class(state_class)
    require_aware("terminal_before", terminal_before)
    return _eligible(jobs_database(), state_class, terminal_before).count()


def record_purge(*, actor: str, summary: str, now: datetime) -> None:
    """Append the ``OperatorAudit`` row of an operator's purge run (``summary`` says what went).

    A purge runs as many transactions (one per batch), so its audit row is written once at the end,
    on its own, rather than in the transaction of any one batch.
    """
    require_actor(actor)
    require_aware("now", now)
    using = jobs_database()
    atomic_retrying(using, lambda: audit(using, actor, OperatorAction.PURGE, summary[:255], now))


def register_worker(
    *, worker_id: str, hostname: str, pid: int, queues: Sequence[str], concurrency: int, now: datetime
) -> None:
    """Record a running worker process for the console (a row already there under its id, from a
    start that failed half-way, is overwritten): one statement, an upsert."""
    require_worker_id(worker_id)
    require_aware("now", now)
    using = jobs_database()
    row = WorkerNode(
        worker_id=worker_id,
        hostname=hostname,
        pid=pid,
        queues=list(queues),
        concurrency=concurrency,
        started_at=now,
        last_seen_at=now,
    )
    # MySQL and MariaDB name no conflict target: their upsert is on any unique key.
    target = ["worker_id"] if connections[using].features.supports_update_conflicts_with_target else None
    WorkerNode.objects.using(using).bulk_create(
        [row], update_conflicts=True, unique_fields=target, update_fields=_WORKER_FIELDS
    )


#: What registering writes over a row already there under the same worker id.
_WORKER_FIELDS = ["hostname", "pid", "queues", "concurrency", "started_at", "last_seen_at"]


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
