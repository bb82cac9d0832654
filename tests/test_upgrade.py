"""Upgrade safety: from the previous release's schema to this one, nothing stored is lost.

The database is migrated back to :data:`PREVIOUS_RELEASE`, filled through that release's
historical models (what its code could write) with jobs in every state — a live lease, a job
awaiting its parent through an edge, tags, transition logs, a schedule, queue settings, audit
rows — then migrated forward while a worker of this version is running. The audit reads every
row back through the previous release's models (so a dropped or renamed column fails it), checks
that a row written the old way after the migration is still accepted, and finally lets a worker
drain the jobs.

Bump :data:`PREVIOUS_RELEASE` at each release (docs/upgrading.md, "At each release").
"""

from __future__ import annotations

import signal
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.apps.registry import Apps
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.recorder import MigrationRecorder
from django.utils import timezone

from backwave_django.core.states import DependencyMode, JobState
from tests.worker.conftest import Workers, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

APP = "backwave_django"
#: The latest migration of the last release: the schema an upgrading database starts from.
PREVIOUS_RELEASE = (APP, "0004_recurringschedule")

AUDITED_QUEUE = "upgrade"  # the jobs whose rows are compared; no worker serves it until the end
LIVE_QUEUE = "upgrade-live"  # keeps the worker busy while the migration runs
OLD_WORKER = "previous-release:4242:dead"
S = JobState


def _executor() -> MigrationExecutor:
    return MigrationExecutor(connection)


def _latest() -> list[tuple[str, str]]:
    return [node for node in _executor().loader.graph.leaf_nodes() if node[0] == APP]


def _previous_apps() -> Apps:
    return _executor().loader.project_state([PREVIOUS_RELEASE]).apps


@pytest.fixture
def previous_release() -> Iterator[Apps]:
    """The database at the previous release's schema; always migrated back to the latest after."""
    _executor().migrate([PREVIOUS_RELEASE])
    try:
        yield _previous_apps()
    finally:
        _executor().migrate(_latest())


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Workers]:
    pool = Workers(tmp_path)
    yield pool
    pool.stop_all()


class OldRelease:
    """Writes rows the way the previous release's code could: through its historical models."""

    def __init__(self, apps: Apps, now: datetime) -> None:
        self.apps = apps
        self.now = now
        self.model = {
            name: apps.get_model(APP, name)
            for name in (
                "JobRecord",
                "JobTransition",
                "JobDependency",
                "JobTag",
                "QueueSettings",
                "OperatorAudit",
                "WorkerNode",
                "RecurringSchedule",
            )
        }

    def job(
        self,
        state: JobState,
        *,
        queue: str = AUDITED_QUEUE,
        wire_name: str = "test.echo",
        history: tuple[JobState, ...] = (),
        tags: tuple[tuple[str, str], ...] = (),
        **fields: Any,
    ) -> Any:
        job_id = uuid.uuid4()
        steps = history or (state,)
        values: dict[str, Any] = {
            "job_id": job_id,
            "wire_name": wire_name,
            "queue": queue,
            "payload": {"args": [str(job_id)], "kwargs": {"state": state.name}},
            "state": state,
            "due_time": self.now - timedelta(minutes=1),
            "enqueued_at": self.now - timedelta(minutes=1),
            "next_ordinal": len(steps),
            **fields,
        }
        record = self.model["JobRecord"].objects.create(**values)
        self.model["JobTransition"].objects.bulk_create(
            self.model["JobTransition"](
                job=record,
                ordinal=ordinal,
                recorded_at=self.now - timedelta(seconds=30 - ordinal),
                state=step,
                attempt=min(ordinal, values.get("attempt", 0)),
                failure_detail="RuntimeError: boom\nTraceback ..." if step is S.DEAD_LETTERED else None,
                actor="enqueue" if ordinal == 0 else OLD_WORKER,
            )
            for ordinal, step in enumerate(steps)
        )
        self.model["JobTag"].objects.bulk_create(
            self.model["JobTag"](job=record, key=key, value=value) for key, value in tags
        )
        return record

    def fill_every_state(self) -> None:
        now = self.now
        parent = self.job(S.SCHEDULED, tags=(("tenant", "acme"), ("", "vip")))
        child = self.job(S.AWAITING_PARENT, parents_remaining=1, mode=DependencyMode.ON_SUCCESS)
        self.model["JobDependency"].objects.create(parent=parent, child=child)
        self.job(
            S.LEASED,
            history=(S.SCHEDULED, S.LEASED),
            attempt=1,
            lease_owner=OLD_WORKER,
            lease_expiry=now + timedelta(seconds=10),  # still live while the schema moves
            tags=(("", "leased"),),
        )
        self.job(
            S.SUCCEEDED,
            history=(S.SCHEDULED, S.LEASED, S.SUCCEEDED),
            attempt=1,
            terminal_at=now - timedelta(seconds=5),
            output={"sent": True},
        )
        self.job(S.CANCELLED, terminal_at=now - timedelta(seconds=5), terminal_cause="operator-alice")
        self.job(
            S.DEAD_LETTERED,
            history=(S.SCHEDULED, S.LEASED, S.DEAD_LETTERED),
            attempt=2,
            terminal_at=now - timedelta(seconds=5),
            terminal_cause="boom",
        )
        self.job(
            S.QUARANTINED,
            wire_name="retired.job",
            history=(S.SCHEDULED, S.LEASED, S.QUARANTINED),
            attempt=1,
            terminal_at=now - timedelta(seconds=5),
            terminal_cause="no handler registered for wire name 'retired.job'",
        )
        self.model["QueueSettings"].objects.create(queue=AUDITED_QUEUE, paused=False, concurrency_limit=5)
        self.model["OperatorAudit"].objects.create(
            actor="alice", action="cancel", target="some-job", recorded_at=now
        )
        self.model["WorkerNode"].objects.create(
            worker_id=OLD_WORKER,
            hostname="old-host",
            pid=4242,
            queues=[AUDITED_QUEUE],
            concurrency=4,
            started_at=now - timedelta(hours=1),
            last_seen_at=now - timedelta(seconds=1),
        )
        self.model["RecurringSchedule"].objects.create(
            schedule_id="upgrade-nightly",
            cron="0 0 2 * * *",
            wire_name="test.echo",
            payload={"args": [], "kwargs": {}},
            queue=AUDITED_QUEUE,
            cursor=now,
            skipped_ticks=[],
        )

    def snapshot(self) -> dict[str, list[dict[str, Any]]]:
        """Every stored row, as the previous release's code reads it."""
        ordering = {
            "JobRecord": ("job_id",),
            "JobTransition": ("job__job_id", "ordinal"),
            "JobDependency": ("parent__job_id", "child__job_id"),
            "JobTag": ("job__job_id", "key", "value"),
            "QueueSettings": ("queue",),
            "OperatorAudit": ("id",),
            "WorkerNode": ("worker_id",),
            "RecurringSchedule": ("schedule_id",),
        }
        return {
            name: list(self.model[name].objects.order_by(*order).values())
            for name, order in ordering.items()
        }


