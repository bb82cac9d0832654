"""Workflows as operators read them: status, graph, the list, and member counts by state.

A workflow's status is projected from its members' states (``core.workflows.workflow_status_of``),
never stored. Costs: :func:`member_counts` is one grouped query over the job table's
``backwave_job_workflow`` index for any number of workflows; :func:`list_workflows` a page of the
workflow table (``backwave_workflow_created``) and that one grouped query; :func:`workflow_graph`
the workflow row, its members and its structural edges, three reads; :func:`workflow_members` (the
console's page) a bounded page of members and their edges, two; :func:`workflow_header` one
unique-index read.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from django.db.models import Count

from ..core.states import JobState, WorkflowStatus
from ..core.validation import require_count, require_uuid
from ..core.workflows import WorkflowGraph, WorkflowSummary, topological_order, workflow_status_of
from ..database import jobs_database
from ..models import JobRecord, Workflow, WorkflowEdge


def member_counts(workflow_ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, dict[JobState, int]]:
    """Members per state of each of these workflows: one grouped query (``backwave_job_workflow``)."""
    wanted = list(dict.fromkeys(workflow_ids))
    counts: dict[uuid.UUID, dict[JobState, int]] = {workflow_id: {} for workflow_id in wanted}
    if not wanted:
        return counts
    rows = (
        JobRecord.objects.using(jobs_database())
        .filter(workflow_id__in=wanted)
        .order_by()
        .values_list("workflow_id", "state")
        .annotate(n=Count("pk"))
    )
    for workflow_id, state, n in rows:
        counts[workflow_id][JobState(state)] = n
    return counts


def workflow_status(workflow_id: uuid.UUID) -> WorkflowStatus | None:
    """The workflow's status, projected from its members' states; None if there is no such workflow."""
    require_uuid("workflow_id", workflow_id)
    using = jobs_database()
    if not Workflow.objects.using(using).filter(workflow_id=workflow_id).exists():
        return None
    states = (
        JobRecord.objects.using(using)
        .filter(workflow_id=workflow_id)
        .order_by()
        .values_list("state", flat=True)
        .distinct()
    )
    return workflow_status_of(states)


def workflow_graph(workflow_id: uuid.UUID) -> WorkflowGraph | None:
    """The workflow with its stored members (parents before children; ties in insertion order)
    and the structural edges between them; None if there is no such workflow. After retention
    removed some members, only the remaining ones and the edges between them are listed."""
    require_uuid("workflow_id", workflow_id)
    using = jobs_database()
    row = (
        Workflow.objects.using(using)
        .filter(workflow_id=workflow_id)
        .values_list("name", "created_at", "restarted_from")
        .first()
    )
    if row is None:
        return None
    name, created_at, restarted_from = row
    members = list(
        JobRecord.objects.using(using)
        .filter(workflow_id=workflow_id)
        .order_by("sequence")
        .values_list("job_id", flat=True)
    )
    present = set(members)
    edges = [
        (parent, child)
        for parent, child in WorkflowEdge.objects.using(using)
        .filter(workflow_id=workflow_id)
        .order_by("id")
        .values_list("parent_id", "child_id")
        if parent in present and child in present
    ]
    parents: dict[uuid.UUID, list[uuid.UUID]] = defaultdict(list)
    for parent, child in edges:
        parents[child].append(parent)
    return WorkflowGraph(
        workflow_id=workflow_id,
        name=name,
        created_at=created_at,
        restarted_from=restarted_from,
        members=tuple(topological_order(members, parents)),
        edges=tuple(edges),
    )


def list_workflows(*, limit: int | None = None, offset: int = 0) -> list[WorkflowSummary]:
    """Workflows, oldest ``created_at`` first (the workflow id breaks ties), each with its member
    count and status: ``limit`` of them (None: all) after skipping ``offset``. Two queries: the
    page of workflows (``backwave_workflow_created``) and their members' states, grouped."""
    if limit is not None:
        require_count("limit", limit)
    require_count("offset", offset)
    rows = Workflow.objects.using(jobs_database()).order_by("created_at", "workflow_id")
    page = rows[offset:] if limit is None else rows[offset : offset + limit]
    workflows = list(page.values_list("workflow_id", "name", "created_at", "restarted_from"))
    counts = member_counts(workflow_id for workflow_id, *_ in workflows)
    return [
        WorkflowSummary(
            workflow_id=workflow_id,
            name=name,
            created_at=created_at,
            restarted_from=restarted_from,
            member_count=sum(counts[workflow_id].values()),
            status=workflow_status_of(counts[workflow_id]),
            counts=counts[workflow_id],
        )
        for workflow_id, name, created_at, restarted_from in workflows
    ]


# --- The console's workflow page ----------------------------------------------------------------


@dataclass(frozen=True)
class WorkflowHeader:
    """A stored workflow's row id (the console's pages name rows by it), id and name."""

    row_id: int
    workflow_id: uuid.UUID
    name: str | None


def workflow_header(workflow_id: uuid.UUID) -> WorkflowHeader | None:
    """The stored workflow with this id, or None (never created, or removed with its last member)."""
    require_uuid("workflow_id", workflow_id)
    rows = Workflow.objects.using(jobs_database()).filter(workflow_id=workflow_id)
    row = rows.values_list("pk", "name").first()
    return None if row is None else WorkflowHeader(row[0], workflow_id, row[1])


@dataclass(frozen=True)
class WorkflowMember:
    """One member of a workflow as its page lists it."""

    sequence: int
    job_id: uuid.UUID
    wire_name: str
    state: JobState


@dataclass(frozen=True)
class WorkflowMembers:
    """The first members of a workflow and the structural edges among them."""

    #: Oldest first (by ``sequence``), at most the ``limit`` asked for.
    members: tuple[WorkflowMember, ...]
    #: Whether the workflow has more members than those.
    truncated: bool
    #: Each listed member's parents among the listed members, in the order the edges were stored.
    parents: dict[uuid.UUID, list[uuid.UUID]] = field(default_factory=dict)


def workflow_members(workflow_id: uuid.UUID, *, limit: int) -> WorkflowMembers:
    """The workflow's first ``limit`` members and their edges among them (two reads: the members
    through ``backwave_job_workflow``, the edges of those members)."""
    require_uuid("workflow_id", workflow_id)
    require_count("limit", limit)
    using = jobs_database()
    rows = list(
        JobRecord.objects.using(using)
        .filter(workflow_id=workflow_id)
        .order_by("sequence")
        .values_list("sequence", "job_id", "wire_name", "state")[: limit + 1]
    )
    members = tuple(
        WorkflowMember(sequence, job_id, wire_name, JobState(state))
        for sequence, job_id, wire_name, state in rows[:limit]
    )
    listed = {member.job_id for member in members}
    parents: dict[uuid.UUID, list[uuid.UUID]] = defaultdict(list)
    edges = WorkflowEdge.objects.using(using).filter(workflow_id=workflow_id, child_id__in=list(listed))
    for parent, child in edges.order_by("id").values_list("parent_id", "child_id"):
        if parent in listed:
            parents[child].append(parent)
    return WorkflowMembers(members, len(rows) > limit, dict(parents))
