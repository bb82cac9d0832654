"""A real worker with a batch window (``BATCH_WINDOW``, docs/worker.md "Trading latency for fewer
transactions"): a trickle of jobs shares claims and outcome writes, and claims are never closer
together than the window."""

from __future__ import annotations

import itertools
import signal
import time

import pytest

from backwave_django import JobState
from backwave_django.models import JobRecord, JobTransition, WorkerNode
from tests.jobsapp import jobs

from .conftest import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]

WINDOW = 0.25
TRICKLE = 12  # jobs, one every 40 ms: a claim each without a window (each is hinted on its own)


def _batches(state: JobState) -> list[float]:
    """The moments the worker's claims (``LEASED``) or outcome writes (``SUCCEEDED``) were recorded:
    one per statement, each batch's transitions sharing its ``now``."""
    times = JobTransition.objects.filter(state=state).order_by().values_list("recorded_at", flat=True).distinct()
    return sorted(t.timestamp() for t in times)


def test_a_trickle_shares_claims_and_writes_and_claims_keep_the_window_apart(workers):
    worker = workers.start("--queues", "default", BATCH_WINDOW=WINDOW, POLL_INTERVAL=5)
    wait_for(lambda: WorkerNode.objects.exists(), what="the worker to register")
    for i in range(TRICKLE):
        jobs.echo.enqueue(i)
        time.sleep(0.04)
    wait_for(
        lambda: JobRecord.objects.filter(state=JobState.SUCCEEDED).count() == TRICKLE,
        timeout=30,
        what="every job to succeed",
    )
    claims, writes = _batches(JobState.LEASED), _batches(JobState.SUCCEEDED)
    assert len(claims) < TRICKLE, claims
    assert len(writes) < TRICKLE, writes
    gaps = [later - earlier for earlier, later in itertools.pairwise(claims)]
    assert all(gap >= WINDOW - 0.01 for gap in gaps), gaps
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(20) == 0
