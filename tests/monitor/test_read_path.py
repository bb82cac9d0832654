"""The monitor as the one read path: the job and schedule snapshots, the views ``results`` and the
testing harness take of them, and the reads moved here from store/, the console and the harness.

Every test here runs on PostgreSQL, SQLite and MariaDB (scripts/run_tests.sh runs tests/monitor on
all three).
"""

from __future__ import annotations

import ast
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from backwave_django import Failure, JobState, monitor, results, store
from backwave_django.conf import get_settings
from backwave_django.core.retry import RetryPolicy
from backwave_django.core.workflows import WorkflowDefinition
from backwave_django.models import ObserverDeadLetter, RecurringSchedule
from backwave_django.testing import snapshots

from ..conftest import LEASE, T0, enqueue, lease_one, new_job, report
from ..factories import JobRecordFactory, QueueSettingsFactory, WorkerNodeFactory

pytestmark = pytest.mark.django_db

PACKAGE = Path(monitor.__file__).resolve().parents[1]


# --- One job snapshot, and its views -----------------------------------------------------------------


def test_find_jobs_filters_and_reads_content_and_logs_in_bulk():
    first = enqueue(queue="mail", wire_name="send", tags=["vip"], payload={"args": [1], "kwargs": {}})
    second = enqueue(queue="mail", wire_name="send", due_time=T0 + timedelta(hours=1))
    other = enqueue(queue="sms", wire_name="text")
    lease_one(first)
    report(first, output={"sent": 1})

    assert [job.job_id for job in monitor.find_jobs()] == [first, second, other]
    assert [job.job_id for job in monitor.find_jobs(queue="mail")] == [first, second]
    assert [job.job_id for job in monitor.find_jobs(states=[JobState.SCHEDULED])] == [second, other]
    assert [job.job_id for job in monitor.find_jobs(wire_name="text")] == [other]
    assert monitor.find_jobs(job_id=uuid.uuid4()) == []

    (done,) = monitor.find_jobs(job_id=first, content=True, history=True)
    assert (done.payload, done.output, done.content_read) == ({"args": [1], "kwargs": {}}, {"sent": 1}, True)
    assert [entry.state for entry in done.transitions] == [
        JobState.SCHEDULED,
        JobState.LEASED,
        JobState.SUCCEEDED,
    ]
    assert done.labels_and_tags == ("vip",)
    (bare,) = monitor.find_jobs(job_id=first)
    assert (bare.payload, bare.output, bare.transitions) == (None, None, ())


def test_results_hands_out_the_documented_subset_output_only_once_succeeded():
    job_id = enqueue(tags=["b", ("k", "v"), "a"], priority=3)
    snapshot = results.get_job(job_id)
    assert snapshot is not None
    assert snapshot == results.JobSnapshot.of(monitor.get_job(job_id, content=True))  # type: ignore[arg-type]
    assert (snapshot.state, snapshot.priority, snapshot.output) == (JobState.SCHEDULED, 3, None)
    assert snapshot.tags == ("a", "b", ("k", "v"))
    lease_one(job_id)
    report(job_id, output=[1, 2])
    assert results.get_job(job_id).output == [1, 2]  # type: ignore[union-attr]
    assert results.get_job(uuid.uuid4()) is None


def test_the_harness_snapshot_is_a_view_of_the_monitors():
    job_id = enqueue(tags=[("k", "v"), "x"], payload={"args": [2], "kwargs": {"a": 1}})
    (view,) = snapshots.read_jobs(job_id=job_id)
    full = monitor.get_job(job_id, content=True, history=True)
    assert full is not None
    assert view == snapshots.JobSnapshot.of(full)
    assert (view.args, view.kwargs, view.tags) == ([2], {"a": 1}, ("x", ("k", "v")))
    assert view.transitions == full.transitions
    assert snapshots.TransitionSnapshot is monitor.HistoryEntry


# --- One schedule snapshot ---------------------------------------------------------------------------


def test_one_schedule_snapshot_for_the_console_the_cli_and_the_harness():
    RecurringSchedule.objects.create(
        schedule_id="nightly",
        cron="0 0 2 * * *",
        wire_name="send-invoice",
        payload={"args": [], "kwargs": {}},
        cursor=T0,
        skipped_ticks=["2025-12-31T02:00:00+00:00"],
    )
    (schedule,) = monitor.list_schedules()
    assert isinstance(schedule, monitor.ScheduleSnapshot)
    assert monitor.ScheduleRow is monitor.ScheduleSnapshot
    assert snapshots.ScheduleSnapshot is monitor.ScheduleSnapshot
    assert schedule.skipped_ticks == (datetime(2025, 12, 31, 2, tzinfo=UTC),)
    assert schedule.next_tick == schedule.next_due == datetime(2026, 1, 1, 2, tzinfo=UTC)
    assert snapshots.read_schedules() == [schedule]
    assert monitor.schedule_ids() == ["nightly"]
    assert monitor.schedule_row_id("nightly") == RecurringSchedule.objects.get().pk
    assert monitor.schedule_row_id("gone") is None


