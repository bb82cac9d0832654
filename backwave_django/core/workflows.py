"""Workflows, the pure part: the definition the store takes, the values it gives back, the status
rule and the graph's order.

A workflow is a group of jobs enqueued together, in one transaction, with the dependency graph
between them (docs/workflows.md). Nothing here touches the database or a clock.
"""

from __future__ import annotations

import heapq
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from .outcomes import PREPARED_NOT_DUE, NewJob
from .states import JobState, WorkflowStatus
from .validation import require_str, require_uuid

#: The longest workflow name the ``Workflow.name`` column holds.
MAX_WORKFLOW_NAME_LENGTH = 255

__all__ = [
    "MAX_WORKFLOW_NAME_LENGTH",
    "WorkflowCycleError",
    "WorkflowDefinition",
    "WorkflowGraph",
    "WorkflowSummary",
    "topological_depths",
    "topological_order",
    "workflow_status_of",
]


@dataclass(frozen=True, kw_only=True)
class WorkflowDefinition:
    """What ``store.enqueue_workflow`` stores: ``members`` (``NewJob``s, in any order) under
    ``workflow_id``.

    A member's ``parents`` must all be members of the workflow: new ones listed here, or (for an
    append) ones stored before. ``is_append`` adds the members to an existing workflow instead of
    creating it; ``name`` and ``restarted_from`` (the workflow this one re-runs, informational)
    are stored on create and not used by an append. Members cannot be unique jobs: the workflow
    id is what makes a workflow enqueue once (a second create is ``DUPLICATE_WORKFLOW``).
    """

    workflow_id: uuid.UUID
    name: str | None = None
    members: tuple[NewJob, ...] = ()
    is_append: bool = False
    restarted_from: uuid.UUID | None = None

    def __post_init__(self) -> None:
        require_uuid("workflow_id", self.workflow_id)
        if self.name is not None:
            require_str("name", self.name)
            if len(self.name) > MAX_WORKFLOW_NAME_LENGTH:
                raise ValueError(
                    f"name is at most {MAX_WORKFLOW_NAME_LENGTH} characters, got {len(self.name)}"
                )
        if isinstance(self.members, str | bytes | NewJob) or not isinstance(self.members, Iterable):
            raise TypeError("members must be a sequence of NewJob")
        members = tuple(self.members)
        for index, member in enumerate(members):
            if not isinstance(member, NewJob):
                raise TypeError(f"members[{index}] must be a NewJob, got {type(member).__name__}")
            if member.run_after is not None:
                raise ValueError(f"members[{index}] {PREPARED_NOT_DUE}")
            if member.unique is not None:
                raise ValueError(
                    f"members[{index}] (job {member.job_id}, wire name '{member.wire_name}') is a "
                    "unique job; a workflow member cannot be one: give the workflow a stable "
                    "workflow_id instead (a second create is DUPLICATE_WORKFLOW)"
                )
        object.__setattr__(self, "members", members)
        if not isinstance(self.is_append, bool):
            raise TypeError(f"is_append must be a bool, got {type(self.is_append).__name__}")
        if self.restarted_from is not None:
            require_uuid("restarted_from", self.restarted_from)


@dataclass(frozen=True, kw_only=True, slots=True)
class WorkflowGraph:
    """A stored workflow: its members (job ids, parents before children) and its structural edges
    ``(parent_id, child_id)`` between them."""

    workflow_id: uuid.UUID
    name: str | None
    created_at: datetime
    restarted_from: uuid.UUID | None
    members: tuple[uuid.UUID, ...]
    edges: tuple[tuple[uuid.UUID, uuid.UUID], ...]


@dataclass(frozen=True, kw_only=True, slots=True)
class WorkflowSummary:
    """One workflow as ``store.list_workflows`` lists it: how many members, and in which states."""

    workflow_id: uuid.UUID
    name: str | None
    created_at: datetime
    restarted_from: uuid.UUID | None
    member_count: int
    status: WorkflowStatus
    #: Members per state (only the states that have members).
    counts: Mapping[JobState, int] = field(default_factory=dict)


