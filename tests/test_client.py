import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from backwave_django import DependencyMode, EnqueueError, EnqueueResult, JobState, enqueue_many
from backwave_django.models import JobRecord, JobTag
from tests.jobsapp import jobs

pytestmark = pytest.mark.django_db


def test_enqueue_stores_the_call_as_a_due_job():
    receipt = jobs.echo.enqueue("o-1", amount=5)
    assert receipt.enqueue_result is EnqueueResult.OK
    assert receipt.job_id.version == 7
    record = JobRecord.objects.get(job_id=receipt.job_id)
    assert (record.wire_name, record.queue, record.state) == ("test.echo", "default", JobState.SCHEDULED)
    assert record.payload == {"args": ["o-1"], "kwargs": {"amount": 5}}
    assert abs(record.due_time - timezone.now()) < timedelta(seconds=5)


def test_using_sets_queue_delay_parents_mode_tags_and_a_keyed_id():
    parent = jobs.echo.enqueue().job_id
    before = timezone.now()
    receipt = jobs.tagger.using(
        queue="eu",
        run_after=timedelta(minutes=5),
        parents=[parent],
        mode=DependencyMode.ON_ANY_TERMINAL,
        tags=["vip", ("tenant", "acme")],
        job_id="order-42",
    ).enqueue()
    record = JobRecord.objects.get(job_id=receipt.job_id)
    assert (record.queue, record.state, record.mode) == (
        "eu",
        JobState.AWAITING_PARENT,
        DependencyMode.ON_ANY_TERMINAL,
    )
    assert record.due_time >= before + timedelta(minutes=5)
    assert set(JobTag.objects.filter(job=record).values_list("key", "value")) == {
        ("", "from-definition"),
        ("", "vip"),
        ("tenant", "acme"),
    }
    again = jobs.tagger.using(job_id="order-42").enqueue()
    assert again == type(again)(job_id=receipt.job_id, enqueue_result=EnqueueResult.DUPLICATE)


def test_run_after_accepts_an_aware_datetime_and_refuses_a_naive_one():
    at = datetime(2030, 1, 1, tzinfo=UTC)
    receipt = jobs.echo.using(run_after=at).enqueue()
    assert JobRecord.objects.get(job_id=receipt.job_id).due_time == at
    with pytest.raises(ValueError, match="run_after must be timezone-aware"):
        jobs.echo.using(run_after=datetime(2030, 1, 1)).enqueue()


def test_refusals_raise_enqueue_error_naming_the_limit_and_the_value():
    with pytest.raises(
        EnqueueError,
        match=r"payload for wire name 'test\.echo' is 70,025 bytes; MAX_PAYLOAD_BYTES is 65,536 — store a reference instead",
    ) as raised:
        jobs.echo.enqueue("x" * 70_000)
    assert raised.value.result is EnqueueResult.PAYLOAD_TOO_LARGE
    missing = uuid.uuid4()
    with pytest.raises(EnqueueError, match=f"parent job.*do not exist: {missing}") as raised:
        jobs.echo.using(parents=[missing]).enqueue()
    assert raised.value.result is EnqueueResult.UNKNOWN_PARENT
    with pytest.raises(EnqueueError, match="has 17 parents; MAX_PARENTS_PER_JOB is 16"):
        jobs.echo.using(parents=[uuid.uuid4() for _ in range(17)]).enqueue()
    assert not JobRecord.objects.exists()


def test_non_json_arguments_are_refused_before_anything_is_stored():
    with pytest.raises(TypeError, match=r"argument 'args\[0\]' of job 'test\.echo'"):
        jobs.echo.enqueue(datetime.now(UTC))
    assert not JobRecord.objects.exists()


def test_enqueue_joins_the_callers_transaction():
    with pytest.raises(RuntimeError), transaction.atomic():
        jobs.echo.enqueue()
        raise RuntimeError
    assert not JobRecord.objects.exists()


def test_enqueue_many_stores_in_batches_and_keeps_input_order():
    prepared = [jobs.echo.prepare(i) for i in range(2_500)]
    receipts = enqueue_many(prepared)
    assert [r.job_id for r in receipts] == [p.job_id for p in prepared]
    assert {r.enqueue_result for r in receipts} == {EnqueueResult.OK}
    assert JobRecord.objects.count() == 2_500


def test_enqueue_many_may_name_a_parent_from_the_same_batch():
    parent = jobs.echo.prepare("parent")
    child = jobs.echo.using(parents=[parent.job_id]).prepare("child")
    enqueue_many([parent, child])
    states = dict(JobRecord.objects.values_list("job_id", "state"))
    assert states == {parent.job_id: JobState.SCHEDULED, child.job_id: JobState.AWAITING_PARENT}


def test_enqueue_many_reports_duplicates_and_refuses_non_prepared_items():
    prepared = jobs.echo.using(job_id="same").prepare()
    receipts = enqueue_many([prepared, prepared])
    assert [r.enqueue_result for r in receipts] == [EnqueueResult.OK, EnqueueResult.DUPLICATE]
    with pytest.raises(TypeError, match="enqueue_many takes prepared jobs"):
        enqueue_many([jobs.echo])  # type: ignore[list-item]