def test_a_schedules_live_instance_and_its_minted_jobs():
    RecurringSchedule.objects.create(
        schedule_id="s", cron="0 * * * * *", wire_name="w", payload={}, cursor=T0
    )
    old = JobRecordFactory(schedule_id="s", state=JobState.SUCCEEDED, terminal=True).job_id
    assert not monitor.has_live_instance("s")
    new = JobRecordFactory(schedule_id="s").job_id
    assert monitor.has_live_instance("s")
    annotated = monitor.with_live_instance(RecurringSchedule.objects.all())
    assert [row.has_live_instance for row in annotated] == [True]
    minted = monitor.minted_instances("s", limit=5)
    assert [(m.job_id, m.state) for m in minted] == [(new, JobState.SCHEDULED), (old, JobState.SUCCEEDED)]
    assert [m.job_id for m in monitor.minted_instances("s", limit=1)] == [new]


# --- The lease sweep's dead letters, read off the log ---------------------------------------------------


def test_a_dead_letter_of_the_lease_sweep_is_known_by_its_log_entry_not_its_words():
    expired = enqueue(queue="x", max_attempts=1)
    lease_one(expired)
    store.expire_leases(queues=["x"], now=T0 + 2 * LEASE, retry=RetryPolicy())
    failed = enqueue(queue="y", max_attempts=3)
    lease_one(failed)
    report(failed, Failure(next_due_time=None, error="gave up"))

    assert monitor.dead_lettered_by_lease_expiry(expired)
    assert not monitor.dead_lettered_by_lease_expiry(failed)
    assert not monitor.dead_lettered_by_lease_expiry(uuid.uuid4())
    from backwave_django.models import JobRecord

    flags = dict(
        monitor.with_lease_expiry(JobRecord.objects.all()).values_list(
            "job_id", monitor.LEASE_EXPIRED_ATTRIBUTE
        )
    )
    assert flags == {expired: True, failed: False}


# --- Reads for the console's pages ------------------------------------------------------------------


def test_counts_links_and_names_for_the_console():
    parent = new_job()
    store.enqueue(parent, now=T0)
    child = enqueue(parents=[parent.job_id], wire_name="child")
    for _ in range(3):
        enqueue(queue="dead", max_attempts=1)
    QueueSettingsFactory(queue="paused-one")
    WorkerNodeFactory(worker_id="w-b")
    WorkerNodeFactory(worker_id="w-a")

    assert monitor.count_in_state(JobState.SCHEDULED, up_to=2) == 2
    assert monitor.count_in_state(JobState.SCHEDULED, up_to=10) == 4
    parents, children = monitor.linked_jobs(child, limit=5)
    assert ([p.job_id for p in parents], children) == ([parent.job_id], [])
    assert [c.wire_name for c in monitor.linked_jobs(parent.job_id, limit=5)[1]] == ["child"]
    sequences = monitor.job_sequences([child, uuid.uuid4()])
    assert list(sequences) == [child]
    assert sequences[child] == monitor.get_job(child).sequence  # type: ignore[union-attr]
    assert monitor.configured_queues() == ["paused-one"]
    assert monitor.worker_ids() == ["w-a", "w-b"]


def test_workflow_reads_moved_from_the_store():
    first = new_job(wire_name="first")
    second = new_job(wire_name="second", parents=[first.job_id])
    third = new_job(wire_name="third", parents=[second.job_id])
    workflow_id = uuid.uuid4()
    definition = WorkflowDefinition(workflow_id=workflow_id, name="chain", members=(first, second, third))
    assert store.enqueue_workflow(definition, now=T0).name == "OK"

    assert store.workflow_status is monitor.workflow_status
    assert store.list_workflows is monitor.list_workflows
    assert monitor.member_counts([workflow_id]) == {
        workflow_id: {JobState.SCHEDULED: 1, JobState.AWAITING_PARENT: 2}
    }
    header = monitor.workflow_header(workflow_id)
    assert header is not None
    assert (header.workflow_id, header.name) == (workflow_id, "chain")
    assert monitor.workflow_header(uuid.uuid4()) is None
    page = monitor.workflow_members(workflow_id, limit=2)
    assert [m.wire_name for m in page.members] == ["first", "second"]
    assert page.truncated
    assert page.parents == {second.job_id: [first.job_id]}  # third is not listed, nor its edge
    whole = monitor.workflow_members(workflow_id, limit=3)
    assert not whole.truncated
    assert whole.parents == {second.job_id: [first.job_id], third.job_id: [second.job_id]}


