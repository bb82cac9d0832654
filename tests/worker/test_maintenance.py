"""A worker's maintenance pass (``worker/maintenance.py``): what its sweep of expired leases did,
in its result and its log line."""

from __future__ import annotations

import logging

import pytest

from backwave_django import JobState
from backwave_django.conf import get_settings
from backwave_django.worker.maintenance import maintenance_tick, run_maintenance

from ..conftest import LEASE, T0, enqueue, lease, row

pytestmark = pytest.mark.django_db

EXPIRED = T0 + LEASE


def test_the_sweep_counts_redelivered_and_dead_lettered_leases_apart():
    last_attempt = enqueue(max_attempts=1)
    attempts_left = [enqueue(max_attempts=3) for _ in range(2)]
    lease()
    tick = maintenance_tick(get_settings(), queues=["default"], now=EXPIRED)
    assert (tick.redelivered, tick.dead_lettered, tick.reclaimed) == (2, 1, 3)
    assert row(last_attempt).state == JobState.DEAD_LETTERED
    assert {row(job_id).state for job_id in attempts_left} == {JobState.SCHEDULED}


def test_the_sweep_log_line_says_what_happened_to_each_expired_lease(caplog):
    enqueue(max_attempts=1)
    lease()
    with caplog.at_level(logging.INFO, logger="backwave_django.worker"):
        run_maintenance(get_settings(), worker_id="worker-a", queues=["default"], now=EXPIRED)
    [line] = [record.getMessage() for record in caplog.records if "expired lease" in record.getMessage()]
    # The one job was on its last attempt: nothing was redelivered, and the line says so.
    assert line == (
        "Worker worker-a swept 1 expired lease(s): 0 Scheduled again for redelivery, "
        "1 Dead-Lettered (the lease expired on the last attempt)"
    )
