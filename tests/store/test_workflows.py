"""store.enqueue_workflow, workflow_status, workflow_graph and list_workflows (docs/workflows.md).

Workflows take the store's portable ORM path on every database; these run on PostgreSQL, SQLite
and MariaDB alike.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.db import transaction

from backwave_django import (
    DependencyMode,
    Failure,
    JobState,
    Unroutable,
    WorkflowDefinition,
    WorkflowEnqueueResult,
    WorkflowStatus,
    store,
)
from backwave_django.core.unique import UniqueKey
from backwave_django.core.workflows import WorkflowCycleError
from backwave_django.models import JobDependency, JobRecord, JobTag, Workflow, WorkflowEdge

from ..conftest import T0, enqueue, history, lease, lease_one, new_job, report, row
from ..faults.conftest import snapshot

pytestmark = pytest.mark.django_db

R = WorkflowEnqueueResult


def definition(*members: Any, workflow_id: uuid.UUID | None = None, **fields: Any) -> WorkflowDefinition:
    return WorkflowDefinition(workflow_id=workflow_id or uuid.uuid4(), members=members, **fields)


def create(*members: Any, now: Any = T0, **fields: Any) -> uuid.UUID:
    """Store a workflow that must be accepted; returns its id."""
    wf = definition(*members, **fields)
    assert store.enqueue_workflow(wf, now=now) is R.OK
    return wf.workflow_id


def append(workflow_id: uuid.UUID, *members: Any, now: Any = T0) -> WorkflowEnqueueResult:
    return store.enqueue_workflow(definition(*members, workflow_id=workflow_id, is_append=True), now=now)


def finish(job_id: uuid.UUID, outcome: Any = None, now: Any = T0) -> None:
    lease_one(job_id, now=now)
    assert report(job_id, outcome, now=now).name == "APPLIED"


# --- Create -----------------------------------------------------------------------------------------


def test_a_workflow_is_stored_with_its_row_members_gating_and_structural_edges():
    fetch = new_job(wire_name="fetch", queue="q-fetch", tags=["import", ("tenant", "acme")], priority=5)
    parse = new_job(wire_name="parse", queue="q-parse", parents=[fetch.job_id], max_attempts=3)
    restarted = uuid.uuid4()
    workflow_id = create(fetch, parse, name="import", restarted_from=restarted, now=T0 + timedelta(seconds=3))

    row_ = Workflow.objects.get(workflow_id=workflow_id)
    assert (row_.name, row_.created_at, row_.restarted_from) == ("import", T0 + timedelta(seconds=3), restarted)
    assert set(JobRecord.objects.values_list("job_id", "workflow_id")) == {
        (fetch.job_id, workflow_id),
        (parse.job_id, workflow_id),
    }
    assert row(fetch.job_id).state == JobState.SCHEDULED
    assert row(fetch.job_id).priority == 5
    assert row(parse.job_id).state == JobState.AWAITING_PARENT
    assert row(parse.job_id).parents_remaining == 1
    assert row(parse.job_id).max_attempts == 3
    assert row(parse.job_id).enqueued_at == T0 + timedelta(seconds=3)
    assert list(JobDependency.objects.values_list("parent__job_id", "child__job_id")) == [
        (fetch.job_id, parse.job_id)
    ]
    assert list(WorkflowEdge.objects.values_list("workflow_id", "parent_id", "child_id")) == [
        (workflow_id, fetch.job_id, parse.job_id)
    ]
    assert set(JobTag.objects.values_list("key", "value")) == {("", "import"), ("tenant", "acme")}
    assert history(fetch.job_id) == [(0, "SCHEDULED", 0, "enqueue")]
    assert history(parse.job_id) == [(0, "AWAITING_PARENT", 0, "enqueue")]


def test_members_listed_in_any_order_are_inserted_parents_first():
    a = new_job(wire_name="a")
    b = new_job(wire_name="b", parents=[a.job_id])
    c = new_job(wire_name="c", parents=[a.job_id, b.job_id])
    d = new_job(wire_name="d")
    create(c, d, b, a)
    by_sequence = list(JobRecord.objects.order_by("sequence").values_list("wire_name", flat=True))
    # Each waits for its parents; otherwise the listed order is kept (d was listed before b and a).
    assert by_sequence == ["d", "a", "b", "c"]
    assert row(c.job_id).parents_remaining == 2
    assert JobDependency.objects.count() == 3
    assert WorkflowEdge.objects.count() == 3


def test_a_repeated_parent_makes_one_gating_and_one_structural_edge():
    a = new_job()
    b = new_job(parents=[a.job_id, a.job_id])
    create(a, b)
    assert JobDependency.objects.count() == 1
    assert WorkflowEdge.objects.count() == 1
    assert row(b.job_id).parents_remaining == 1


def test_structural_edges_are_kept_after_the_gating_edge_is_resolved():
    a = new_job(queue="a")
    b = new_job(queue="b", parents=[a.job_id])
    workflow_id = create(a, b)
    finish(a.job_id)
    assert row(b.job_id).state == JobState.SCHEDULED
    assert not JobDependency.objects.exists()
    assert list(WorkflowEdge.objects.values_list("parent_id", "child_id")) == [(a.job_id, b.job_id)]
    graph = store.workflow_graph(workflow_id)
    assert graph is not None
    assert graph.edges == ((a.job_id, b.job_id),)


def test_a_failed_parent_cancels_its_members_through_the_ordinary_cascade():
    a = new_job(queue="a", max_attempts=1)
    b = new_job(queue="b", parents=[a.job_id])
    c = new_job(queue="c", parents=[b.job_id])
    workflow_id = create(a, b, c)
    finish(a.job_id, Failure(next_due_time=None, error="boom"))
    assert row(b.job_id).state == JobState.CANCELLED
    assert row(c.job_id).terminal_cause == "parent-failure:Cancelled"
    assert store.workflow_status(workflow_id) is WorkflowStatus.FAILED


# --- Results and their precedence ---------------------------------------------------------------


def test_an_empty_workflow_is_refused_first():
    assert store.enqueue_workflow(definition(), now=T0) is R.EMPTY_WORKFLOW
    # Even an append to a workflow that does not exist: emptiness is checked first.
    assert store.enqueue_workflow(definition(is_append=True), now=T0) is R.EMPTY_WORKFLOW
    assert not Workflow.objects.exists()


def test_a_second_create_is_a_duplicate_workflow_and_writes_nothing():
    workflow_id = create(new_job(), name="first")
    before = snapshot()
    again = definition(new_job(), workflow_id=workflow_id, name="second")
    assert store.enqueue_workflow(again, now=T0) is R.DUPLICATE_WORKFLOW
    assert snapshot() == before
    assert Workflow.objects.get().name == "first"


def test_an_append_to_an_unknown_workflow_is_not_found():
    assert append(uuid.uuid4(), new_job()) is R.WORKFLOW_NOT_FOUND
    assert not JobRecord.objects.exists()


def test_the_workflow_check_comes_before_members_listed_twice():
    workflow_id = create(new_job())
    twice = new_job()
    assert store.enqueue_workflow(definition(twice, twice, workflow_id=workflow_id), now=T0) is (
        R.DUPLICATE_WORKFLOW
    )
    assert append(uuid.uuid4(), twice, twice) is R.WORKFLOW_NOT_FOUND


def test_a_member_listed_twice_comes_before_every_member_check():
    too_big = new_job(payload="x" * 70_000)
    twice = new_job()
    outside = new_job(parents=[uuid.uuid4()])
    assert store.enqueue_workflow(definition(too_big, outside, twice, twice), now=T0) is R.DUPLICATE_MEMBER
    assert not JobRecord.objects.exists()
    assert not Workflow.objects.exists()


def test_a_member_whose_id_exists_is_a_duplicate_member():
    standalone = enqueue()
    assert store.enqueue_workflow(definition(new_job(), new_job(job_id=standalone)), now=T0) is (
        R.DUPLICATE_MEMBER
    )
    assert JobRecord.objects.count() == 1


@pytest.mark.parametrize(
    ("overrides", "result"),
    [
        ({"payload": "x" * 70_000}, R.PAYLOAD_TOO_LARGE),
        ({"wire_name": "w" * 129}, R.WIRE_NAME_TOO_LONG),
        ({"parents": [uuid.uuid4() for _ in range(17)]}, R.TOO_MANY_PARENTS),
        ({"parents": [uuid.uuid4()]}, R.CONTAINMENT_VIOLATION),
    ],
    ids=["payload", "wire-name", "parents", "containment"],
)
def test_each_member_bound_and_containment_has_its_result(overrides, result):
    first = new_job()
    assert store.enqueue_workflow(definition(first, new_job(**overrides)), now=T0) is result
    assert not JobRecord.objects.exists()
    assert not Workflow.objects.exists()


def test_within_a_member_an_existing_id_comes_before_bounds_and_bounds_before_containment():
    standalone = enqueue()
    outside = [uuid.uuid4()]
    both = new_job(job_id=standalone, payload="x" * 70_000, parents=outside)
    assert store.enqueue_workflow(definition(both), now=T0) is R.DUPLICATE_MEMBER
    too_big_outside = new_job(payload="x" * 70_000, wire_name="w" * 129, parents=outside)
    assert store.enqueue_workflow(definition(too_big_outside), now=T0) is R.PAYLOAD_TOO_LARGE
    long_outside = new_job(wire_name="w" * 129, parents=[uuid.uuid4() for _ in range(17)])
    assert store.enqueue_workflow(definition(long_outside), now=T0) is R.WIRE_NAME_TOO_LONG
    many_outside = new_job(parents=[uuid.uuid4() for _ in range(17)])
    assert store.enqueue_workflow(definition(many_outside), now=T0) is R.TOO_MANY_PARENTS


def test_members_are_checked_in_the_order_listed():
    too_big = new_job(payload="x" * 70_000)
    outside = new_job(parents=[uuid.uuid4()])
    assert store.enqueue_workflow(definition(too_big, outside), now=T0) is R.PAYLOAD_TOO_LARGE
    assert store.enqueue_workflow(definition(outside, too_big), now=T0) is R.CONTAINMENT_VIOLATION


def test_a_parent_that_exists_outside_the_workflow_is_a_containment_violation():
    standalone = enqueue(queue="standalone")
    other = create(new_job())
    other_member = JobRecord.objects.get(workflow_id=other).job_id
    for parent in (standalone, other_member):
        child = new_job(parents=[parent])
        assert store.enqueue_workflow(definition(new_job(), child), now=T0) is R.CONTAINMENT_VIOLATION
    assert JobRecord.objects.count() == 2
    assert Workflow.objects.count() == 1


def test_bounds_follow_the_settings(backwave_settings):
    backwave_settings(MAX_PAYLOAD_BYTES=40, MAX_PARENTS_PER_JOB=1)
    a, b = new_job(), new_job()
    assert store.enqueue_workflow(definition(a, b, new_job(parents=[a.job_id, b.job_id])), now=T0) is (
        R.TOO_MANY_PARENTS
    )
    assert store.enqueue_workflow(definition(new_job(payload="x" * 39)), now=T0) is R.PAYLOAD_TOO_LARGE
    assert store.enqueue_workflow(definition(new_job(payload="x" * 38)), now=T0) is R.OK


def test_a_refusal_in_the_middle_of_the_list_writes_nothing():
    enqueue(queue="bystander")
    before = snapshot()
    members = [new_job(wire_name=f"m{i}") for i in range(5)]
    bad = new_job(parents=[uuid.uuid4()])
    tail = new_job(parents=[members[0].job_id])
    assert store.enqueue_workflow(definition(*members, bad, tail), now=T0) is R.CONTAINMENT_VIOLATION
    assert snapshot() == before


def test_a_refusal_inside_the_callers_transaction_leaves_it_usable():
    with transaction.atomic():
        kept = enqueue(queue="mine")
        bad = definition(new_job(), new_job(parents=[uuid.uuid4()]))
        assert store.enqueue_workflow(bad, now=T0) is R.CONTAINMENT_VIOLATION
        workflow_id = create(new_job(queue="later"))
    assert set(JobRecord.objects.values_list("queue", flat=True)) == {"mine", "later"}
    assert row(kept).workflow_id is None
    assert Workflow.objects.get().workflow_id == workflow_id


def test_a_workflow_rolls_back_with_the_callers_transaction():
    class Boom(Exception):
        pass

    with pytest.raises(Boom), transaction.atomic():
        create(new_job(), new_job())
        raise Boom
    assert not Workflow.objects.exists()
    assert not JobRecord.objects.exists()
    assert not WorkflowEdge.objects.exists()


def test_a_cycle_is_a_value_error_naming_the_members_and_writes_nothing():
    a_id, b_id, c_id = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    a = new_job(job_id=a_id, wire_name="a", parents=[c_id])
    b = new_job(job_id=b_id, wire_name="b", parents=[a_id])
    c = new_job(job_id=c_id, wire_name="c", parents=[b_id])
    root = new_job(wire_name="root")
    before = snapshot()
    with pytest.raises(WorkflowCycleError, match="dependency cycle") as caught:
        store.enqueue_workflow(definition(root, a, b, c), now=T0)
    assert isinstance(caught.value, ValueError)
    message = str(caught.value)
    for name, job_id in (("a", a_id), ("b", b_id), ("c", c_id)):
        assert f"'{name}' ({job_id})" in message
    assert "root" not in message
    assert set(caught.value.cycle) == {a_id, b_id, c_id}
    assert snapshot() == before


def test_a_member_that_is_its_own_parent_is_a_cycle():
    me = uuid.uuid4()
    with pytest.raises(ValueError, match=rf"'send-invoice' \({me}\) → 'send-invoice' \({me}\)"):
        store.enqueue_workflow(definition(new_job(job_id=me, parents=[me])), now=T0)
    assert not JobRecord.objects.exists()


def test_definitions_check_their_shape():
    with pytest.raises(TypeError, match=r"workflow_id must be a uuid\.UUID"):
        WorkflowDefinition(workflow_id="abc", members=(new_job(),))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"members\[1\] must be a NewJob, got dict"):
        WorkflowDefinition(workflow_id=uuid.uuid4(), members=(new_job(), {}))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="members must be a sequence of NewJob"):
        WorkflowDefinition(workflow_id=uuid.uuid4(), members=new_job())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="name is at most 255 characters, got 256"):
        WorkflowDefinition(workflow_id=uuid.uuid4(), name="n" * 256)
    with pytest.raises(ValueError, match="name must be non-empty"):
        WorkflowDefinition(workflow_id=uuid.uuid4(), name="")
    with pytest.raises(TypeError, match="is_append must be a bool"):
        WorkflowDefinition(workflow_id=uuid.uuid4(), is_append=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"restarted_from must be a uuid\.UUID"):
        WorkflowDefinition(workflow_id=uuid.uuid4(), restarted_from="x")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"members\[0\] .* is a unique job"):
        WorkflowDefinition(workflow_id=uuid.uuid4(), members=(new_job(unique=UniqueKey(key="k")),))
    members = [new_job(), new_job()]
    assert WorkflowDefinition(workflow_id=uuid.uuid4(), members=members).members == tuple(members)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="definition must be a WorkflowDefinition"):
        store.enqueue_workflow({"members": []}, now=T0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="now must be timezone-aware"):
        store.enqueue_workflow(definition(new_job()), now=T0.replace(tzinfo=None))


# --- Append -------------------------------------------------------------------------------------


def test_an_append_adds_members_whose_parents_are_stored_members():
    a = new_job(queue="a")
    workflow_id = create(a, name="grow")
    b = new_job(queue="b", parents=[a.job_id])
    c = new_job(queue="c", parents=[b.job_id])
    assert append(workflow_id, c, b, now=T0 + timedelta(minutes=1)) is R.OK
    assert row(b.job_id).state == JobState.AWAITING_PARENT
    assert row(c.job_id).workflow_id == workflow_id
    assert Workflow.objects.get().created_at == T0  # the row is the create's
    assert set(WorkflowEdge.objects.values_list("parent_id", "child_id")) == {
        (a.job_id, b.job_id),
        (b.job_id, c.job_id),
    }
    finish(a.job_id)
    assert row(b.job_id).state == JobState.SCHEDULED


def test_an_appended_member_with_an_ended_parent_starts_as_an_enqueue_would():
    ok = new_job(queue="ok")
    failed = new_job(queue="failed", max_attempts=1)
    workflow_id = create(ok, failed)
    finish(ok.job_id)
    finish(failed.job_id, Failure(next_due_time=None, error="boom"))
    after_ok = new_job(parents=[ok.job_id])
    after_failed = new_job(parents=[failed.job_id])
    either = new_job(parents=[failed.job_id], mode=DependencyMode.ON_ANY_TERMINAL)
    assert append(workflow_id, after_ok, after_failed, either) is R.OK
    assert row(after_ok.job_id).state == JobState.SCHEDULED
    assert row(after_failed.job_id).state == JobState.CANCELLED
    assert row(after_failed.job_id).terminal_cause == "parent-failure:DeadLettered"
    assert row(either.job_id).state == JobState.SCHEDULED
    assert not JobDependency.objects.exists()
    assert WorkflowEdge.objects.count() == 3


def test_an_append_that_reuses_a_member_id_or_reaches_outside_writes_nothing():
    a = new_job()
    workflow_id = create(a)
    before = snapshot()
    assert append(workflow_id, new_job(), new_job(job_id=a.job_id)) is R.DUPLICATE_MEMBER
    assert snapshot() == before
    standalone = enqueue(queue="x")
    assert append(workflow_id, new_job(), new_job(parents=[standalone])) is R.CONTAINMENT_VIOLATION
    assert set(JobRecord.objects.values_list("job_id", flat=True)) == {a.job_id, standalone}
    assert not WorkflowEdge.objects.exists()


def test_appending_to_a_drained_workflow_reopens_it():
    a = new_job(queue="a")
    workflow_id = create(a)
    finish(a.job_id)
    assert store.workflow_status(workflow_id) is WorkflowStatus.SUCCEEDED
    b = new_job(queue="b", parents=[a.job_id])
    assert append(workflow_id, b) is R.OK
    assert store.workflow_status(workflow_id) is WorkflowStatus.RUNNING
    finish(b.job_id)
    assert store.workflow_status(workflow_id) is WorkflowStatus.SUCCEEDED


# --- Status -------------------------------------------------------------------------------------


def test_status_is_projected_from_the_members():
    a = new_job(queue="sa", max_attempts=1)
    b = new_job(queue="sb", parents=[a.job_id], mode=DependencyMode.ON_ANY_TERMINAL)
    c = new_job(queue="sc")
    workflow_id = create(a, b, c)
    assert store.workflow_status(workflow_id) is WorkflowStatus.RUNNING
    store.cancel_job(c.job_id, actor="ops", now=T0)
    assert store.workflow_status(workflow_id) is WorkflowStatus.RUNNING  # a and b still live
    finish(a.job_id, Failure(next_due_time=None, error="boom"))
    assert store.workflow_status(workflow_id) is WorkflowStatus.RUNNING  # b was released
    finish(b.job_id)
    # Dead-Lettered, Cancelled and Succeeded: a failure wins over a cancellation.
    assert store.workflow_status(workflow_id) is WorkflowStatus.FAILED
    store.requeue(a.job_id, actor="ops", now=T0)
    assert store.workflow_status(workflow_id) is WorkflowStatus.RUNNING
    finish(a.job_id)
    assert store.workflow_status(workflow_id) is WorkflowStatus.CANCELLED


def test_a_quarantined_member_fails_the_workflow():
    a = new_job(queue="qa")
    workflow_id = create(a, new_job(queue="qb"))
    finish(a.job_id, Unroutable(reason="no handler"))
    [leased] = lease(queue="qb")
    assert store.workflow_status(workflow_id) is WorkflowStatus.RUNNING  # Leased
    report(leased.job_id)
    assert store.workflow_status(workflow_id) is WorkflowStatus.FAILED


def test_every_member_succeeded_is_succeeded_and_an_unknown_workflow_has_no_status():
    a = new_job(queue="a")
    workflow_id = create(a)
    finish(a.job_id)
    assert store.workflow_status(workflow_id) is WorkflowStatus.SUCCEEDED
    assert store.workflow_status(uuid.uuid4()) is None
    with pytest.raises(TypeError, match=r"workflow_id must be a uuid\.UUID"):
        store.workflow_status(str(workflow_id))


# --- Graph and listing --------------------------------------------------------------------------


def test_the_graph_lists_members_parents_first_with_the_edges():
    a = new_job(wire_name="a")
    b = new_job(wire_name="b", parents=[a.job_id])
    c = new_job(wire_name="c", parents=[a.job_id])
    d = new_job(wire_name="d", parents=[b.job_id, c.job_id])
    source = uuid.uuid4()
    workflow_id = create(d, c, b, a, name="diamond", restarted_from=source, now=T0 + timedelta(hours=1))
    graph = store.workflow_graph(workflow_id)
    assert graph is not None
    assert (graph.workflow_id, graph.name, graph.created_at, graph.restarted_from) == (
        workflow_id,
        "diamond",
        T0 + timedelta(hours=1),
        source,
    )
    assert graph.members == (a.job_id, c.job_id, b.job_id, d.job_id)
    assert set(graph.edges) == {
        (a.job_id, b.job_id),
        (a.job_id, c.job_id),
        (b.job_id, d.job_id),
        (c.job_id, d.job_id),
    }
    assert len(graph.edges) == 4
    assert store.workflow_graph(uuid.uuid4()) is None


def test_the_graph_includes_appended_members():
    a = new_job()
    workflow_id = create(a)
    b = new_job(parents=[a.job_id])
    append(workflow_id, b)
    graph = store.workflow_graph(workflow_id)
    assert graph is not None
    assert graph.members == (a.job_id, b.job_id)
    assert graph.edges == ((a.job_id, b.job_id),)


def test_workflows_are_listed_oldest_first_with_the_id_breaking_ties():
    low, high = uuid.UUID(int=1), uuid.UUID(int=2**127)
    create(new_job(), workflow_id=high, name="high", now=T0)
    create(new_job(), new_job(), workflow_id=low, name="low", now=T0)
    older = create(new_job(queue="older"), name="older", now=T0 - timedelta(seconds=1))
    listed = store.list_workflows()
    assert [w.workflow_id for w in listed] == [older, low, high]
    assert [(w.name, w.member_count, w.status) for w in listed] == [
        ("older", 1, WorkflowStatus.RUNNING),
        ("low", 2, WorkflowStatus.RUNNING),
        ("high", 1, WorkflowStatus.RUNNING),
    ]
    assert listed[1].counts == {JobState.SCHEDULED: 2}
    assert listed[0].created_at == T0 - timedelta(seconds=1)
    assert [w.workflow_id for w in store.list_workflows(limit=1, offset=1)] == [low]
    assert [w.workflow_id for w in store.list_workflows(offset=2)] == [high]
    assert store.list_workflows(limit=0) == []


def test_the_listing_counts_members_by_state():
    a = new_job(queue="a")
    b = new_job(queue="b", parents=[a.job_id])
    workflow_id = create(a, b)
    finish(a.job_id)
    finish(b.job_id)
    [summary] = store.list_workflows()
    assert summary.workflow_id == workflow_id
    assert summary.counts == {JobState.SUCCEEDED: 2}
    assert summary.status is WorkflowStatus.SUCCEEDED


# --- Concurrency (real sessions) ------------------------------------------------------------------


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_creates_of_one_workflow_store_it_once():
    import threading

    from django.db import connection

    workflow_id = uuid.uuid4()
    barrier = threading.Barrier(4)
    results: list[WorkflowEnqueueResult] = []
    errors: list[BaseException] = []

    def create_it(index: int) -> None:
        try:
            barrier.wait(30)
            wf = definition(new_job(queue=f"race-{index}"), workflow_id=workflow_id, name=f"try {index}")
            results.append(store.enqueue_workflow(wf, now=T0))
        except BaseException as error:  # reported below
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=create_it, args=(i,), daemon=True) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors, errors
    assert sorted(r.value for r in results) == sorted(["Ok"] + ["DuplicateWorkflow"] * 3)
    assert Workflow.objects.count() == 1
    assert JobRecord.objects.count() == 1
    assert JobRecord.objects.get().workflow_id == workflow_id
