"""Workflows: enqueueing a group of jobs with its graph (reading one back is the monitor's:
``monitor/workflows.py``).

:func:`enqueue_workflow` judges the whole definition first (the order of the checks is the
contract, docs/workflows.md), then writes, in one transaction: the ``Workflow`` row (on create),
the members in topological order through the same portable insert as any enqueue with parents
(``enqueueing._insert_many``: gating edges, latches, tags, policy, priority, the first
transition, wake-up hints), and one immutable ``WorkflowEdge`` per declared parent pair. Any
refusal writes nothing.

Appends lock the ``Workflow`` row, and so does retention before it removes members
(``housekeeping.purge_terminal`` through :func:`held_workflows`): a workflow never loses its row
while an append is adding members to it.
"""

from __future__ import annotations

import uuid
from collections import Counter
from datetime import datetime

from django.db import IntegrityError
from django.db.models import Q

from ..conf import BackWaveSettings, get_settings
from ..core.outcomes import NewJob
from ..core.states import LIVE_STATES, EnqueueResult, WorkflowEnqueueResult
from ..core.validation import require_aware
from ..core.workflows import (
    WorkflowDefinition,
    topological_order,
)
from ..database import jobs_database
from ..models import JobRecord, Workflow, WorkflowEdge
from ._tx import atomic_retrying
from .enqueueing import _insert_many, check_bounds, missing_jobs, refusal_message

_R = WorkflowEnqueueResult

#: The member results that are bounds, by the enqueue result ``check_bounds`` gives.
BOUND_RESULTS = {
    EnqueueResult.PAYLOAD_TOO_LARGE: _R.PAYLOAD_TOO_LARGE,
    EnqueueResult.WIRE_NAME_TOO_LONG: _R.WIRE_NAME_TOO_LONG,
    EnqueueResult.TOO_MANY_PARENTS: _R.TOO_MANY_PARENTS,
}
_LIVE = [int(state) for state in LIVE_STATES]


class _Refused(Exception):
    """Raised inside the transaction to roll it back whole and answer ``result``."""

    def __init__(self, result: WorkflowEnqueueResult) -> None:
        super().__init__(result.value)
        self.result = result


def enqueue_workflow(definition: WorkflowDefinition, *, now: datetime) -> WorkflowEnqueueResult:
    """Store a workflow, or add members to one (``is_append``), all or nothing.

    Checked in this order, the first that applies answering: ``EMPTY_WORKFLOW`` (no members);
    ``WORKFLOW_NOT_FOUND`` (an append to a workflow that does not exist) or ``DUPLICATE_WORKFLOW``
    (a create of one that does); ``DUPLICATE_MEMBER`` (an id listed twice); then member by member,
    in the order listed: ``DUPLICATE_MEMBER`` (a job with that id exists), ``PAYLOAD_TOO_LARGE`` /
    ``WIRE_NAME_TOO_LONG`` / ``TOO_MANY_PARENTS`` (as ``check_bounds``), ``CONTAINMENT_VIOLATION``
    (a parent that is not a member, new or stored). A definition that passes them all but whose
    members wait for each other in a circle raises ``WorkflowCycleError`` (a ``ValueError``
    naming them). Joins the caller's transaction when there is one.
    """
    if not isinstance(definition, WorkflowDefinition):
        raise TypeError(f"definition must be a WorkflowDefinition, got {type(definition).__name__}")
    require_aware("now", now)
    if not definition.members:
        return _R.EMPTY_WORKFLOW
    settings = get_settings()
    using = jobs_database()
    for attempt in (1, 2, 3):
        try:
            return atomic_retrying(using, lambda: _enqueue(definition, now, settings, using))
        except _Refused as refused:
            return refused.result
        except IntegrityError:
            # Another transaction committed this workflow or one of these job ids after we
            # looked: look again (the next try answers DUPLICATE_WORKFLOW or DUPLICATE_MEMBER).
            if attempt == 3:
                raise
    raise AssertionError("unreachable")


def _enqueue(
    definition: WorkflowDefinition, now: datetime, settings: BackWaveSettings, using: str
) -> WorkflowEnqueueResult:
    workflow_id = definition.workflow_id
    workflows = Workflow.objects.using(using)
    records = JobRecord.objects.using(using)
    stored: set[uuid.UUID] = set()
    if definition.is_append:
        # Locked until the members are in: retention takes the same lock before removing members.
        locked = workflows.filter(workflow_id=workflow_id).select_for_update().values_list("pk", flat=True)
        if not list(locked):
            raise _Refused(_R.WORKFLOW_NOT_FOUND)
        stored = set(records.filter(workflow_id=workflow_id).values_list("job_id", flat=True))
    elif workflows.filter(workflow_id=workflow_id).exists():
        raise _Refused(_R.DUPLICATE_WORKFLOW)
    members = definition.members
    ids = [member.job_id for member in members]
    if len(set(ids)) < len(ids):
        raise _Refused(_R.DUPLICATE_MEMBER)
    taken = set(records.filter(job_id__in=ids).values_list("job_id", flat=True))
    inside = stored | set(ids)
    for member in members:
        refused = _member_refusal(member, taken, inside, settings)
        if refused is not None:
            raise _Refused(refused)
    by_id = {member.job_id: member for member in members}
    order = topological_order(
        ids,
        {member.job_id: member.parents for member in members},
        describe=lambda job_id: f"'{by_id[job_id].wire_name}' ({job_id})",
    )
    if not definition.is_append:
        workflows.create(
            workflow_id=workflow_id,
            name=definition.name,
            created_at=now,
            restarted_from=definition.restarted_from,
        )
    ordered = [by_id[job_id] for job_id in order]
    for entry in _insert_many(ordered, [None] * len(ordered), now, settings, using, False, workflow_id):
        if entry.result is EnqueueResult.DUPLICATE:  # a job id taken after the checks
            raise _Refused(_R.DUPLICATE_MEMBER)
        if entry.result is not EnqueueResult.OK:  # a parent gone after the checks
            raise _Refused(_R.CONTAINMENT_VIOLATION)
    WorkflowEdge.objects.using(using).bulk_create(
        [
            WorkflowEdge(workflow_id=workflow_id, parent_id=parent, child_id=member.job_id)
            for member in ordered
            for parent in dict.fromkeys(member.parents)
        ]
    )
    return _R.OK


