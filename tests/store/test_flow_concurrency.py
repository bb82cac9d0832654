"""Flow control under real concurrency on PostgreSQL: real sessions on real threads claiming one
bucket at once never lease more than its concurrency; a freed slot hints the queue's workers."""

from __future__ import annotations

import threading

import pytest
from django.db import connections

from backwave_django import store
from backwave_django.core.limits import LimitValues
from backwave_django.core.outcomes import OutcomeReport, Success
from backwave_django.core.states import JobState
from backwave_django.models import JobRecord, LimitLease

from ..conftest import LEASE, T0, lease, report
from .flow_jobs import declare, enqueue_flow
from .test_concurrency import run_threads

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

CLAIMERS = 6
LIMIT = 3


def test_claimers_racing_for_one_bucket_never_lease_more_than_its_concurrency() -> None:
    declare(api=LimitValues(LIMIT, None, 1.0))
    for n in range(40):
        enqueue_flow(keys=(("api", "shared"),), partition=f"p{n % 3}")
    got: list[int] = []
    lock = threading.Lock()

    def claim(index: int) -> None:
        claimed = store.claim(
            worker_id=f"w{index}", queues=["default"], max_jobs=5, lease_duration=LEASE, now=T0
        )
        with lock:
            got.append(len(claimed))

    for _ in range(4):  # rounds: everyone claims at once, then the leased jobs finish
        got.clear()
        run_threads(CLAIMERS, claim)
        leased = list(JobRecord.objects.filter(state=JobState.LEASED).values_list("job_id", "lease_owner"))
        assert sum(got) == len(leased) == LIMIT
        assert LimitLease.objects.count() == LIMIT
        reports = [OutcomeReport(job_id=j, worker_id=str(w), attempt=1, outcome=Success()) for j, w in leased]
        store.report_outcomes(reports, now=T0)
        assert LimitLease.objects.count() == 0


def test_a_freed_slot_hints_the_queue_on_commit() -> None:
    import psycopg

    from backwave_django.database import listen_database

    declare(api=LimitValues(1, None, 1.0))
    job = enqueue_flow(keys=(("api", "a"),), queue="billing")
    plain = enqueue_flow(queue="plain")
    assert [c.job_id for c in lease("billing")] == [job]
    assert [c.job_id for c in lease("plain")] == [plain]
    params = connections[listen_database()].get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    with psycopg.connect(**params, autocommit=True) as listener:
        listener.execute(f"LISTEN {store.HINT_CHANNEL}")
        report(plain)
        report(job)
        received = [n.payload for n in listener.notifies(timeout=0.5)]
    assert received == ["billing"]
