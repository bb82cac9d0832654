"""The pure rules of workflows: the status projection, the topological order and its cycles."""

from __future__ import annotations

import uuid

import pytest

from backwave_django.core.states import JobState, WorkflowEnqueueResult, WorkflowStatus
from backwave_django.core.workflows import (
    WorkflowCycleError,
    topological_depths,
    topological_order,
    workflow_status_of,
)

S = JobState
A, B, C, D, E = (uuid.UUID(int=i) for i in range(1, 6))


@pytest.mark.parametrize(
    ("states", "status"),
    [
        ([S.SUCCEEDED, S.SCHEDULED], WorkflowStatus.RUNNING),
        ([S.DEAD_LETTERED, S.AWAITING_PARENT], WorkflowStatus.RUNNING),
        ([S.QUARANTINED, S.LEASED, S.CANCELLED], WorkflowStatus.RUNNING),
        ([S.SUCCEEDED, S.DEAD_LETTERED, S.CANCELLED], WorkflowStatus.FAILED),
        ([S.QUARANTINED, S.SUCCEEDED], WorkflowStatus.FAILED),
        ([S.CANCELLED, S.SUCCEEDED], WorkflowStatus.CANCELLED),
        ([S.SUCCEEDED, S.SUCCEEDED], WorkflowStatus.SUCCEEDED),
        ([3, 3], WorkflowStatus.SUCCEEDED),
    ],
)
def test_the_status_rule(states, status):
    assert workflow_status_of(states) is status


def test_enum_values_follow_the_other_results():
    assert [r.value for r in WorkflowEnqueueResult] == [
        "Ok",
        "DuplicateWorkflow",
        "WorkflowNotFound",
        "DuplicateMember",
        "ContainmentViolation",
        "EmptyWorkflow",
        "PayloadTooLarge",
        "WireNameTooLong",
        "TooManyParents",
    ]
    assert [s.value for s in WorkflowStatus] == ["Running", "Failed", "Cancelled", "Succeeded"]


def test_an_order_that_is_already_topological_is_kept():
    assert topological_order([A, B, C], {B: [A], C: [A, B]}) == [A, B, C]


def test_parents_come_first_and_ties_keep_the_given_order():
    # D lists first and waits for nothing; C waits for B, B for A; E waits for an outsider only.
    outsider = uuid.uuid4()
    order = topological_order([C, D, B, A, E], {C: [B], B: [A], E: [outsider]})
    assert order == [D, A, B, C, E]
    # Each node appears once, after all of its parents among the nodes.
    assert order.index(A) < order.index(B) < order.index(C)


def test_a_cycle_names_its_nodes_each_waiting_for_the_next():
    with pytest.raises(WorkflowCycleError) as caught:
        topological_order([A, B, C, D], {A: [C], B: [A], C: [B], D: [A]}, describe=lambda n: f"n{n.int}")
    error = caught.value
    assert isinstance(error, ValueError)
    assert set(error.cycle) == {A, B, C}
    # Walking a cycle: every node waits for the one after it, the last for the first.
    parents = {A: C, B: A, C: B}
    cycle = list(error.cycle)
    assert all(parents[node] == cycle[(i + 1) % 3] for i, node in enumerate(cycle))
    assert "n4" not in str(error)  # D only waits on the cycle; it is not in it
    assert str(error).startswith("workflow members form a dependency cycle, so none of them could ever run: ")


def test_a_node_that_is_its_own_parent_is_a_cycle():
    with pytest.raises(WorkflowCycleError) as caught:
        topological_order([A, B], {B: [B]})
    assert caught.value.cycle == (B,)


def test_depths_are_the_longest_path_from_a_root():
    parents = {B: [A], C: [A], D: [B, C], E: [A, D]}
    order = topological_order([A, B, C, D, E], parents)
    assert topological_depths(order, parents) == {A: 0, B: 1, C: 1, D: 2, E: 3}