def _live_jobs(old: OldRelease, count: int) -> list[uuid.UUID]:
    return [
        old.job(
            S.SCHEDULED, queue=LIVE_QUEUE, wire_name="test.record", payload={"args": ["", f"live-{n}"], "kwargs": {}}
        ).job_id
        for n in range(count)
    ]


def test_upgrading_from_the_previous_release_loses_nothing(previous_release, workers):
    from backwave_django.models import JobRecord, JobTransition, WorkerNode

    applied = sorted(name for app, name in MigrationRecorder(connection).applied_migrations() if app == APP)
    assert applied[-1] == PREVIOUS_RELEASE[1]
    old = OldRelease(previous_release, timezone.now())
    old.fill_every_state()
    before = old.snapshot()
    live = _live_jobs(old, 20)

    # A worker of this version is running while the schema moves forward.
    worker = workers.start("--queues", LIVE_QUEUE, "--concurrency", "4", "--name", "during-migrate")
    wait_for(lambda: WorkerNode.objects.filter(worker_id__startswith="during-migrate:").exists(), what="worker")
    _executor().migrate(_latest())
    wait_for(
        lambda: JobRecord.objects.filter(job_id__in=live, state=S.SUCCEEDED).count() == len(live),
        what="the live queue to drain during and after the migration",
    )
    assert worker.poll() is None, workers.log()
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(30) == 0, workers.log()

    # Nothing the previous release stored changed, read through its own models.
    after_old = OldRelease(_previous_apps(), old.now)
    after = after_old.snapshot()
    after["JobRecord"] = [r for r in after["JobRecord"] if r["queue"] == AUDITED_QUEUE]
    after["JobTransition"] = [t for t in after["JobTransition"] if t["job_id"] in {r["sequence"] for r in after["JobRecord"]}]
    after["WorkerNode"] = [w for w in after["WorkerNode"] if w["worker_id"] == OLD_WORKER]
    assert after == before

    # The previous release's code keeps working against the new schema (workers mid-deploy).
    late = after_old.job(S.SCHEDULED, tags=(("", "late"),)).job_id

    # This version's worker finishes everything that was in flight (the lease expires first).
    lease_expiry = JobRecord.objects.get(lease_owner=OLD_WORKER).lease_expiry
    assert lease_expiry is not None
    wait_for(lambda: timezone.now() > lease_expiry, timeout=30, what="the old lease to expire")
    drainer = workers.start("--queues", AUDITED_QUEUE, "--name", "after-migrate")
    live_states = (S.SCHEDULED, S.AWAITING_PARENT, S.LEASED)
    wait_for(
        lambda: not JobRecord.objects.filter(queue=AUDITED_QUEUE, state__in=live_states).exists(),
        timeout=60,
        what="every audited job to finish",
    )
    drainer.send_signal(signal.SIGTERM)
    assert drainer.wait(30) == 0, workers.log(1)

    final = {r.job_id: r for r in JobRecord.objects.filter(queue=AUDITED_QUEUE)}
    for row in before["JobRecord"]:
        record = final[row["job_id"]]
        if row["state"] in live_states:
            assert record.state == S.SUCCEEDED, (JobState(row["state"]).name, record.terminal_cause)
            assert record.output == row["payload"]  # test.echo returns its arguments
        else:
            assert (record.state, record.attempt, record.terminal_at, record.terminal_cause) == (
                row["state"],
                row["attempt"],
                row["terminal_at"],
                row["terminal_cause"],
            )
    leased = next(row["job_id"] for row in before["JobRecord"] if row["state"] == S.LEASED)
    assert final[leased].attempt == 2  # the old lease expired on attempt 1 and the retry ran
    assert final[late].state == S.SUCCEEDED
    assert not JobRecord.objects.filter(job_id__in=final, parents_remaining__gt=0).exists()
    # Transition logs continued from where the previous release left them.
    for row in before["JobRecord"]:
        ordinals = list(JobTransition.objects.filter(job__job_id=row["job_id"]).values_list("ordinal", flat=True))
        assert ordinals == list(range(len(ordinals))), row["job_id"]
        assert len(ordinals) >= row["next_ordinal"]
