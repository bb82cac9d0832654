"""Query plans of hot statements that must stay cheap as finished jobs pile up (PostgreSQL).

Each test builds a table where the wrong plan is tempting, then reads ``EXPLAIN`` of the statement.
The claim's own plan is pinned in ``test_claim.py``.
"""

from __future__ import annotations

import pytest
from django.db import connection, transaction

from backwave_django.store.postgres import outcomes

from ..conftest import enqueue, lease, report


@pytest.mark.postgres
@pytest.mark.django_db
def test_the_check_for_ended_parents_reads_the_reported_jobs_by_id_not_every_finished_job():
    """After a report, the pipelined batch asks whether any job it just ended has waiting children.
    With the state condition beside the ids the planner would walk the terminal jobs' partial
    index (``backwave_job_purge``), reading every retained job on every batch."""
    finished = [enqueue() for _ in range(400)]
    with connection.cursor() as cursor:
        # The statistics of a fresh backlog (every job Scheduled, as when a worker starts on one)
        # make the terminal jobs' index look empty, so the planner is tempted most.
        cursor.execute("ANALYZE backwave_django_jobrecord")
    lease(max_jobs=400)
    for job_id in finished:
        report(job_id)
    reported = [enqueue() for _ in range(2)]
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("EXPLAIN (COSTS OFF) " + outcomes.ENDED_WITH_CHILDREN, {"ids": reported})
        plan = "\n".join(row[0] for row in cursor.fetchall())
        transaction.set_rollback(True)
    assert "backwave_job_purge" not in plan, plan
    assert "job_id_key" in plan, plan
