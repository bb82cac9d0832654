"""What ``prepare()`` checks once and ``enqueue_many`` reuses (client.py): each set of options is
checked once, as one ``NewJob`` that every prepared job is a copy of (``core.frozen.copy_unchecked``),
and each payload encoded once; every job still gets its own values, and a job built any other way
is checked in full by ``NewJob`` itself."""

import dataclasses
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from backwave_django import DependencyMode, EnqueueResult, NewJob, enqueue_many
from backwave_django.client import JobWithOptions
from backwave_django.models import JobRecord, JobTag
from tests.jobsapp import jobs

pytestmark = pytest.mark.django_db

TRACE = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
COLUMNS = ("wire_name", "queue", "payload", "state", "mode", "max_attempts", "backoff", "timeout")
MORE_COLUMNS = ("priority", "trace_context", "parents_remaining", "unique_key")


def _mixed_batch(with_child: bool) -> list[NewJob]:
    """Jobs of several definitions and options in one batch, one set of options used twice; with
    a child of a job of the batch (which takes the portable path on PostgreSQL too) or without."""
    shared = jobs.echo.using(priority=-3, tags=[("tenant", "x")], queue="eu")
    parent = jobs.echo.prepare("parent")
    child = jobs.echo.using(parents=[parent.job_id], mode=DependencyMode.ON_ANY_TERMINAL).prepare("child")
    return [
        jobs.echo.prepare("a"),
        jobs.tagger.using(
            queue="eu",
            priority=7,
            tags=["vip", "vip"],
            max_attempts=4,
            backoff=[1, timedelta(seconds=2)],
            timeout=timedelta(seconds=3),
            run_after=timedelta(minutes=5),
            trace_context=TRACE,
        ).prepare(),
        jobs.always_fails.prepare(),  # the definition's own max_attempts and backoff
        shared.prepare("b", k=1),
        jobs.sleep.prepare(0.5),  # the definition's queue
        shared.prepare("c", nested={"deep": [1, 2.5, None, "é"]}),
        jobs.echo.using(run_after=datetime(2030, 1, 1, tzinfo=UTC)).prepare(),
        parent,
        jobs.echo.prepare("a"),
        *([child] if with_child else []),
    ]


def _row(job_id: uuid.UUID) -> tuple[Any, ...]:
    record = JobRecord.objects.get(job_id=job_id)
    tags = sorted(JobTag.objects.filter(job=record).values_list("key", "value"))
    return (
        tuple(getattr(record, c) for c in COLUMNS + MORE_COLUMNS),
        record.due_time - record.enqueued_at,
        tags,
    )


@pytest.mark.parametrize("with_child", [False, True])
def test_a_mixed_batch_stores_each_jobs_own_values_as_a_fully_checked_copy_would(with_child: bool) -> None:
    prepared = _mixed_batch(with_child)
    receipts = enqueue_many(prepared)
    assert [r.enqueue_result for r in receipts] == [EnqueueResult.OK] * len(prepared)
    # The same jobs copied through NewJob's own checks (payload encoded again), with new ids.
    new_ids = {p.job_id: uuid.uuid4() for p in prepared}
    copies = [
        dataclasses.replace(
            p, job_id=new_ids[p.job_id], parents=tuple(new_ids[parent] for parent in p.parents)
        )
        for p in prepared
    ]
    enqueue_many(copies)
    for original, copy in zip(prepared, copies, strict=True):
        row, copied = _row(original.job_id), _row(copy.job_id)
        if original.run_after is None:  # a fixed due time, enqueued a little later
            row, copied = (row[0], row[2]), (copied[0], copied[2])
        assert row == copied

    values, delay, tags = _row(prepared[1].job_id)
    assert values == (
        "test.tagger", "eu", {"args": [], "kwargs": {}}, 0, 0, 4, [1.0, 2.0], 3.0, 7, TRACE, 0, None
    )  # fmt: skip
    assert delay == timedelta(minutes=5)
    assert tags == [("", "from-definition"), ("", "vip")]
    assert _row(prepared[2].job_id)[0][5:7] == (2, [0.0])
    shared = [_row(prepared[3].job_id), _row(prepared[5].job_id)]
    assert [r[0][:3] for r in shared] == [
        ("test.echo", "eu", {"args": ["b"], "kwargs": {"k": 1}}),
        ("test.echo", "eu", {"args": ["c"], "kwargs": {"nested": {"deep": [1, 2.5, None, "é"]}}}),
    ]
    assert [(r[0][8], r[2]) for r in shared] == [(-3, [("tenant", "x")])] * 2
    assert _row(prepared[4].job_id)[0][1] == "slow"
    assert JobRecord.objects.get(job_id=prepared[6].job_id).due_time == datetime(2030, 1, 1, tzinfo=UTC)
    assert prepared[0].job_id != prepared[8].job_id
    sequences = dict(JobRecord.objects.values_list("job_id", "sequence"))
    in_input_order = [sequences[p.job_id] for p in prepared]
    assert in_input_order == sorted(in_input_order)
    if with_child:
        child = JobRecord.objects.get(job_id=prepared[9].job_id)
        assert (child.mode, child.parents_remaining) == (DependencyMode.ON_ANY_TERMINAL, 1)


