"""Helpers for the Django Tasks backend tests (Django 6.0+; every module here skips on 5.2).

Nothing here imports ``django.tasks`` at import time, so collecting this folder on Django 5.2
only produces the modules' skips.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone

from backwave_django import store
from backwave_django.core.outcomes import ClaimedJob, Outcome, OutcomeReport, Success
from backwave_django.core.states import OutcomeResult

LEASE = timedelta(minutes=1)


def claim(job_id: str | uuid.UUID, *, worker: str = "worker-1", now: datetime | None = None) -> ClaimedJob:
    """Lease the job with this id (it must be due; other due jobs in its queue are leased too)."""
    from backwave_django.models import JobRecord

    wanted = uuid.UUID(str(job_id))
    queue = JobRecord.objects.values_list("queue", flat=True).get(job_id=wanted)
    claimed = store.claim(
        worker_id=worker, queues=[queue], max_jobs=32, lease_duration=LEASE, now=now or timezone.now()
    )
    matching = [c for c in claimed if c.job_id == wanted]
    assert matching, f"job {job_id} was not claimable"
    return matching[0]


def report(
    claimed: ClaimedJob,
    outcome: Outcome | None = None,
    *,
    now: datetime | None = None,
    failure_detail: str | None = None,
    output: Any = None,
) -> None:
    result = store.report_outcome(
        OutcomeReport(
            job_id=claimed.job_id,
            worker_id=claimed.lease_owner or "",
            attempt=claimed.attempt,
            outcome=outcome or Success(),
            failure_detail=failure_detail,
            output=output,
        ),
        now=now or timezone.now(),
    )
    assert result is OutcomeResult.APPLIED, result


class SignalLog:
    """Records ``task_enqueued`` / ``task_started`` / ``task_finished`` as (signal, id, status, sender)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.events: list[tuple[str, str, str, type]] = []
        self.results: list[Any] = []

    def receiver(self, name: str) -> Any:
        def receive(sender: type, task_result: Any, **kwargs: Any) -> None:
            with self.lock:
                self.events.append((name, task_result.id, str(task_result.status), sender))
                self.results.append(task_result)

        return receive

    def names(self, result_id: str | None = None) -> list[tuple[str, str]]:
        with self.lock:
            return [(name, status) for name, rid, status, _ in self.events if result_id in (None, rid)]


@pytest.fixture
def task_signals() -> Iterator[SignalLog]:
    from django.tasks.signals import task_enqueued, task_finished, task_started

    log = SignalLog()
    receivers = {
        task_enqueued: log.receiver("enqueued"),
        task_started: log.receiver("started"),
        task_finished: log.receiver("finished"),
    }
    for signal, receive in receivers.items():
        signal.connect(receive, weak=False, dispatch_uid=f"backwave-test-{id(log)}")
    yield log
    for signal in receivers:
        signal.disconnect(dispatch_uid=f"backwave-test-{id(log)}")