def workflow_status_of(states: Iterable[JobState | int]) -> WorkflowStatus:
    """The status rule: RUNNING while any member is not terminal; then FAILED if any member is
    Dead-Lettered or Quarantined; then CANCELLED if any is Cancelled; else SUCCEEDED."""
    seen = {JobState(state) for state in states}
    if any(not state.is_terminal for state in seen):
        return WorkflowStatus.RUNNING
    if seen & {JobState.DEAD_LETTERED, JobState.QUARANTINED}:
        return WorkflowStatus.FAILED
    if JobState.CANCELLED in seen:
        return WorkflowStatus.CANCELLED
    return WorkflowStatus.SUCCEEDED


class WorkflowCycleError(ValueError):
    """Members that wait for each other in a circle: none could ever run, so none is stored."""

    def __init__(self, cycle: Sequence[uuid.UUID], describe: Callable[[uuid.UUID], str] = str) -> None:
        path = " → ".join(describe(node) for node in [*cycle, cycle[0]])
        super().__init__(
            f"workflow members form a dependency cycle, so none of them could ever run: {path} "
            "(each waits for the next); nothing was stored"
        )
        self.cycle = tuple(cycle)


def topological_order(
    nodes: Sequence[uuid.UUID],
    parents: Mapping[uuid.UUID, Iterable[uuid.UUID]],
    *,
    describe: Callable[[uuid.UUID], str] = str,
) -> list[uuid.UUID]:
    """``nodes`` with every node after its parents among ``nodes`` (parents outside are ignored);
    among nodes whose parents are all placed, the earliest in ``nodes`` goes first, so an order
    that is already topological comes back unchanged. Raises :class:`WorkflowCycleError` naming
    one cycle (``describe`` words each node)."""
    position = {node: index for index, node in enumerate(nodes)}
    inside = {node: [p for p in dict.fromkeys(parents.get(node, ())) if p in position] for node in nodes}
    waiting = {node: len(inside[node]) for node in nodes}
    children: dict[uuid.UUID, list[uuid.UUID]] = {node: [] for node in nodes}
    for node, node_parents in inside.items():
        for parent in node_parents:
            children[parent].append(node)
    ready = [position[node] for node in nodes if waiting[node] == 0]
    heapq.heapify(ready)
    order: list[uuid.UUID] = []
    while ready:
        node = nodes[heapq.heappop(ready)]
        order.append(node)
        for child in children[node]:
            waiting[child] -= 1
            if waiting[child] == 0:
                heapq.heappush(ready, position[child])
    if len(order) < len(nodes):
        raise WorkflowCycleError(_a_cycle(nodes, inside, set(order)), describe)
    return order


def _a_cycle(
    nodes: Sequence[uuid.UUID], inside: Mapping[uuid.UUID, list[uuid.UUID]], placed: set[uuid.UUID]
) -> list[uuid.UUID]:
    """One cycle among the nodes ``topological_order`` could not place: each of them waits for an
    unplaced parent, so walking up the first such parent must come back to a node already seen."""
    node = next(n for n in nodes if n not in placed)
    path: list[uuid.UUID] = []
    seen: dict[uuid.UUID, int] = {}
    while node not in seen:
        seen[node] = len(path)
        path.append(node)
        node = next(p for p in inside[node] if p not in placed)
    return path[seen[node] :]  # each waits for the next


def topological_depths(
    order: Sequence[uuid.UUID], parents: Mapping[uuid.UUID, Iterable[uuid.UUID]]
) -> dict[uuid.UUID, int]:
    """Each node's layer in a topological ``order``: 0 without parents among the nodes, else one
    more than its deepest parent."""
    depth: dict[uuid.UUID, int] = {}
    for node in order:
        depth[node] = 1 + max((depth[p] for p in parents.get(node, ()) if p in depth), default=-1)
    return depth