@pytest.mark.parametrize("with_child", [False, True])
def test_a_payload_changed_after_prepare_is_stored_as_it_was_prepared_on_both_paths(with_child: bool) -> None:
    arguments: dict[str, list[object]] = {"items": [1, 2]}
    parent = jobs.echo.prepare(arguments)
    batch = [parent, *([jobs.echo.using(parents=[parent.job_id]).prepare()] if with_child else [])]
    arguments["items"].append("added later")  # the caller's dict, still referenced by the payload
    enqueue_many(batch)
    assert JobRecord.objects.get(job_id=parent.job_id).payload == {"args": [{"items": [1, 2]}], "kwargs": {}}


def test_a_prepared_job_is_stored_as_the_same_job_built_in_full() -> None:
    prepared = jobs.tagger.using(tags=[("k", "v"), "vip"], backoff=[1], priority=3).prepare()
    now = datetime(2026, 1, 1, tzinfo=UTC)
    fast, full = prepared.due_at(now, TRACE), dataclasses.replace(prepared).due_at(now, TRACE)
    assert fast == full
    assert (fast.due_time, fast.run_after, fast.trace_context) == (now, None, TRACE)
    assert (fast.payload_json, fast.tag_pairs) == (full.payload_json, full.tag_pairs)
    assert fast.tag_pairs == (("", "from-definition"), ("k", "v"), ("", "vip"))


def test_a_prepared_job_is_a_new_job_like_one_built_by_its_constructor() -> None:
    """``prepare()`` copies the options' checked job (``core.frozen.copy_unchecked``); the job
    still has every field, compares, prints and copies as one built by ``NewJob(...)``, and is
    frozen."""
    options = jobs.tagger.using(tags=["vip"], priority=3, run_after=timedelta(minutes=1), queue="eu")
    prepared = options.prepare()
    built = NewJob(**{f.name: getattr(prepared, f.name) for f in dataclasses.fields(NewJob) if f.init})
    assert type(prepared) is NewJob
    assert prepared == built
    assert repr(prepared) == repr(built)
    assert (prepared.queue, prepared.priority, prepared.run_after) == ("eu", 3, timedelta(minutes=1))
    assert prepared.tags == built.tags
    assert prepared.payload_json == built.payload_json == b'{"args":[],"kwargs":{}}'
    assert prepared.tag_pairs == built.tag_pairs == (("", "from-definition"), ("", "vip"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        prepared.queue = "other"  # type: ignore[misc]
    assert dataclasses.replace(prepared, priority=4).priority == 4
    assert (prepared.id_is_new, built.id_is_new) == (True, False)  # a copy is not known to be new
    assert options.prepare().job_id != prepared.job_id


def test_a_copied_prepared_job_is_checked_again_in_full() -> None:
    with pytest.raises(ValueError, match="priority must be from -100 to 100"):
        dataclasses.replace(jobs.echo.prepare(), priority=500)
    with pytest.raises(ValueError, match="queue must be non-empty"):
        dataclasses.replace(jobs.echo.prepare(), queue="")
    with pytest.raises(TypeError, match="payload must be JSON-serializable"):
        dataclasses.replace(jobs.echo.prepare(), payload={"x": {1, 2}})
    with pytest.raises(TypeError, match="run_after must be a timedelta"):
        dataclasses.replace(jobs.echo.prepare(), run_after=5)  # type: ignore[arg-type]
    assert not JobRecord.objects.exists()


def test_options_are_checked_when_they_are_made() -> None:
    with pytest.raises(ValueError, match="priority must be from -100 to 100"):
        JobWithOptions(jobs.echo, priority=500)
    with pytest.raises(ValueError, match="trace_context must be a W3C traceparent"):
        JobWithOptions(jobs.echo, trace_context="not a traceparent")
    with pytest.raises(TypeError, match=r"parents\[1\] must be a uuid.UUID, got str"):
        jobs.echo.using(parents=[uuid.uuid4(), "x"])  # type: ignore[list-item]
    fine: JobWithOptions[Any, Any] = JobWithOptions(jobs.echo, priority=0)
    assert enqueue_many([fine.prepare(1), fine.prepare(2)])[1].enqueue_result is EnqueueResult.OK


def test_a_job_built_in_full_may_be_enqueued_with_prepared_ones() -> None:
    due = datetime(2030, 1, 1, tzinfo=UTC)
    built = NewJob(
        job_id=uuid.uuid4(), wire_name="test.echo", payload={"args": [], "kwargs": {}}, due_time=due
    )
    assert [r.enqueue_result for r in enqueue_many([jobs.echo.prepare(), built])] == [EnqueueResult.OK] * 2
    assert JobRecord.objects.get(job_id=built.job_id).due_time == due


def test_a_payload_is_encoded_once_and_an_argument_that_changes_is_named() -> None:
    prepared = jobs.echo.prepare("ünï", 2.5, flag=True)
    assert prepared.payload_json == b'{"args":["\xc3\xbcn\xc3\xaf",2.5],"kwargs":{"flag":true}}'
    with pytest.raises(TypeError, match=r"argument 'when' of job 'test\.echo' does not survive"):
        jobs.echo.prepare("ok", when={"a": (1,)})
    with pytest.raises(TypeError, match=r"argument 'args\[1\]' of job 'test\.echo' is not JSON"):
        jobs.echo.prepare("ok", float("nan"))
    with pytest.raises(TypeError, match=r"test\.always-fails: too many positional arguments"):
        jobs.always_fails.prepare(1)  # type: ignore[call-arg]