def test_observer_dead_letters_newest_first_and_counted():
    for position, minutes in ((1, 0), (2, 5), (3, 1)):
        ObserverDeadLetter.objects.create(
            observer_id="o",
            position=position,
            job_id=uuid.uuid4(),
            ordinal=0,
            state=JobState.DEAD_LETTERED,
            attempt=1,
            delivery_attempts=3,
            dead_lettered_at=T0 + timedelta(minutes=minutes),
        )
    assert monitor.observer_dead_letter_count("o") == 3
    assert monitor.observer_dead_letter_count("other") == 0
    assert [d.position for d in monitor.recent_dead_letters("o", limit=2)] == [2, 3]
    assert [d.position for d in monitor.observer_dead_letters("o")] == [1, 3, 2]
    assert store.observer_dead_letters is monitor.observer_dead_letters
    job_id = enqueue()
    ObserverDeadLetter.objects.filter(position=1).update(job_id=job_id)
    linked = dict(
        monitor.with_job_sequence(ObserverDeadLetter.objects.all()).values_list("position", "job_pk")
    )
    assert linked == {1: monitor.get_job(job_id).sequence, 2: None, 3: None}  # type: ignore[union-attr]


# --- What the harness's pump reads ------------------------------------------------------------------


def test_what_is_due_and_what_happens_next():
    soon = enqueue(queue="a", due_time=T0 + timedelta(seconds=30))
    enqueue(queue="b", due_time=T0 + timedelta(seconds=10))
    assert not monitor.has_due_jobs(T0)
    assert monitor.has_pending_jobs()
    assert monitor.next_due_time(T0) == T0 + timedelta(seconds=10)
    assert monitor.next_due_time(T0, queues=["a"]) == T0 + timedelta(seconds=30)
    later = T0 + timedelta(minutes=1)
    assert monitor.has_due_jobs(later, queues=["a"])
    assert monitor.first_due_queue(later) == "b"
    assert monitor.first_due_queue(later, excluding=["b"]) == "a"
    assert monitor.first_due_queue(later, queues=["c"]) is None
    lease_one(soon, now=later)
    assert monitor.leased_queues() == ["a"]
    assert monitor.next_lease_expiry(later) == later + LEASE
    assert not monitor.has_pending_jobs(queues=["c"])


# --- The rooms' imports -------------------------------------------------------------------------------


def _imports(path: Path) -> list[str]:
    """The package modules ``path`` imports, relative ones resolved."""
    module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    package = module.rpartition(".")[0] if path.name != "__init__.py" else module.removesuffix(".__init__")
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = package.split(".")
            if node.level:
                base = base[: len(base) - (node.level - 1)]
                stem = ".".join([*base, node.module] if node.module else base)
            else:
                stem = node.module or ""
            found.extend(f"{stem}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
    return [name for name in found if name.startswith("backwave_django")]


@pytest.mark.parametrize("shell", ["admin", "cli", "metrics", "monitor", "testing", "results.py"])
def test_no_shell_reaches_into_another_rooms_private_module_or_the_worker_from_monitor(shell):
    root = PACKAGE / shell
    paths = [root] if root.is_file() else sorted(root.rglob("*.py"))
    room = f"backwave_django.{shell.removesuffix('.py')}"
    for path in paths:
        for name in _imports(path):
            parts = name.split(".")
            private = any(part.startswith("_") and part != "__init__" for part in parts[1:])
            assert not (private and not name.startswith(room + ".")), f"{path.name} imports {name}"
            if shell == "monitor":
                assert not name.startswith("backwave_django.worker"), f"{path.name} imports {name}"


def test_the_console_and_the_worker_share_one_staleness_rule():
    from backwave_django.core.liveness import STALE_WORKER_HEARTBEATS, stale_after

    assert stale_after(timedelta(seconds=10)) == timedelta(seconds=10 * STALE_WORKER_HEARTBEATS)
    interval = get_settings().heartbeat_interval
    assert monitor.worker_stale_after() == stale_after(interval)
