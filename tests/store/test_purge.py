from datetime import timedelta

import pytest

from backwave_django import Failure, JobState, TerminalStateClass, Unroutable, store
from backwave_django.models import JobDependency, JobRecord, JobTag, JobTransition

from ..conftest import T0, enqueue, lease, new_job, report, row
from ..factories import JobRecordFactory

pytestmark = pytest.mark.django_db

OK_CLASS = TerminalStateClass.SUCCEEDED_OR_CANCELLED
FAILED_CLASS = TerminalStateClass.DEAD_LETTERED_OR_QUARANTINED


def _ended(outcome=None, now=T0, queue="default", **kw):
    job_id = enqueue(queue=queue, **kw)
    lease(queue=queue, now=now)
    report(job_id, outcome, now=now)
    return job_id


def test_purge_deletes_ended_jobs_of_the_class_with_their_log_and_tags():
    _ended(tags=["x"])  # Succeeded
    cancelled = enqueue(queue="c")
    store.cancel_job(cancelled, actor="ops", now=T0)
    dead = _ended(Failure(next_due_time=None, error="e"), queue="d")
    live = enqueue(queue="live")
    assert store.purge_terminal(OK_CLASS, terminal_before=T0) == 2
    assert set(JobRecord.objects.values_list("job_id", flat=True)) == {dead, live}
    assert not JobTag.objects.exists()
    assert set(JobTransition.objects.values_list("job__job_id", flat=True)) == {dead, live}
    assert store.purge_terminal(FAILED_CLASS, terminal_before=T0) == 1
    assert row(live).state == JobState.SCHEDULED


def test_purge_keeps_jobs_that_ended_after_the_cutoff_and_takes_the_oldest_first():
    first = _ended(now=T0)
    second = _ended(Unroutable(reason="r"), now=T0 + timedelta(seconds=1), queue="b")
    third = _ended(Unroutable(reason="r"), now=T0 + timedelta(seconds=2), queue="c")
    assert store.purge_terminal(FAILED_CLASS, terminal_before=T0 + timedelta(seconds=1)) == 1
    assert store.purge_terminal(FAILED_CLASS, terminal_before=T0 + timedelta(hours=1), max_jobs=1) == 1
    assert set(JobRecord.objects.values_list("job_id", flat=True)) == {first}
    assert second != third


def test_purge_is_clamped_to_the_batch_limit(backwave_settings):
    backwave_settings(MAX_PURGE_BATCH=3)
    JobRecordFactory.create_batch(5, state=JobState.SUCCEEDED, terminal=True)
    assert store.purge_terminal(OK_CLASS, terminal_before=T0, max_jobs=100) == 3
    assert store.purge_terminal(OK_CLASS, terminal_before=T0, max_jobs=0) == 0
    assert store.purge_terminal(OK_CLASS, terminal_before=T0) == 2


def test_purging_a_terminal_child_with_a_live_parent_removes_the_dangling_edge():
    parent = enqueue(queue="p")
    child = enqueue(parents=[parent])
    store.cancel_job(child, actor="ops", now=T0)
    assert JobDependency.objects.count() == 1
    assert store.purge_terminal(OK_CLASS, terminal_before=T0) == 1
    assert not JobDependency.objects.exists()
    lease(queue="p")
    assert report(parent).name == "APPLIED"
    assert row(parent).state == JobState.SUCCEEDED


def test_a_purged_id_can_be_enqueued_again():
    job_id = _ended()
    store.purge_terminal(OK_CLASS, terminal_before=T0)
    assert store.enqueue(new_job(job_id=job_id), now=T0).name == "OK"


def test_a_job_row_deleted_outside_the_store_takes_its_log_with_it():
    # The log's relation has no constraint in the database (migration 0016); CASCADE keeps
    # "deleted with the job" for any delete through Django.
    gone, kept = _ended(), enqueue(queue="other")
    JobRecord.objects.filter(job_id=gone).delete()
    assert set(JobTransition.objects.values_list("job__job_id", flat=True)) == {kept}
    assert not JobTransition.objects.exclude(job__in=JobRecord.objects.all()).exists()


def test_purge_reads_only_the_keys_of_the_jobs_it_deletes():
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    job_id = _ended(payload={"big": "x" * 1000})
    with CaptureQueriesContext(connection) as captured:
        assert store.purge_terminal(OK_CLASS, terminal_before=T0) == 1
    assert not JobRecord.objects.filter(job_id=job_id).exists()
    assert not JobTransition.objects.exists()
    assert not [q["sql"] for q in captured.captured_queries if '"payload"' in q["sql"]]


def test_purge_refuses_bad_arguments():
    from datetime import datetime

    with pytest.raises(ValueError, match="state_class must be a TerminalStateClass"):
        store.purge_terminal("old", terminal_before=T0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="terminal_before must be timezone-aware"):
        store.purge_terminal(OK_CLASS, terminal_before=datetime(2026, 1, 1))
