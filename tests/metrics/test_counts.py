"""The ended-state counts behind ``backwave_jobs_ended`` on PostgreSQL: the planner's estimate for
the large states, an exact count for the small ones (an estimate never reads below one row)."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.utils import timezone

from backwave_django.core.states import JobState
from backwave_django.models import JobRecord
from backwave_django.monitor import counts
from tests.factories import JobRecordFactory

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


def _analyze() -> None:
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE backwave_django_jobrecord")


def _planner_estimate(state: JobState) -> int:
    with connection.cursor() as cursor:
        cursor.execute(counts.ESTIMATE_STATE_ROWS, {"state": int(state)})
        (plan,) = cursor.fetchone()
    plan = json.loads(plan) if isinstance(plan, str) else plan
    return int(plan[0]["Plan"]["Plan Rows"])


def _ended() -> dict[JobState, int]:
    return dict(counts.read_counts(now=timezone.now()).ended)


def test_an_ended_state_without_jobs_reads_zero():
    JobRecordFactory.create_batch(2, state=JobState.SUCCEEDED, terminal_at=timezone.now())
    _analyze()
    assert _planner_estimate(JobState.QUARANTINED) >= 1  # what an alert on quarantined > 0 used to see
    assert _ended() == {
        JobState.SUCCEEDED: 2,
        JobState.CANCELLED: 0,
        JobState.DEAD_LETTERED: 0,
        JobState.QUARANTINED: 0,
    }


def test_a_state_estimated_at_the_threshold_or_above_reads_the_planners_estimate(monkeypatch):
    monkeypatch.setattr(counts, "EXACT_BELOW", 3)
    JobRecordFactory.create_batch(5, state=JobState.SUCCEEDED, terminal_at=timezone.now())
    _analyze()
    JobRecord.objects.filter(pk__in=list(JobRecord.objects.values_list("pk", flat=True)[:2])).delete()
    # The statistics still say 5 (nothing analyzed since): the reading is the estimate, not a count.
    assert _ended()[JobState.SUCCEEDED] == _planner_estimate(JobState.SUCCEEDED) == 5


def test_a_count_stops_at_the_threshold_when_the_statistics_are_stale(monkeypatch):
    monkeypatch.setattr(counts, "EXACT_BELOW", 3)
    JobRecordFactory.create_batch(5, state=JobState.SUCCEEDED, terminal_at=timezone.now())
    _analyze()  # statistics of a table with no quarantined job
    JobRecordFactory.create_batch(4, state=JobState.QUARANTINED, terminal_at=timezone.now())
    assert _planner_estimate(JobState.QUARANTINED) < 3
    assert _ended()[JobState.QUARANTINED] == 3  # at least that many: read at most 3 index entries