def _member_refusal(
    member: NewJob, taken: set[uuid.UUID], inside: set[uuid.UUID], settings: BackWaveSettings
) -> WorkflowEnqueueResult | None:
    """The first rule one member breaks, in the contract's order, or None."""
    if member.job_id in taken:
        return _R.DUPLICATE_MEMBER
    bound = check_bounds(member, settings)
    if bound is not None:
        return BOUND_RESULTS[bound]
    if any(parent not in inside for parent in member.parents):
        return _R.CONTAINMENT_VIOLATION
    return None


def refusal_text(definition: WorkflowDefinition, result: WorkflowEnqueueResult) -> str:
    """What ``WorkflowError`` says about a refusal: which member, what limit, what to do (a read)."""
    settings = get_settings()
    label = f"workflow '{definition.name}'" if definition.name else f"workflow {definition.workflow_id}"
    members = definition.members
    if result is _R.EMPTY_WORKFLOW:
        return f"{label} has no jobs: add at least one before enqueueing it"
    if result is _R.DUPLICATE_WORKFLOW:
        return (
            f"a workflow with id {definition.workflow_id} already exists; a workflow id is used once "
            "(to add jobs to it, append: workflow(workflow_id=..., append=True))"
        )
    if result is _R.WORKFLOW_NOT_FOUND:
        return f"no workflow with id {definition.workflow_id} to append to (never created, or purged)"
    ids = [member.job_id for member in members]
    twice = [job_id for job_id, n in Counter(ids).items() if n > 1]
    if result is _R.DUPLICATE_MEMBER:
        existing = sorted(set(ids) - set(missing_jobs(ids)))
        named = twice or existing
        return (
            f"{label}: job id(s) {', '.join(str(j) for j in named)} "
            + ("listed twice" if twice else "already exist (a job id is stored once)")
        )
    if result is _R.CONTAINMENT_VIOLATION:
        inside = set(ids)
        if definition.is_append:
            inside |= set(
                JobRecord.objects.using(jobs_database())
                .filter(workflow_id=definition.workflow_id)
                .values_list("job_id", flat=True)
            )
        for member in members:
            outside = [p for p in dict.fromkeys(member.parents) if p not in inside]
            if outside:
                return (
                    f"{label}: job '{member.wire_name}' ({member.job_id}) names parent(s) outside the "
                    f"workflow: {', '.join(str(p) for p in outside)}; a member's parents must be "
                    "members too (add them to the workflow first)"
                )
        return f"{label}: a member's parent left the workflow while it was being enqueued"
    for member in members:
        bound = check_bounds(member, settings)
        if bound is not None and BOUND_RESULTS[bound] is result:
            return f"{label}: {refusal_message(member, bound, settings)}"
    return f"{label}: refused ({result.value})"


# --- Retention (called by housekeeping.purge_terminal) -----------------------------------------


def held_workflows(using: str, workflow_ids: set[uuid.UUID], terminal_before: datetime) -> set[uuid.UUID]:
    """Of these workflows, whose terminal members were picked for purging, the ones whose members
    must stay this time. The others' rows are now locked by this transaction, until it ends.

    Held: a workflow an append is adding to right now (its row is locked: skipped, never waited
    for), and one that, looked at again under the lock, has a live member or one that ended after
    ``terminal_before`` (an append committed since the members were picked, or a requeue).
    """
    workflows = Workflow.objects.using(using).filter(workflow_id__in=workflow_ids)
    locked = set(
        workflows.order_by("workflow_id")
        .select_for_update(skip_locked=True)
        .values_list("workflow_id", flat=True)
    )
    busy = set(workflows.exclude(workflow_id__in=locked).values_list("workflow_id", flat=True))
    unsettled = (
        JobRecord.objects.using(using)
        .filter(workflow_id__in=workflow_ids - busy)
        .filter(Q(state__in=_LIVE) | Q(terminal_at__gt=terminal_before))
        .order_by()
        .values_list("workflow_id", flat=True)
        .distinct()
    )
    return busy | {workflow_id for workflow_id in unsettled if workflow_id is not None}


def drop_emptied_workflows(using: str, workflow_ids: set[uuid.UUID]) -> None:
    """Delete the rows and structural edges of those of these workflows (locked by the caller)
    that have no member left."""
    remaining = set(
        JobRecord.objects.using(using)
        .filter(workflow_id__in=workflow_ids)
        .order_by()
        .values_list("workflow_id", flat=True)
        .distinct()
    )
    emptied = workflow_ids - remaining
    if emptied:
        WorkflowEdge.objects.using(using).filter(workflow_id__in=emptied).delete()
        Workflow.objects.using(using).filter(workflow_id__in=emptied).delete()
